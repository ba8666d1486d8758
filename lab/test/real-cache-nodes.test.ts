import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { loadScenario } from '../src/lab/lab.js';
import { LOOPBACK } from '../src/lab/real/loopback.js';
import { ProcessGroup } from '../src/lab/real/process-group.js';
import { type CacheNodesProtocol } from '../src/lab/real/real-messages.js';
import { startCacheNodes } from '../src/lab/real/redis-nodes.js';
import { RedisRing } from '../src/lab/real/redis-ring.js';
import { type RealChild } from '../src/lab/real/process-group.js';
import { type NodePorts } from '../src/lab/real/redis-ring.js';
import { wallNowMs } from '../src/lab/real/wall-clock.js';
import { HashRing } from '../src/lab/world/hash-ring.js';
import { ejectedAt } from '../src/lab/world/service-faults.js';
import { type ServiceScenario } from '../src/lab/schema/service.js';

/**
 * A real run's cache tier on nodes (issue 30), wired as the runner wires
 * it: a redis-server per node and the process of their pacers
 * (redis-nodes.ts), and a server's client to them (redis-ring.ts), on
 * test/fixtures/real-cache-nodes.json (three nodes, node 1 ejected at 1 s).
 * The pacing itself is node-pacer.ts's, tested in real-node-pacer.test.ts.
 */
describe('the cache nodes of a real run: redis-servers behind their pacers, on the simulation’s ring', () => {
  const group = new ProcessGroup({ selfName: null });
  const dir = mkdtempSync(join(tmpdir(), 'damper-cache-nodes-'));
  const keys = Array.from({ length: 300 }, (_, i) => `key:${i}`);
  let scenario: ServiceScenario;
  let nodes: { readonly ports: readonly NodePorts[]; readonly pacers: RealChild<CacheNodesProtocol> };
  let ring: RedisRing;
  /** Straight to each redis-server: what the node holds, whoever wrote it. */
  let direct: Redis[];
  /** Where the simulation places each key. */
  let simulated: HashRing;

  before(async () => {
    scenario = (await loadScenario('test/fixtures/real-cache-nodes.json')) as ServiceScenario;
    const scenarioFile = join(dir, 'scenario.json');
    writeFileSync(scenarioFile, JSON.stringify(scenario));
    const shape = scenario.cache!.nodes!;
    nodes = await startCacheNodes(group, dir, shape.count, { scenarioFile, variant: 'damper', seed: 1, port: 0 });
    ring = new RedisRing(nodes.ports, shape.vnodes);
    direct = nodes.ports.map((p) => new Redis({ host: LOOPBACK, port: p.direct }));
    simulated = new HashRing(shape.vnodes);
    for (let i = 0; i < shape.count; i++) simulated.add(i);
  });

  after(async () => {
    await ring?.close();
    for (const r of direct ?? []) r.disconnect();
    await group.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const served = async (): Promise<number> => (await nodes.pacers.request({ type: 'report' })).served.reduce((a, b) => a + b, 0);

  test('the steady state goes straight to the nodes, each key on the node the simulation places it on; live calls are paced', async () => {
    // One paced call per node first: each client has connected (ioredis's own ready check is a paced command too).
    await Promise.all(nodes.ports.map((_, i) => ring.get(keys.find((k) => simulated.nodeOf(k) === i)!)));
    const first = await served();
    await ring.seed(async () => {
      await Promise.all(keys.map((key) => ring.set(key, 'steady', 60_000)));
    });
    assert.ok((await served()) - first <= 3, `seeding ${keys.length} keys cost the nodes ${(await served()) - first} calls`);
    for (const key of keys) {
      const held = await Promise.all(direct.map((r) => r.get(key)));
      assert.deepEqual(
        held.map((v, i) => (v === null ? -1 : i)).filter((i) => i >= 0),
        [simulated.nodeOf(key)],
        `${key} is on node ${simulated.nodeOf(key)} in the simulation`,
      );
    }
    assert.equal(await ring.get(keys[0]!), 'steady');
    assert.ok((await served()) > first, 'a live call went through a pacer');
  });

  test('an ejection at its instant: the node is flushed, its keys, off every server’s ring, are cold on the others, and its channel’s subscribers follow it', async () => {
    const channel = Array.from({ length: 1000 }, (_, i) => `channel:${i}`).find((c) => simulated.nodeOf(c) === 1)!;
    const heard: string[] = [];
    const unsubscribe = await ring.subscribe(channel, (m) => heard.push(m));
    const zero = wallNowMs();
    await nodes.pacers.request({ type: 'start', zeroMs: zero, life: 'first' });
    const onOne = keys.filter((k) => simulated.nodeOf(k) === 1);
    assert.ok(onOne.length > 50, 'node 1 holds a share of the keys');
    // The fixture ejects node 1 from 1 s: the pacers flush it then.
    const deadline = zero + 5_000;
    while ((await direct[1]!.dbsize()) > 0 && wallNowMs() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(await direct[1]!.dbsize(), 0, 'the ejected node lost its data');
    ring.ejected(ejectedAt(scenario, 1.5));
    for (const key of onOne.slice(0, 20)) assert.equal(await ring.get(key), undefined, `${key} moved, cold`);
    const stayed = keys.filter((k) => simulated.nodeOf(k) !== 1).slice(0, 20);
    for (const key of stayed) assert.equal(await ring.get(key), 'steady', `${key} stayed where it was`);
    // Published on the channel's new node, as every publisher now places it: heard by the subscription that moved there.
    const until = wallNowMs() + 5_000;
    while (heard.length === 0 && wallNowMs() < until) {
      await ring.publish(channel, 'after');
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(heard[0], 'after');
    await unsubscribe();
  });
});
