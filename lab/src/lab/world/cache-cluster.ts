import { Cache, type CacheOptions, CircuitBreaker, ConcurrencyLimiter, OverloadedError, pipeline, RateLimiter, VirtualClock } from 'damper';
import { type ClientRequest, Clients, type Replies, type RunOptions } from '../clients.js';
import { cacheOptions, damperSettings } from '../damper-config.js';
import { Recorder } from '../metrics.js';
import { type VariantName, type VariantRun } from '../results.js';
import { type FaultSpanDoc, type Json, type ScenarioCommon, replaceFault, ScenarioError, sizeAxis, spanAxis } from '../scenario.js';
import { cacheClusterSchema } from '../schema/cache-cluster.js';
import { check } from '../schema/problems.js';
import { Network } from '../network.js';
import { remainingFreshness } from '../streams.js';
import { type WorldKind } from '../worlds.js';
import { CacheCluster } from './cache-nodes.js';
import { Database, QueryError, type Row } from './database.js';
import { OriginWaits } from './origin-waits.js';
import { held, steadyState } from './steady-state.js';
import { StaleAnswers } from './stale-answers.js';
import { DamperGauges, type Watch } from '../damper-gauges.js';
import { LabCounters } from '../lab-counters.js';

/** A fault of the cache-cluster world. `nodes` are indices into the cluster's nodes. */
export type ClusterFault = FaultSpanDoc &
  (
    | /** From `startS` to `endS` the nodes keep `factor` of their throughput: their queues grow, their answers slow down. */
    { readonly kind: 'degrade-nodes'; readonly nodes: readonly number[]; readonly factor: number }
    /** From `startS` to `endS` the nodes refuse every call (their data survives). */
    | { readonly kind: 'fail-nodes'; readonly nodes: readonly number[] }
    /**
     * At `startS` the nodes are ejected from the ring (their keys move to the
     * other nodes, cold); at `endS` empty replacements join. An operator's
     * action unless `trigger: true`; with `when: "unhealthy"` it happens only
     * if goodput over the last `holdS` seconds is below the objective.
     */
    | { readonly kind: 'eject-nodes'; readonly nodes: readonly number[]; readonly when: 'always' | 'unhealthy' }
  );

/** The Discord 2019 world: clients → web/API processes → a cache cluster on a hash ring → a database. */
export interface CacheClusterScenario extends ScenarioCommon {
  readonly world: 'cache-cluster';
  /** The cache cluster: `count` nodes, each serving `capacityOps` calls/s with `latencyMs` round trip, refusing beyond `maxQueue` waiting; `vnodes` ring points per node. */
  readonly nodes: { readonly count: number; readonly capacityOps: number; readonly latencyMs: number; readonly maxQueue: number; readonly vnodes: number };
  /** Web/API processes; requests are spread over them round-robin. Each has its own in-process cache in the damper variant. */
  readonly processes: number;
  /** The database (MongoDB): `workers` queries at a time, each taking workers/capacityQps s; beyond `maxQueue` waiting, refused at once. */
  readonly origin: { readonly capacityQps: number; readonly workers: number; readonly maxQueue: number };
  /**
   * Freshness of cached values, s, and how long past it a value may be served
   * stale (damper). `processEntries`: how many keys each process's in-memory
   * cache holds (damper; least recently used first out); default: every key.
   */
  readonly cache: { readonly ttlS: number; readonly staleForS: number; readonly processEntries?: number };
  /** Keys per client population: each reads its own keys (`<name>:<i>`) uniformly. */
  readonly keys: Readonly<Record<string, number>>;
  readonly faults: readonly ClusterFault[];
}

/** Checks a cache-cluster scenario document. */
export function parseCacheCluster(o: Record<string, Json>, where: string): CacheClusterScenario {
  return check(cacheClusterSchema, o, where);
}

/** The cache-cluster world, for the registry in worlds.ts. */
export const cacheCluster: WorldKind<CacheClusterScenario> = {
  parse: parseCacheCluster,
  run: (scenario, variant, seed, options) => runCacheCluster(scenario, variant, seed, options),
  originCapacityQps: (scenario) => scenario.origin.capacityQps,
  cached: () => true,
  trigger: spanAxis('nodes degraded (s)'),
  triggerSize: sizeAxis(
    'throughput lost by the degraded nodes (share)',
    (s) => s.faults.find((f) => f.kind === 'degrade-nodes'),
    (f) => 1 - f.factor,
    (s, f, lost) => {
      if (!(lost > 0 && lost < 1)) throw new ScenarioError(s.name, [{ field: `faults[${s.faults.indexOf(f)}].factor`, problem: `the share of throughput lost must be above 0 and below 1, got ${lost}` }]);
      return replaceFault(s, f, { ...f, factor: 1 - lost });
    },
  ),
};

