/**
 * Measurement 9: what a tag costs a read. Tags are written into a value's
 * entry when it is stored and its staleness is written into memory when a tag
 * is invalidated, so a tagged hit from memory should cost what an untagged
 * one does; a tagged value read from the shared tier costs one more look at
 * the store per tag (the tag's age), which an untagged one does not.
 *
 * a. L1: `get` of a fresh key, tagged (two tags) against untagged, in one
 *    cache, mitata as in the hit path, ratio within each round.
 * b. L2: an L1 miss that Redis holds fresh, tagged (one tag) against
 *    untagged, one `get` at a time, ratio within each round. Its own
 *    redis-server on a free loopback port, stopped at the end.
 *
 * `tsc -p tsconfig.test.json && node build/bench/tags.js` runs it alone.
 */
import { Redis } from 'ioredis';
import { measure } from 'mitata';
import { Cache } from '../src/index.js';
import { RedisStore } from '../src/stores/redis.js';
import { startRedis } from '../test/support/redis-server.js';
import { collect } from './gc.js';
import { table } from './report.js';

export interface TagRow {
  readonly name: string;
  readonly nsPerOp: number;
  readonly ratioToUntagged: number;
}

export interface TagResult {
  readonly rounds: number;
  readonly l1: readonly TagRow[];
  readonly l2: readonly TagRow[] | { readonly skipped: string };
}

const L1_KEYS = 1_000;
const L2_KEYS = 5_000;
const noLoad = (): never => {
  throw new Error('a hit never loads');
};

/** Alternating rounds of two timed functions; each row's median ns and the median of their ratio within a round. */
async function ab(rows: readonly { readonly name: string; readonly op: () => Promise<unknown> }[], rounds: number, minCpuTimeMs: number, log: (line: string) => void): Promise<TagRow[]> {
  const ns: number[][] = rows.map(() => []);
  for (const r of rows) await measure(r.op, { min_cpu_time: minCpuTimeMs * 1e6, gc: collect }); // warm-up
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < rows.length; k++) {
      const i = (k + round) % rows.length;
      const stats = await measure(rows[i]!.op, { min_cpu_time: minCpuTimeMs * 1e6, gc: collect });
      ns[i]!.push(stats.avg);
    }
    log(`  round ${round + 1}/${rounds}  ${rows.map((r, i) => `${r.name} ${ns[i]!.at(-1)!.toFixed(0)} ns`).join('  ')}`);
  }
  const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  return rows.map((r, i) => ({ name: r.name, nsPerOp: median(ns[i]!), ratioToUntagged: median(ns[i]!.map((x, j) => x / ns[0]![j]!)) }));
}

export async function tagsBench(log: (line: string) => void, options: { rounds?: number; minCpuTimeMs?: number } = {}): Promise<TagResult> {
  const rounds = options.rounds ?? 15;
  const minCpuTimeMs = options.minCpuTimeMs ?? 100;

  log(`  a. L1 hit: ${rounds} rounds × ${minCpuTimeMs} ms per row`);
  const memory = new Cache<number>({ ttl: 3_600_000, maxEntries: 2 * L1_KEYS });
  const plain = Array.from({ length: L1_KEYS }, (_, i) => `plain:${i}`);
  const tagged = Array.from({ length: L1_KEYS }, (_, i) => `tagged:${i}`);
  for (const [i, key] of plain.entries()) await memory.set(key, i);
  for (const [i, key] of tagged.entries()) await memory.set(key, i, { tags: ['catalogue', `shelf:${i % 10}`] });
  let a = 0;
  let b = 0;
  const l1 = await ab(
    [
      { name: 'untagged hit', op: () => memory.get(plain[a++ % L1_KEYS]!, noLoad) },
      { name: 'tagged hit (2 tags)', op: () => memory.get(tagged[b++ % L1_KEYS]!, noLoad) },
    ],
    rounds,
    minCpuTimeMs,
    log,
  );

  let l2: TagResult['l2'];
  let server: Awaited<ReturnType<typeof startRedis>> | undefined;
  try {
    server = await startRedis();
    // As the L2 measurement's one-at-a-time side (bench/l2.ts): no auto-pipelining, which would hold each command for a tick.
    const client = new Redis({ host: server.host, port: server.port, enableAutoPipelining: false, maxRetriesPerRequest: 1 });
    const store = new RedisStore({ client });
    const shared = { store, namespace: 'tagbench' };
    const writer = new Cache<{ id: number }>({ ttl: 3_600_000, maxEntries: 2 * L2_KEYS, shared });
    for (let i = 0; i < L2_KEYS; i++) {
      await writer.set(`plain:${i}`, { id: i });
      await writer.set(`tagged:${i}`, { id: i }, { tags: ['catalogue'] });
    }
    await writer.invalidateTags(['unrelated']);
    // Each read is an L1 miss: the reader is emptied whenever it has seen every key.
    const reader = new Cache<{ id: number }>({ ttl: 3_600_000, maxEntries: 4 * L2_KEYS, shared });
    while (reader.stats().shared?.busUp !== true) await new Promise((r) => setTimeout(r, 5));
    let p = 0;
    let t = 0;
    const next = (i: number): number => {
      if (i % L2_KEYS === 0 && i > 0) reader.clear();
      return i % L2_KEYS;
    };
    log(`  b. L1 miss, L2 hit on a real redis-server: ${rounds} rounds × ${minCpuTimeMs} ms per row`);
    l2 = await ab(
      [
        { name: 'untagged L2 hit', op: () => reader.get(`plain:${next(p++)}`, noLoad) },
        { name: 'tagged L2 hit (1 tag)', op: () => reader.get(`tagged:${next(t++)}`, noLoad) },
      ],
      rounds,
      minCpuTimeMs,
      log,
    );
    await writer.close();
    await reader.close();
    await store.close();
    await client.quit();
  } catch (error) {
    l2 = { skipped: error instanceof Error ? error.message : String(error) };
    log(`  L2 skipped: ${l2.skipped}`);
  } finally {
    await server?.stop();
  }
  return { rounds, l1, l2 };
}

export function tagsTable(result: TagResult): string {
  const rows = [...result.l1, ...('skipped' in result.l2 ? [] : result.l2)];
  return table(
    ['read', 'ns/op', 'ratio to its untagged row'],
    rows.map((r) => [r.name, r.nsPerOp.toFixed(0), `${r.ratioToUntagged.toFixed(2)}×`]),
    [false, true, true],
  );
}

if (process.argv[1]?.endsWith('tags.js') === true) {
  const result = await tagsBench((line) => console.log(line), { rounds: Number(process.env.BENCH_ROUNDS ?? 15), minCpuTimeMs: Number(process.env.BENCH_MIN_CPU_MS ?? 100) });
  console.log(`\n${tagsTable(result)}\n`);
}
