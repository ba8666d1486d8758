import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { loadScenario } from '../src/lab/lab.js';
import { CacheTierClient } from '../src/lab/real/cache-tier-link.js';
import { LOOPBACK } from '../src/lab/real/loopback.js';
import { startPgbouncer } from '../src/lab/real/pgbouncer.js';
import { startPostgres } from '../src/lab/real/postgres.js';
import { ProcessGroup, type RealChild } from '../src/lab/real/process-group.js';
import { type ProcessArgs } from '../src/lab/real/process-side.js';
import { type ServerProcessProtocol } from '../src/lab/real/real-messages.js';
import { wallNowMs } from '../src/lab/real/wall-clock.js';
import { type ServiceScenario } from '../src/lab/schema/service.js';
import { KeySets } from '../src/lab/world/key-sets.js';
import { type BelowOutcome } from '../src/lab/world/service-server.js';
import { type Source } from '../src/lab/world/origin-waits.js';

const tierModule = fileURLToPath(new URL('../src/lab/real/cache-tier-process.js', import.meta.url));

/** One read through `client`, as a server's worker makes it. */
const read = (client: CacheTierClient, key: string): Promise<[BelowOutcome, Source]> => new Promise((resolve) => client.read(key, 'normal', (outcome, source) => resolve([outcome, source])));

/**
 * The tier's one cache of a real run (`cache.scope: tier` without nodes,
 * issue 30): a process of its own that every server reads through over
 * loopback (cache-tier-process.ts, cache-tier-link.ts), as the simulation's
 * servers share one cache. Built as the runner builds it, over PostgreSQL
 * behind pgbouncer, on lab/examples/checkout.json's cache with a database
 * of one connection at 200 ms a query, so two reads of a key are in flight
 * together.
 */
describe('the tier’s one cache of a real run: one process every server reads through', () => {
  const group = new ProcessGroup({ selfName: null });
  const dir = mkdtempSync(join(tmpdir(), 'damper-real-'));
  const tiers = new Map<'naive' | 'damper', { readonly child: RealChild<ServerProcessProtocol>; readonly port: number }>();
  const clients: CacheTierClient[] = [];
  let key: string;

  before(async () => {
    const checkout = (await loadScenario('examples/checkout.json')) as ServiceScenario;
    const scenario: ServiceScenario = { ...checkout, database: { ...checkout.database!, capacityQps: 5, workers: 1 }, cache: { ...checkout.cache!, loadTimeoutMs: 2_000 } };
    const scenarioFile = join(dir, 'scenario.json');
    writeFileSync(scenarioFile, JSON.stringify(scenario));
    const keys = new KeySets(scenario.clients, scenario.keys).keys;
    key = keys[0]!;
    const database = await startPostgres(group, dir, keys, scenario.database!.workers);
    const databasePort = (await startPgbouncer(group, dir, database.port, scenario.database!)).port;
    await database.close();
    for (const variant of ['naive', 'damper'] as const) {
      const args: ProcessArgs = { scenarioFile, variant, seed: 1, port: 0, index: 0, below: [], databasePort };
      const child = group.fork<ServerProcessProtocol>(`cache-tier-${variant}`, tierModule, [JSON.stringify(args)]);
      const { port } = await Promise.race([child.ready(), group.failure]);
      await child.request({ type: 'start', zeroMs: wallNowMs(), life: 'first' });
      tiers.set(variant, { child, port });
    }
  });

  after(async () => {
    for (const client of clients) client.close();
    await group.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Two servers' connections to `variant`'s tier. */
  const servers = async (variant: 'naive' | 'damper'): Promise<[CacheTierClient, CacheTierClient]> => {
    const pair = await Promise.all([CacheTierClient.connect(tiers.get(variant)!.port), CacheTierClient.connect(tiers.get(variant)!.port)]);
    clients.push(...pair);
    return pair;
  };
  const queries = async (variant: 'naive' | 'damper'): Promise<number> => ((await tiers.get(variant)!.child.request({ type: 'report' })).sent ?? []).reduce((a, b) => a + b, 0);

  test('the steady state is there for every server; after a flush, two servers’ reads of one key are one load for damper (one cache for the tier), two for naive’s look-aside', async () => {
    for (const variant of ['naive', 'damper'] as const) {
      const [a, b] = await servers(variant);
      assert.deepEqual(await read(a, key), ['ok', 'cache'], `${variant}: the steady state`);
      assert.deepEqual(await read(b, key), ['ok', 'cache'], `${variant}: the steady state, for the other server too`);
      const before = await queries(variant);
      await tiers.get(variant)!.child.request({ type: 'flush' });
      assert.deepEqual(await Promise.all([read(a, key), read(b, key)]), [['ok', 'origin'], ['ok', 'origin']], `${variant}: both missed`);
      assert.equal((await queries(variant)) - before, variant === 'damper' ? 1 : 2, `${variant}: the database's queries for two servers' misses of one key`);
      assert.deepEqual(await read(b, key), ['ok', 'cache'], `${variant}: what one server's read loaded, the other reads`);
    }
  });

  test('an invalid value pushed by the write path: damper keeps the last known good, naive serves it, to every server', async () => {
    for (const variant of ['naive', 'damper'] as const) {
      const [a, b] = await servers(variant);
      await tiers.get(variant)!.child.request({ type: 'push', key, row: { version: 2, valid: false } });
      for (const server of [a, b]) assert.deepEqual(await read(server, key), [variant === 'damper' ? 'ok' : 'invalid', 'cache'], variant);
    }
  });

  test('a server gone (its connection reset, as a hung server’s restart does) leaves the tier whole for the others', async () => {
    const [a, b] = await servers('damper');
    assert.deepEqual(await read(a, key), ['ok', 'cache']);
    a.close();
    assert.deepEqual(await read(b, key), ['ok', 'cache']);
  });

  test('bytes that are not a read fail the tier’s process, and with it the run: never a run that reads on past a broken link', async () => {
    // The servers' own links first: a server whose tier is gone fails too, by design, and this test is the tier's.
    for (const client of clients.splice(0)) client.close();
    const socket = createConnection({ port: tiers.get('naive')!.port, host: LOOPBACK });
    await once(socket, 'connect');
    socket.on('error', () => {});
    socket.write('{"id":1,"key":"k"}\n');
    await assert.rejects(group.failure, /cache-tier-naive exited with code 1.*\n.*not an array of 3/s);
    socket.destroy();
  });
});
