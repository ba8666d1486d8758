/**
 * Measurement 6: the shared tier (L2, Redis). A `Cache` over a `RedisStore`
 * reads a key it has never seen (an L1 miss) that Redis holds, fresh: one
 * `get` is then the read script, the envelope decode, the store's breaker
 * and time limit, the flight and the commit to memory. The peer is what an
 * application without damper would do: ioredis `client.get(key)` and
 * `JSON.parse` of the same value stored as plain JSON.
 *
 * The bench starts its own redis-server on a free loopback port (never the
 * machine's 6379) and stops it at the end. 20,000 keys of a ~200-byte JSON
 * object are written beforehand, through a damper `Cache` (so the envelopes
 * are damper's own) and as plain JSON under a separate prefix.
 *
 * a. Latency: one `get` at a time, awaited; mitata as in the hit path, ratio
 *    to the raw client within each round, median over rounds. Every call is
 *    an L1 miss: the readers have never seen the key (two readers take turns
 *    when the key set is exhausted, and are cleared after each measurement),
 *    checked by counting what each reader holds after each measurement.
 * b. Throughput: batches of 1,000 concurrent `get`s of distinct keys, all
 *    20,000 keys once per measurement, on auto-pipelined clients; ops/s.
 *
 * Rows besides damper and the raw client: "RedisStore.read + decode", the
 * store's read script and `decodeEnvelope` without the cache above them, so
 * the difference between the three rows says where the time goes.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Redis } from 'ioredis';
import { measure } from 'mitata';
import { Cache } from '../src/index.js';
import { decodeEnvelope } from '../src/stores/envelope.js';
import { RedisStore } from '../src/stores/redis.js';
import { startRedis } from '../test/support/redis-server.js';
import { collect } from './gc.js';
import { table } from './report.js';

export const L2_KEYS = 20_000;
export const L2_BATCH = 1_000;
export const RAW = 'ioredis get + JSON.parse';
export const DAMPER = 'damper cache.get (L1 miss, L2 hit)';
export const STORE = 'RedisStore.read + decode';
const NAMESPACE = 'bench';
const PREFIX = 'damperbench';
const RAW_PREFIX = 'rawbench';
/** Readers taking turns in the latency measurement, so no reader sees a key twice. */
const READERS = 2;

export interface L2Value {
  readonly id: number;
  readonly key: string;
  readonly name: string;
  readonly email: string;
  readonly createdAt: string;
  readonly roles: readonly string[];
  readonly score: number;
  readonly active: boolean;
}

export interface L2LatencyRow {
  readonly name: string;
  /** Median over rounds of mitata's mean time per awaited call, ns. */
  readonly nsPerOp: number;
  /** Fastest round's mean, ns. */
  readonly minNs: number;
  /** Median over rounds of mitata's p50, ns. */
  readonly p50Ns: number;
  /** Median over rounds of (this row ÷ raw client) within the round. */
  readonly ratioToRaw: number;
  readonly ratioToRawIqr: readonly [number, number];
  readonly roundsNs: readonly number[];
}

export interface L2ThroughputRow {
  readonly name: string;
  /** Median over rounds of ops/s (20,000 gets in batches of 1,000 concurrent). */
  readonly opsPerSec: number;
  /** Best round's ops/s. */
  readonly maxOpsPerSec: number;
  /** Median over rounds of (raw ops/s ÷ this row's ops/s) within the round: time per op relative to the raw client. */
  readonly ratioToRaw: number;
  readonly ratioToRawIqr: readonly [number, number];
  readonly roundsOpsPerSec: readonly number[];
}

export interface L2Result {
  readonly keys: number;
  readonly valueBytes: number;
  readonly batch: number;
  readonly redis: string;
  readonly ioredis: string;
  readonly rounds: number;
  readonly minCpuTimeMs: number;
  readonly throughputRounds: number;
  readonly target: string;
  readonly latency: readonly L2LatencyRow[];
  readonly throughput: readonly L2ThroughputRow[];
}

