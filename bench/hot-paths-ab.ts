/**
 * The two measured hot paths — a cache hit (`get` of a fresh key) and the
 * breaker's success path (`execute` of a task that resolves) — timed for two
 * builds of damper in one process, alternating, so a change to the library
 * can show it left them alone on a machine whose speed varies from day to
 * day. Not part of `npm run bench` (it needs a second build):
 *
 *   git worktree add /tmp/before <REV> && (cd /tmp/before && npx tsc -p tsconfig.build.json)
 *   npx tsc -p tsconfig.test.json && node build/bench/hot-paths-ab.js /tmp/before/dist/index.js
 *
 * It prints the median ns per call of each build over 8 alternating rounds
 * of 500,000 calls, and their ratio.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as damper from '../src/index.js';

type Library = typeof damper;

const ROUNDS = 8;
const CALLS = 500_000;

async function timed(call: () => Promise<unknown>, n: number): Promise<number> {
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await call();
  return Number(process.hrtime.bigint() - t) / n;
}

async function hotPaths(lib: Library): Promise<Record<'hit' | 'breaker', () => Promise<unknown>>> {
  const cache = new lib.Cache<number>({ ttl: 60_000, maxEntries: 2000 });
  const keys = Array.from({ length: 1000 }, (_, i) => `k${i}`);
  for (const [i, k] of keys.entries()) await cache.set(k, i);
  const noLoad = (): never => {
    throw new Error('a hit never loads');
  };
  const breaker = new lib.CircuitBreaker({});
  const ok = (): Promise<number> => Promise.resolve(1);
  let i = 0;
  return { hit: () => cache.get(keys[i++ % keys.length]!, noLoad), breaker: () => breaker.execute(ok) };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

const before = process.argv[2];
if (before === undefined) throw new Error('usage: node build/bench/hot-paths-ab.js <path to the other build’s dist/index.js>');
const builds: Record<string, Library> = {
  before: (await import(pathToFileURL(resolve(before)).href)) as Library,
  now: damper,
};
const paths = { before: await hotPaths(builds.before!), now: await hotPaths(builds.now!) };
for (const path of ['hit', 'breaker'] as const) {
  const ns: Record<string, number[]> = { before: [], now: [] };
  for (const b of ['before', 'now'] as const) await timed(paths[b][path], CALLS / 2);
  for (let r = 0; r < ROUNDS; r++) for (const b of r % 2 === 0 ? (['now', 'before'] as const) : (['before', 'now'] as const)) ns[b]!.push(await timed(paths[b][path], CALLS));
  const [a, b] = [median(ns.before!), median(ns.now!)];
  process.stdout.write(`${path}: before ${a.toFixed(1)} ns, now ${b.toFixed(1)} ns, now ÷ before ${(b / a).toFixed(3)}\n`);
}
