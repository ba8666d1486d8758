/**
 * Measurement 1: the hit path. Every library holds the same 1000 keys, fresh
 * for 60 s; each timed iteration asks for the next key in the cycle and awaits
 * the promise (mitata awaits whatever the function returns). No loader may run
 * while timing: the scenario checks it.
 *
 * Rows besides the peers:
 * - "floor": an `async` function returning `lru.get(key)` — the least any
 *   promise-returning cache can cost;
 * - "lru-cache fetch (no ttl)": lru-cache without its TTL bookkeeping, for
 *   reference only; ratios use the like-for-like row with `ttl: 60_000`.
 */
import { measure } from 'mitata';
import { collect } from './gc.js';
import { LRUCache } from 'lru-cache';
import { type Load, type Peer, type Subject, type Value, lruCache, peers } from './peers.js';

export const HIT_KEYS = 1000;
export const HIT_TTL_MS = 60_000;

export interface HitRow {
  readonly name: string;
  /** Median over rounds of mitata's mean time per awaited call. */
  readonly nsPerOp: number;
  /** Each round's mean, ns. */
  readonly roundsNs: readonly number[];
  /** Median over rounds of mitata's p50 (of batch means), ns. */
  readonly p50Ns: number;
  /** Fastest round's mean, ns. */
  readonly minNs: number;
  /** Median over rounds of (this row ÷ lru-cache fetch) within the round. */
  readonly ratioToLruFetch: number;
  /** Interquartile range of that per-round ratio: how much the machine's noise moves it. */
  readonly ratioToLruFetchIqr: readonly [number, number];
  /** Median over rounds of (this row ÷ floor) within the round. */
  readonly ratioToFloor: number;
}

export interface HitResult {
  readonly keys: number;
  readonly ttlMs: number;
  readonly rounds: number;
  readonly minCpuTimeMs: number;
  readonly rows: readonly HitRow[];
}

interface Contender {
  readonly name: string;
  readonly subject: Subject;
  /** Calls to the origin; must not move while timing. */
  calls: () => number;
}

export const FLOOR = 'floor (async lru.get)';
const LRU_NO_TTL = 'lru-cache fetch (no ttl)';

export async function hitPath(options: { rounds: number; minCpuTimeMs: number; log: (line: string) => void }): Promise<HitResult> {
  const keys = Array.from({ length: HIT_KEYS }, (_, i) => `user:${i}`);
  const contenders: Contender[] = [...peers.map(contender), lruNoTtl(), floor(keys)];

  for (const c of contenders) {
    for (const key of keys) await c.subject.get(key);
    const before = c.calls();
    for (const key of keys) {
      const v = await c.subject.get(key);
      if (v?.key !== key) throw new Error(`${c.name}: wrong value for ${key} after warm-up`);
    }
    if (c.calls() !== before) throw new Error(`${c.name}: a warm key was loaded again`);
  }

  const drivers = new Map(contenders.map((c, id) => [c, driver(id, c.subject, keys)]));
  // A discarded round first: whichever library is measured first would
  // otherwise also pay for mitata's and V8's own warm-up.
  for (const c of contenders) await measure(drivers.get(c) as () => Promise<unknown>, { min_cpu_time: options.minCpuTimeMs * 1e6, gc: collect });
  // samples[round][name]: this machine (a 2-core VM) drifts by tens of percent
  // over seconds, so ratios are taken within a round, between measurements
  // made moments apart, and the median of those is reported.
  const samples: Map<string, { avg: number; p50: number }>[] = [];
  for (let round = 0; round < options.rounds; round++) {
    const thisRound = new Map<string, { avg: number; p50: number }>();
    samples.push(thisRound);
    // Rotate the order each round so no library always runs first (or last, after the most garbage).
    const order = contenders.map((_, i) => contenders[(i + round * 3) % contenders.length] as Contender);
    for (const c of order) {
      const before = c.calls();
      const stats = await measure(drivers.get(c) as () => Promise<unknown>, { min_cpu_time: options.minCpuTimeMs * 1e6, gc: collect });
      if (c.calls() !== before) throw new Error(`${c.name}: the loader ran ${c.calls() - before} times during the hit-path measurement`);
      thisRound.set(c.name, { avg: stats.avg, p50: stats.p50 });
      options.log(`  round ${round + 1}/${options.rounds}  ${c.name.padEnd(26)} ${stats.avg.toFixed(1).padStart(8)} ns/op`);
    }
  }
  for (const c of contenders) await c.subject.close();

  const avg = (round: Map<string, { avg: number }>, name: string): number => {
    const s = round.get(name);
    if (s === undefined) throw new Error(`no sample for ${name}`);
    return s.avg;
  };
  const rows = contenders.map((c): HitRow => {
    const roundsNs = samples.map((r) => avg(r, c.name));
    const p50s = samples.map((r) => r.get(c.name)?.p50 ?? Number.NaN);
    const toLru = samples.map((r) => avg(r, c.name) / avg(r, lruCache.name));
    return {
      name: c.name,
      nsPerOp: median(roundsNs),
      roundsNs,
      minNs: Math.min(...roundsNs),
      p50Ns: median(p50s),
      ratioToLruFetch: median(toLru),
      ratioToLruFetchIqr: [quantile(toLru, 0.25), quantile(toLru, 0.75)],
      ratioToFloor: median(samples.map((r) => avg(r, c.name) / avg(r, FLOOR))),
    };
  });
  return { keys: HIT_KEYS, ttlMs: HIT_TTL_MS, rounds: options.rounds, minCpuTimeMs: options.minCpuTimeMs, rows };
}