export function valueOf(i: number): L2Value {
  return {
    id: i,
    key: `user:${i}`,
    name: `User Number ${i}`,
    email: `user.number.${i}@example.com`,
    createdAt: new Date(Date.UTC(2024, 0, 1) + i * 60_000).toISOString(),
    roles: ['reader', 'writer', i % 2 === 0 ? 'admin' : 'guest'],
    score: Math.round(((i * 7919) % 10_000) * 1.37) / 100,
    active: i % 3 !== 0,
  };
}

type Get = (key: string) => Promise<unknown>;

interface Side {
  /** Auto-pipelined or not. */
  readonly client: Redis;
  readonly store: RedisStore;
  readonly readers: Cache<L2Value>[];
}

export async function l2Bench(log: (line: string) => void, options: { rounds?: number; minCpuTimeMs?: number; throughputRounds?: number } = {}): Promise<L2Result> {
  const rounds = options.rounds ?? 15;
  const minCpuTimeMs = options.minCpuTimeMs ?? 100;
  const throughputRounds = options.throughputRounds ?? 10;
  const server = await startRedis();
  const closers: (() => Promise<unknown>)[] = [];
  try {
    log(`  redis-server ${redisVersion()} on ${server.url} (started by the bench), ioredis ${ioredisVersion()}`);
    const connect = (enableAutoPipelining: boolean): Redis => {
      const client = new Redis({ host: server.host, port: server.port, enableAutoPipelining, maxRetriesPerRequest: 1 });
      closers.push(() => client.quit());
      return client;
    };
    let loaderCalls = 0;
    const loader = (): never => {
      loaderCalls++;
      throw new Error('the loader must not run: every key is in Redis');
    };
    const side = async (pipelined: boolean, readers: number): Promise<Side> => {
      const client = connect(pipelined);
      const store = new RedisStore({ client, prefix: PREFIX });
      closers.push(() => store.close());
      const caches = Array.from({ length: readers }, () => reader(store));
      for (const c of caches) closers.push(() => c.close());
      await Promise.all(caches.map(busUp));
      return { client, store, readers: caches };
    };

    // Fill: damper's envelopes through a writer Cache, plain JSON beside them.
    const keys = Array.from({ length: L2_KEYS }, (_, i) => `user:${i}`);
    const rawKeys = keys.map((k) => `${RAW_PREFIX}:${k}`);
    const fillClient = connect(true);
    const fillStore = new RedisStore({ client: fillClient, prefix: PREFIX });
    const writer = new Cache<L2Value>({ ttl: 600_000, maxEntries: L2_KEYS * 2, shared: { store: fillStore, namespace: NAMESPACE } });
    for (let from = 0; from < L2_KEYS; from += L2_BATCH) {
      const chunk = keys.slice(from, from + L2_BATCH);
      await Promise.all(chunk.map((key, j) => writer.set(key, valueOf(from + j))));
      await Promise.all(chunk.map((key, j) => fillClient.set(`${RAW_PREFIX}:${key}`, JSON.stringify(valueOf(from + j)), 'PX', 900_000)));
    }
    await writer.close();
    await fillStore.close();
    const valueBytes = Buffer.byteLength(JSON.stringify(valueOf(12_345)));
    log(`  filled ${L2_KEYS} keys (value ${valueBytes} bytes of JSON) in damper envelopes and as plain JSON`);

    const latency = await side(false, READERS);
    const throughput = await side(true, 1);

    // Correctness first, untimed: every path returns the key's value.
    const parse = (text: string | null): unknown => {
      if (text === null) throw new Error('raw key missing');
      return JSON.parse(text);
    };
    const decode = (r: { value: string } | undefined): unknown => {
      if (r === undefined) throw new Error('envelope missing');
      const d = decodeEnvelope(r.value, 1_048_576);
      if (!d.ok) throw new Error(`bad envelope: ${d.reason}`);
      return d.envelope.value;
    };
    for (const s of [latency, throughput]) {
      for (const i of [0, 1, L2_KEYS - 1]) {
        const want = JSON.stringify(valueOf(i));
        const got = [await s.readers[0]!.get(keys[i]!, loader), await s.client.get(rawKeys[i]!).then(parse), await s.store.read(`${NAMESPACE}:${keys[i]!}`).then(decode)];
        for (const g of got) if (JSON.stringify(g) !== want) throw new Error(`wrong value for ${keys[i]}: ${JSON.stringify(g)}`);
      }
      for (const r of s.readers) r.clear();
    }

    log(`  a. latency: one get at a time, ${rounds} rounds × ${minCpuTimeMs} ms per row`);
    const latencyRows = await latencyBench(log, { rounds, minCpuTimeMs, keys, rawKeys, side: latency, loader, parse, decode });
    log(`  b. throughput: ${L2_KEYS} gets in batches of ${L2_BATCH} concurrent (auto-pipelined clients), ${throughputRounds} rounds`);
    const throughputRows = await throughputBench(log, { rounds: throughputRounds, keys, rawKeys, side: throughput, loader, parse, decode });
    if (loaderCalls !== 0) throw new Error(`the loader ran ${loaderCalls} times: some key was not in Redis`);
    return {
      keys: L2_KEYS,
      valueBytes,
      batch: L2_BATCH,
      redis: redisVersion(),
      ioredis: ioredisVersion(),
      rounds,
      minCpuTimeMs,
      throughputRounds,
      target: 'damper L2 hit ≤ 1.2 × ioredis get + JSON.parse',
      latency: latencyRows,
      throughput: throughputRows,
    };
  } finally {
    // Caches before stores, stores before clients, then the server.
    for (const close of closers.reverse()) await close().catch(() => {});
    await server.stop();
  }
}