/** A read path of one variant: answers the client through `replies`, on process `proc`. */
interface ClusterReader {
  read(req: ClientRequest, proc: number, replies: Replies): void;
  close(): Promise<void>;
}

/**
 * The world of the Discord 2019 replay: open-loop client populations send
 * reads, spread round-robin over the web/API processes, which read through a
 * Redis-like cache cluster (keys on a consistent-hashing ring) in front of a
 * MongoDB-like database. Faults degrade, fail or eject cache nodes.
 *
 * Both variants get the same arrivals, keys and processes, and the same
 * faults; they differ only in their read path.
 */
export async function runCacheCluster(scenario: CacheClusterScenario, variant: VariantName, seed: number, options: RunOptions = {}): Promise<VariantRun> {
  const clock = new VirtualClock({ seed });
  const recorder = new Recorder(scenario.durationS);
  const network = new Network(clock, scenario.network.hopDelay, seed);
  const db = new Database(clock, recorder, scenario.origin, network);
  const cluster = new CacheCluster(clock, scenario.nodes.count, scenario.nodes, scenario.nodes.vnodes, network);
  // Key strings are built once: the hot loop must not allocate per request.
  const keysOf = new Map(scenario.clients.map((p) => [p, Array.from({ length: scenario.keys[p.name]! }, (_, i) => `${p.name}:${i}`)]));
  const allKeys = [...keysOf.values()].flat();
  const draw = remainingFreshness(seed, scenario.cache.ttlS * 1000);
  const freshness = allKeys.map(() => draw());
  const characteristics = variant === 'naive' ? new LabCounters(clock) : new DamperGauges(clock);
  const reader =
    characteristics instanceof LabCounters
      ? await naiveReader(clock, db, cluster, scenario, allKeys, freshness, characteristics)
      : await damperReader(clock, db, cluster, scenario, allKeys, freshness, seed, characteristics.watch);
  let nextProc = 0;
  const clients = new Clients<ClusterFault>(
    { clock, recorder, scenario, seed, network, characteristics },
    {
      send(req, replies) {
        const proc = nextProc;
        nextProc = (nextProc + 1) % scenario.processes;
        reader.read(req, proc, replies);
      },
      fault: ({ fault, starts }) => nodeFault(cluster, fault, starts),
      keys(population) {
        const keys = keysOf.get(population)!;
        return (random) => keys[Math.min(keys.length - 1, Math.floor(random() * keys.length))]!;
      },
    },
  );

  // No stack traces are captured during the run: the engine's `simulate` sees to that.
  try {
    await clients.run(options);
  } finally {
    await reader.close();
  }
  return clients.result();
}

/** What a fault does to the cluster when it starts (`starts`) or ends. */
function nodeFault(cluster: CacheCluster, fault: ClusterFault, starts: boolean): void {
  for (const n of fault.nodes) {
    switch (fault.kind) {
      case 'degrade-nodes':
        cluster.nodes[n]!.degrade(starts ? fault.factor : 1);
        break;
      case 'fail-nodes':
        if (starts) cluster.nodes[n]!.fail();
        else cluster.nodes[n]!.recover();
        break;
      case 'eject-nodes':
        if (starts) cluster.eject(n);
        else cluster.rejoin(n);
        break;
    }
  }
}

// ------------------------------------------------------------------ naive

/** The naive cache client gives up on a cache node after this long, ms. */
const NAIVE_CACHE_TIMEOUT_MS = 250;
/** Its breaker opens after this many cache failures in a row… */
const NAIVE_BREAKER_FAILURES = 5;
/** …for this long, ms; then calls go to the cache again, and one more failure opens it again. */
const NAIVE_BREAKER_OPEN_MS = 5_000;
/** Failed database queries are retried at once, this many times (bug 3: no budget, no backoff). */
const NAIVE_DB_RETRIES = 1;
/** What the naive cache stores: the value's text (its content does not matter here). */
const NAIVE_VALUE = 'v1';