function median(xs: readonly number[]): number {
  return quantile(xs, 0.5);
}

/** Linear-interpolated quantile. */
function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) throw new Error('quantile of nothing');
  const sorted = [...xs].sort((a, b) => a - b);
  const at = (sorted.length - 1) * q;
  const lo = sorted[Math.floor(at)] ?? 0;
  const hi = sorted[Math.ceil(at)] ?? 0;
  return lo + (hi - lo) * (at - Math.floor(at));
}

function counted(): { load: Load; calls: () => number } {
  let calls = 0;
  return {
    load: (key) => {
      calls++;
      return Promise.resolve({ key, n: calls });
    },
    calls: () => calls,
  };
}

function contender(peer: Peer): Contender {
  const origin = counted();
  return { name: peer.name, subject: peer.create(origin.load, { ttlMs: HIT_TTL_MS, protective: false }), calls: origin.calls };
}

/** lru-cache `fetch` without a ttl: what the like-for-like row pays for its TTL bookkeeping. */
function lruNoTtl(): Contender {
  const origin = counted();
  const lru = new LRUCache<string, Value>({ max: 10_000, fetchMethod: (key) => origin.load(key) });
  return { name: LRU_NO_TTL, subject: { get: (key) => lru.fetch(key), close: () => Promise.resolve() }, calls: origin.calls };
}

/** The floor: an async function around a plain LRU read, filled beforehand. */
function floor(keys: readonly string[]): Contender {
  const lru = new LRUCache<string, Value>({ max: 10_000 });
  keys.forEach((key, n) => lru.set(key, { key, n }));
  return { name: FLOOR, subject: { get: async (key) => lru.get(key), close: () => Promise.resolve() }, calls: () => 0 };
}


/**
 * The timed function: next key, call, return the promise for mitata to await.
 * Built with `new Function` from a source text unique to each library: V8
 * shares type feedback between closures of one function literal (and caches
 * `new Function` by source text), so a call site shared by eight libraries
 * would go megamorphic, or deoptimize on "wrong call target", and slow down
 * whichever happened to run after another.
 */
function driver(id: number, subject: Subject, keys: readonly string[]): () => Promise<unknown> {
  const make = new Function(
    'get',
    'keys',
    `/* hit-path driver #${id} */ let i = 0; const n = keys.length;
     return function hit() { const key = keys[i]; i = i + 1 === n ? 0 : i + 1; return get(key); };`,
  ) as (get: (key: string) => Promise<unknown>, keys: readonly string[]) => () => Promise<unknown>;
  return make(subject.get, keys);
}