interface BenchInput {
  readonly keys: readonly string[];
  readonly rawKeys: readonly string[];
  readonly side: Side;
  readonly loader: () => never;
  readonly parse: (text: string | null) => unknown;
  readonly decode: (r: { value: string } | undefined) => unknown;
}

function reader(store: RedisStore): Cache<L2Value> {
  // Room for every key: an entry is never evicted, so `size` counts every miss committed.
  return new Cache<L2Value>({ ttl: 600_000, maxEntries: L2_KEYS * 2, shared: { store, namespace: NAMESPACE } });
}

/** Resolves once the reader hears its own heartbeat (subscribed to the bus), or after 3 s. */
function busUp(cache: Cache<L2Value>): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      off();
      resolve();
    }, 3_000);
    const off = cache.on('bus', ({ up }) => {
      if (!up) return;
      clearTimeout(timer);
      off();
      resolve();
    });
  });
}

async function latencyBench(log: (line: string) => void, o: BenchInput & { rounds: number; minCpuTimeMs: number }): Promise<L2LatencyRow[]> {
  const { client, store, readers } = o.side;
  let current = readers[0]!;
  let turn = 0;
  let damperCalls = 0;
  /** Entries dropped by `wrap` since the last check: misses already committed. */
  let cleared = 0;
  const { loader, parse, decode } = o;
  // Each row's `get` is its own function literal (see hit-path.ts's `driver`).
  const contenders: { name: string; keys: readonly string[]; get: Get; wrap: () => void }[] = [
    { name: RAW, keys: o.rawKeys, get: (key) => client.get(key).then(parse), wrap: () => {} },
    { name: STORE, keys: o.keys, get: (key) => store.read(`${NAMESPACE}:${key}`).then(decode), wrap: () => {} },
    {
      name: DAMPER,
      keys: o.keys,
      get: (key) => {
        damperCalls++;
        return current.get(key, loader);
      },
      wrap: () => {
        // Round the readers again on a fast machine: the next one is emptied first (its entries
        // counted), so every call stays an L1 miss however many calls a measurement makes.
        turn = (turn + 1) % readers.length;
        current = readers[turn]!;
        cleared += current.size;
        current.clear();
      },
    },
  ];
  const drivers = new Map(contenders.map((c, id) => [c.name, driver(id, c.get, c.keys, c.wrap)]));
  /** Every damper call since the last reset was an L1 miss: each left one new entry in some reader (or one `wrap` cleared). */
  const checkMisses = (): void => {
    const held = cleared + readers.reduce((n, r) => n + r.size, 0);
    if (held !== damperCalls) throw new Error(`${DAMPER}: ${damperCalls} calls but ${held} entries: some call was an L1 hit`);
    for (const r of readers) r.clear();
    damperCalls = 0;
    cleared = 0;
  };
  const run = async (name: string): Promise<{ avg: number; p50: number }> => {
    const stats = await measure(drivers.get(name)!, { min_cpu_time: o.minCpuTimeMs * 1e6, gc: collect });
    if (name === DAMPER) checkMisses();
    return { avg: stats.avg, p50: stats.p50 };
  };
  for (const c of contenders) await run(c.name); // discarded warm-up round
  const samples: Map<string, { avg: number; p50: number }>[] = [];
  for (let round = 0; round < o.rounds; round++) {
    const thisRound = new Map<string, { avg: number; p50: number }>();
    samples.push(thisRound);
    const order = contenders.map((_, i) => contenders[(i + round) % contenders.length]!);
    for (const c of order) {
      const s = await run(c.name);
      thisRound.set(c.name, s);
      log(`  round ${round + 1}/${o.rounds}  ${c.name.padEnd(36)} ${(s.avg / 1000).toFixed(1).padStart(7)} µs/op`);
    }
  }
  const at = (r: Map<string, { avg: number; p50: number }>, name: string): { avg: number; p50: number } => {
    const v = r.get(name);
    if (v === undefined) throw new Error(`no sample for ${name}`);
    return v;
  };
  return contenders.map((c): L2LatencyRow => {
    const roundsNs = samples.map((r) => at(r, c.name).avg);
    const ratios = samples.map((r) => at(r, c.name).avg / at(r, RAW).avg);
    return {
      name: c.name,
      nsPerOp: quantile(roundsNs, 0.5),
      minNs: Math.min(...roundsNs),
      p50Ns: quantile(
        samples.map((r) => at(r, c.name).p50),
        0.5,
      ),
      ratioToRaw: quantile(ratios, 0.5),
      ratioToRawIqr: [quantile(ratios, 0.25), quantile(ratios, 0.75)],
      roundsNs,
    };
  });
}