/**
 * The hand-written breaker of the postmortem's API processes, in front of the
 * cache cluster, one per process. It counts cache failures in a row and opens,
 * as a breaker should. Its bug (the postmortem's "bug in our circuit breaking
 * code"): open, it does not degrade anything, it only stops calling the cache,
 * and the caller falls through to the database for every read, low priority
 * included. So the breaker moves the cache's load onto the database, which is
 * exactly what it was there to prevent.
 */
class NaiveBreaker {
  private failures = 0;
  private openUntil = 0;
  private halfOpen = false;

  /** True while the cache must not be called. */
  isOpen(now: number): boolean {
    if (this.openUntil === 0) return false;
    if (now < this.openUntil) return true;
    this.openUntil = 0;
    this.halfOpen = true;
    return false;
  }

  success(): void {
    this.failures = 0;
    this.halfOpen = false;
  }

  failure(now: number): void {
    this.failures++;
    if (this.halfOpen || this.failures >= NAIVE_BREAKER_FAILURES) {
      this.openUntil = now + NAIVE_BREAKER_OPEN_MS;
      this.halfOpen = false;
      this.failures = 0;
    }
  }
}

const CACHE_FAILED = Symbol('cache failed');

/**
 * The read path the postmortem implies, bugs included: cache-aside against
 * the cluster, no in-process cache, no coalescing across (or within)
 * processes.
 *
 * - Bug 1 (the breaker's, above): an open breaker sends every read to the database.
 * - Bug 2 (behind the breaker): a cache call that fails or times out is read
 *   as a miss, so a slow node's keys go to the database, and their loads are
 *   not written back (the cache "is down").
 * - Bug 3 (behind the breaker): database errors are not reported to any
 *   breaker and are retried at once, without budget or backoff. The clients
 *   retry on top.
 *
 * Every miss is a query of its own, so a key missing from the cache costs one
 * query per read until a query comes back in time to refill it: when the
 * database's queue is longer than the clients' patience, none does.
 *
 * For the characteristic metrics, each process's read path counts as its
 * cache (reads, and every query it sends the database, bug 3's retries
 * included) and as a retrying client (its first queries and bug 3's retries).
 */
async function naiveReader(clock: VirtualClock, db: Database, cluster: CacheCluster, scenario: CacheClusterScenario, keys: readonly string[], freshness: readonly number[], counters: LabCounters): Promise<ClusterReader> {
  await cluster.seed(async () => {
    await Promise.all(keys.map((key, i) => cluster.set(key, NAIVE_VALUE, freshness[i]!)));
  });
  const breakers = Array.from({ length: scenario.processes }, () => new NaiveBreaker());
  const caches = breakers.map((_, i) => counters.cache(`process=${i}`));
  const retries = breakers.map((_, i) => counters.retry(`process=${i}`));
  const ttlMs = scenario.cache.ttlS * 1000;

  const cacheGet = (key: string): Promise<string | undefined | typeof CACHE_FAILED> =>
    new Promise((resolve) => {
      const timer = clock.setTimer(() => resolve(CACHE_FAILED), NAIVE_CACHE_TIMEOUT_MS);
      cluster.get(key).then(
        (v) => {
          timer.cancel();
          resolve(v);
        },
        () => {
          timer.cancel();
          resolve(CACHE_FAILED);
        },
      );
    });

  const fromDb = async (req: ClientRequest, proc: number, fill: boolean): Promise<boolean> => {
    req.waitedForOrigin = true;
    const deadline = req.start + req.population.timeoutMs;
    for (let attempt = 0; attempt <= NAIVE_DB_RETRIES; attempt++) {
      const remaining = deadline - clock.now();
      if (remaining <= 0 || req.done) return false;
      caches[proc]!.loads++;
      if (attempt === 0) retries[proc]!.firstAttempts++;
      else retries[proc]!.retries++;
      const outcome = await db.query(req.key, { timeoutMs: remaining });
      if (outcome instanceof QueryError) continue; // bug 3
      if (fill) cluster.set(req.key, NAIVE_VALUE, ttlMs).catch(() => {});
      return true;
    }
    return false;
  };

  const read = async (req: ClientRequest, proc: number): Promise<boolean> => {
    const breaker = breakers[proc]!;
    caches[proc]!.requests++;
    if (breaker.isOpen(clock.now())) return fromDb(req, proc, false); // bug 1
    const got = await cacheGet(req.key);
    if (got === CACHE_FAILED) {
      breaker.failure(clock.now());
      return fromDb(req, proc, false); // bug 2
    }
    breaker.success();
    if (got !== undefined) return true;
    return fromDb(req, proc, true);
  };
  return {
    read(req, proc, replies) {
      void read(req, proc).then((ok) => (ok ? replies.answer(req) : replies.fail(req)));
    },
    close: async () => {},
  };
}