async function throughputBench(log: (line: string) => void, o: BenchInput & { rounds: number }): Promise<L2ThroughputRow[]> {
  const { client, store, readers } = o.side;
  const cache = readers[0]!;
  const { loader, parse, decode } = o;
  const batches = (keys: readonly string[]): string[][] => Array.from({ length: keys.length / L2_BATCH }, (_, b) => keys.slice(b * L2_BATCH, (b + 1) * L2_BATCH));
  const contenders: { name: string; batches: string[][]; get: Get }[] = [
    { name: RAW, batches: batches(o.rawKeys), get: (key) => client.get(key).then(parse) },
    { name: STORE, batches: batches(o.keys), get: (key) => store.read(`${NAMESPACE}:${key}`).then(decode) },
    { name: DAMPER, batches: batches(o.keys), get: (key) => cache.get(key, loader) },
  ];
  const runners = new Map(contenders.map((c, id) => [c.name, batchDriver(id, c.get)]));
  const run = async (c: (typeof contenders)[number]): Promise<number> => {
    cache.clear();
    collect();
    const started = performance.now();
    await runners.get(c.name)!(c.batches);
    const seconds = (performance.now() - started) / 1000;
    if (c.name === DAMPER && cache.size !== L2_KEYS) throw new Error(`${DAMPER}: ${cache.size} entries after ${L2_KEYS} misses`);
    return L2_KEYS / seconds;
  };
  for (const c of contenders) await run(c); // discarded warm-up round
  const samples: Map<string, number>[] = [];
  for (let round = 0; round < o.rounds; round++) {
    const thisRound = new Map<string, number>();
    samples.push(thisRound);
    const order = contenders.map((_, i) => contenders[(i + round) % contenders.length]!);
    for (const c of order) {
      const ops = await run(c);
      thisRound.set(c.name, ops);
      log(`  round ${round + 1}/${o.rounds}  ${c.name.padEnd(36)} ${Math.round(ops).toLocaleString('en-US').padStart(9)} ops/s`);
    }
  }
  cache.clear();
  const at = (r: Map<string, number>, name: string): number => {
    const v = r.get(name);
    if (v === undefined) throw new Error(`no sample for ${name}`);
    return v;
  };
  return contenders.map((c): L2ThroughputRow => {
    const roundsOpsPerSec = samples.map((r) => at(r, c.name));
    const ratios = samples.map((r) => at(r, RAW) / at(r, c.name));
    return {
      name: c.name,
      opsPerSec: quantile(roundsOpsPerSec, 0.5),
      maxOpsPerSec: Math.max(...roundsOpsPerSec),
      ratioToRaw: quantile(ratios, 0.5),
      ratioToRawIqr: [quantile(ratios, 0.25), quantile(ratios, 0.75)],
      roundsOpsPerSec,
    };
  });
}

export function l2LatencyTable(result: L2Result): string {
  const x = (v: number): string => `${v.toFixed(2)}×`;
  return table(
    ['L2 hit, one at a time', 'µs/op (median)', 'µs/op (best round)', '× raw client', 'middle half of rounds'],
    result.latency.map((r) => [r.name, (r.nsPerOp / 1000).toFixed(1), (r.minNs / 1000).toFixed(1), x(r.ratioToRaw), `${x(r.ratioToRawIqr[0])}–${x(r.ratioToRawIqr[1])}`]),
    [false, true, true, true, true],
  );
}

export function l2ThroughputTable(result: L2Result): string {
  const x = (v: number): string => `${v.toFixed(2)}×`;
  const ops = (v: number): string => Math.round(v).toLocaleString('en-US');
  return table(
    [`L2 hit, batches of ${result.batch} concurrent`, 'ops/s (median)', 'ops/s (best round)', 'time/op × raw client', 'middle half of rounds'],
    result.throughput.map((r) => [r.name, ops(r.opsPerSec), ops(r.maxOpsPerSec), x(r.ratioToRaw), `${x(r.ratioToRawIqr[0])}–${x(r.ratioToRawIqr[1])}`]),
    [false, true, true, true, true],
  );
}

/** The timed function: next key, call, return the promise for mitata to await; `wrap` runs when the keys are exhausted. */
function driver(id: number, get: Get, keys: readonly string[], wrap: () => void): () => Promise<unknown> {
  const make = new Function(
    'get',
    'keys',
    'wrap',
    `/* l2 latency driver #${id} */ let i = 0; const n = keys.length;
     return function op() { const key = keys[i]; i += 1; if (i === n) { i = 0; wrap(); } return get(key); };`,
  ) as (get: Get, keys: readonly string[], wrap: () => void) => () => Promise<unknown>;
  return make(get, keys, wrap);
}

/** Runs every batch: all its gets at once, then awaits them all before the next. */
function batchDriver(id: number, get: Get): (batches: readonly (readonly string[])[]) => Promise<void> {
  const make = new Function(
    'get',
    `/* l2 batch driver #${id} */
     return async function run(batches) {
       for (const batch of batches) {
         const pending = new Array(batch.length);
         for (let j = 0; j < batch.length; j++) pending[j] = get(batch[j]);
         await Promise.all(pending);
       }
     };`,
  ) as (get: Get) => (batches: readonly (readonly string[])[]) => Promise<void>;
  return make(get);
}

function redisVersion(): string {
  try {
    return /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

function ioredisVersion(): string {
  try {
    return (JSON.parse(readFileSync(resolve('node_modules', 'ioredis', 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

function quantile(xs: readonly number[], q: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const at = (sorted.length - 1) * q;
  const lo = sorted[Math.floor(at)] ?? 0;
  const hi = sorted[Math.ceil(at)] ?? 0;
  return lo + (hi - lo) * (at - Math.floor(at));
}