// ------------------------------------------------------------------ damper

/** Share of the database's capacity the processes' origin budgets add up to. */
const BUDGET_SHARE = 0.4;

/**
 * damper's read path: each process runs its own `Cache` (the in-process tier)
 * over the cluster as its shared tier (leases, the store's timeout and
 * breaker, fail closed, the bus), serving stale values within `staleFor`,
 * coalescing loads, with an origin budget per process: a rate (the
 * database's capacity × BUDGET_SHARE, split over the processes), a
 * concurrency limit, and a breaker. Each population's priority goes with its
 * reads, so a low-priority population's loads are the first the budget sheds.
 * A user's configuration's `cache(i)` is laid over these options per process
 * (the cluster stays the shared tier). Nothing here is told about the
 * scenario's faults. Each process's cache, and its origin budget's limiter
 * while the budget is the lab's, are instrumented through `watch`.
 */
async function damperReader(clock: VirtualClock, db: Database, cluster: CacheCluster, scenario: CacheClusterScenario, keys: readonly string[], freshness: readonly number[], seed: number, watch: Watch): Promise<ClusterReader> {
  const settings = await damperSettings(scenario, clock);
  const ttlMs = scenario.cache.ttlS * 1000;
  const staleForMs = scenario.cache.staleForS * 1000;
  const namespace = 'lab';
  const steady = await steadyState(cluster, { ttlMs, staleForMs }, namespace, keys, freshness);
  const rate = (scenario.origin.capacityQps * BUDGET_SHARE) / scenario.processes;
  const caches = Array.from({ length: scenario.processes }, (_, i) => {
    const limiter = new ConcurrencyLimiter({ limit: Math.max(2, Math.ceil((2 * scenario.origin.workers) / scenario.processes)), clock });
    const lab: CacheOptions<Row> = {
      ttl: ttlMs,
      staleFor: staleForMs,
      maxEntries: scenario.cache.processEntries ?? keys.length + 1,
      validate: (r) => r.valid || 'invalid value',
      guard: pipeline(new RateLimiter({ rate, burst: Math.max(1, Math.ceil(rate / 4)), clock }), limiter, new CircuitBreaker({ clock })),
    };
    const options = cacheOptions(settings, i, lab, { clock, shared: { store: cluster, namespace } });
    const cache = new Cache<Row>(options);
    watch(cache, { process: i });
    // A user's own origin budget replaces the lab's: its limiter then sees nothing.
    if (options.guard === lab.guard) watch(limiter, { process: i });
    return cache;
  });
  await Promise.all(caches.map((c, i) => c.restore(held(steady, scenario.cache.processEntries, { kind: 'random', seed, process: i }))));
  const options = new Map(scenario.clients.map((p) => [p.priority, { priority: p.priority }] as const));
  const waits = new OriginWaits(clock);
  const stale = caches.map((cache) => new StaleAnswers(cache));
  const query = async (key: string, signal: AbortSignal): Promise<Row> => {
    const outcome = await db.query(key, { signal });
    waits.loaded(key);
    if (outcome instanceof QueryError) throw outcome;
    return outcome;
  };
  const loader = ({ key, signal }: { key: string; signal: AbortSignal }): Promise<Row> => query(key, signal);
  return {
    read(req, proc, replies) {
      const read = stale[proc]!.read(() => caches[proc]!.get(req.key, loader, options.get(req.population.priority)));
      if (read.stale) req.servedStale = true;
      read.result.then(
        (r) => {
          waits.mark(req);
          if (r.valid) replies.answer(req);
          else replies.invalid(req);
        },
        (error: unknown) => {
          // Counted even when the client gave up first: the budget refused it all the same.
          if (error instanceof OverloadedError) replies.shed(req);
          replies.fail(req);
        },
      );
    },
    close: async () => {
      await Promise.all(caches.map((c) => c.close()));
    },
  };
}
