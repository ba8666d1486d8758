import { Cache, type CacheOptions, type Clock, OverloadedError, type Priority } from 'damper';
import { type CacheCounts, type RetryCounts } from '../judge/lab-counters.js';
import { type Queryable, QueryError, type Row } from './database.js';
import { OriginWaits, type RowOrigin, type Source } from './origin-waits.js';
import { StaleAnswers } from './stale-answers.js';
import { type DataRead } from './service-server.js';
import { type ServiceScenario } from '../schema/service.js';
import { type KeySets } from './key-sets.js';

/** The service world's cache tier, as the scenario gives it (`cache`; each field described in the schema). */
export type CacheShape = NonNullable<ServiceScenario['cache']>;

/** The cache tier's nodes (`cache.nodes`): Redis-like processes on a hash ring. */
export type CacheNodesShape = NonNullable<CacheShape['nodes']>;

/** What stands behind the servers: a read per request, and what faults do to it. */
export interface DataTier {
  /** Server `server`'s read (a cache tier on nodes has a client per server; the others, one read for all). */
  reader(server: number): DataRead;
  /** The cache tier loses every entry (Brooker's cache_sim; OSDI'22's look-aside experiment). */
  flush(): void;
  /** The write path pushes a freshly written row into the cache tier (cache-aside's invalid value). */
  push(key: string, row: Row): void;
  /** A new process of server `server` (a hang's end with `then: restart`): its own cache (scope server) is empty; damper's warms. */
  restart?(server: number): void;
  /** Stops what the tier still runs (a warm-up): nothing of it is left on the clock. */
  close?(): void;
  /** Puts every key's row (`keys.keys`, most read first) in the cache tier, each fresh for a draw of `freshMs`: the steady state a run starts from (a server holding fewer keys than there are draws its own from `seed`). */
  prewarm(keys: KeySets, row: (key: string) => Row, freshMs: () => number, seed: number): Promise<void>;
}

/** Prewarms one key at a time, in `keys`' order: the steady state of a tier with no nodes. */
export async function eachKey(keys: readonly string[], row: (key: string) => Row, freshMs: () => number, put: (key: string, row: Row, freshMs: number) => Promise<void> | void): Promise<void> {
  for (const key of keys) await put(key, row(key), freshMs());
}

/**
 * How the servers reach the database: each through a pool of its own
 * (`servers.databaseConnections`, connection-pool.ts), or straight.
 */
export interface DatabaseAccess {
  /** Server `i`'s way to the database. */
  server(i: number): Queryable;
  /** The way of the one `Cache` that stands for every server's (damper without cache nodes): every server's connections in one pool. */
  readonly tier: Queryable;
}

/** A database with no cache in front: every request queries it, the same in both variants. */
export function databaseOnly(db: DatabaseAccess): DataTier {
  const reads = new Map<number, DataRead>();
  const readOf = (i: number): DataRead => {
    const way = db.server(i);
    return (key, _priority, then) => void way.query(key).then((outcome) => then(outcome instanceof QueryError ? 'error' : outcome.valid ? 'ok' : 'invalid', 'origin'));
  };
  return {
    reader: (i) => {
      let read = reads.get(i);
      if (read === undefined) reads.set(i, (read = readOf(i)));
      return read;
    },
    flush() {},
    push() {},
    prewarm: async () => {},
  };
}

/** What a naive server counts of its queries: each one, and, when it tries failed ones again, first tries and retries apart. */
export interface QueryCounts {
  readonly cache: CacheCounts;
  readonly retry?: RetryCounts;
}

/**
 * A naive server's query for `key` on `way`, ended within `timeoutMs`; with
 * `retries`, a failed one is tried again at once, that many times, within
 * what is left of the time (Discord 2019's third bug: no budget, no
 * backoff, and the clients retry on top). `then` hears the last outcome.
 */
export function naiveQuery(clock: Clock, way: Queryable, key: string, timeoutMs: number, retries: number, counts: QueryCounts, then: (outcome: Row | QueryError) => void): void {
  const deadline = clock.now() + timeoutMs;
  const attempt = (n: number): void => {
    counts.cache.loads++;
    if (counts.retry !== undefined) {
      if (n === 0) counts.retry.firstAttempts++;
      else counts.retry.retries++;
    }
    void way.query(key, { timeoutMs: deadline - clock.now() }).then((outcome) => {
      if (outcome instanceof QueryError && n < retries && deadline > clock.now()) return attempt(n + 1);
      then(outcome);
    });
  };
  attempt(0);
}

/**
 * The plain look-aside cache: a map with a ttl, no coalescing (concurrent
 * misses of one key each query the database), whatever the database returns
 * is cached and served, an invalid value included. A miss whose query has not
 * come back within `loadTimeoutMs` fails and caches nothing, though the
 * database still serves the query: after a flush, misses overload the
 * database, its answers come too late to be cached, and the misses go on
 * (the loop of OSDI'22's look-aside experiment). `counts` counts its reads
 * and queries, for the characteristic metrics.
 *
 * With `naive.deleteOnError` (Facebook 2010's automated fixer): an invalid
 * cached value is never served but read again from the database, and a
 * failed query or an invalid value from it deletes the key, because the
 * reader cannot tell a struggling database from a bad value; the request
 * fails. So every failure sends the next read of the key to the database.
 *
 * With `scope: 'server'` each of the `servers` has a map of its own (a
 * page cache in the web server's memory), counted apart (`counts(i)`), and
 * a restart empties it; else one map stands for the tier (`counts(0)`).
 */
export function naiveCache(clock: Clock, db: DatabaseAccess, shape: CacheShape, servers: number, counts: (server: number) => QueryCounts): DataTier {
  type Pages = Map<string, { row: Row; expires: number }>;
  const tiers: Pages[] = Array.from({ length: shape.scope === 'server' ? servers : 1 }, () => new Map());
  /** Restarts per map: a render of a process since restarted is lost with it. */
  const restarts = tiers.map(() => 0);
  const ttlMs = shape.ttlS * 1000;
  const fixer = shape.naive.deleteOnError === true;
  // No exceptions and no rejected promises on the failure path: in an
  // overload it runs millions of times. A hit is answered at once.
  const readOf = (way: Queryable, own: number): DataRead => {
    const count = counts(own);
    return (key, _priority, then) => {
    const epoch = restarts[own]!;
    count.cache.requests++;
    const hit = tiers[own]!.get(key);
    if (hit !== undefined && hit.expires > clock.now() && (hit.row.valid || !fixer)) return then(hit.row.valid ? 'ok' : 'invalid', 'cache');
    naiveQuery(clock, way, key, shape.loadTimeoutMs, shape.naive.queryRetries, count, (outcome) => {
      // The map now, a flush's new one included; a restart's loses the old process's render.
      const tier = tiers[own]!;
      if (fixer && (outcome instanceof QueryError || !outcome.valid)) {
        tier.delete(key);
        return then('error', 'origin');
      }
      if (outcome instanceof QueryError) return then('error', 'origin');
      if (restarts[own] === epoch) tier.set(key, { row: outcome, expires: clock.now() + ttlMs });
      then(outcome.valid ? 'ok' : 'invalid', 'origin');
    });
    };
  };
  const ownOf = (i: number): number => (shape.scope === 'server' ? i : 0);
  return {
    reader: (i) => readOf(db.server(i), ownOf(i)),
    flush: () => tiers.forEach((_, i) => (tiers[i] = new Map())),
    restart(i) {
      if (shape.scope !== 'server') return;
      tiers[i] = new Map();
      restarts[i]!++;
    },
    push: (key, row) => tiers.forEach((tier) => tier.set(key, { row, expires: clock.now() + ttlMs })),
    // Each server's own map draws its own remaining freshness per key, as servers that loaded their pages at their own times.
    prewarm: async (keys, row, freshMs) => {
      for (const tier of tiers) await eachKey(keys.keys, row, freshMs, (key, r, ms) => void tier.set(key, { row: r, expires: clock.now() + ms }));
    },
  };
}

/**
 * The lab's own options for damper's `Cache` standing for the cache tier:
 * the scenario's ttl, stale window and load timeout, every value validated,
 * and an origin budget of twice the database's workers in flight (one
 * query queued behind each busy one, so a load waits at most about one
 * service time in the database's queue; damper's default of 64 would let a
 * small database's queue outlast the clients' patience).
 */
export function damperCacheDefaults(shape: CacheShape, keyCount: number, databaseWorkers: number): CacheOptions<Row> {
  return {
    ttl: shape.ttlS * 1000,
    staleFor: shape.staleForS * 1000,
    loadTimeout: shape.loadTimeoutMs,
    maxEntries: keyCount + 1,
    maxConcurrentLoads: 2 * databaseWorkers,
    validate: (row) => row.valid || 'invalid value from the database',
  };
}

/** damper's cache tier: one real `Cache` (coalescing, stale window, validation, origin budget) with `options`, loading from `origin`. */
export function damperCache(clock: Clock, origin: RowOrigin, options: CacheOptions<Row>): DataTier & { readonly caches: readonly Cache<Row>[] } {
  const cache = new Cache<Row>({ ...options, clock });
  const read = damperRead(clock, cache, origin);
  return {
    caches: [cache],
    reader: () => read,
    flush: () => cache.clear(),
    // An invalid push is refused by validation: the last known good stays.
    push: (key, row) => void cache.set(key, row).catch(() => {}),
    prewarm: (keys, row, freshMs) => eachKey(keys.keys, row, freshMs, (key, r, ms) => cache.set(key, r, { ttl: ms })),
  };
}

/**
 * damper's caches when each server has its own (`scope: 'server'`, a page
 * cache in a web server's memory): a real `Cache` per server with
 * `options(i)` (the lab's, under the configuration's `cache(i)`; asked again
 * at a restart, as a new process builds its cache anew), loading through
 * the server's own way to the database (`origin(i)`). A restart replaces the server's
 * `Cache` with an empty one, which, with `shape.warm`, loads every key,
 * most read first, with `Cache.warm` within that budget (at background
 * priority, under the cache's own origin budget) while traffic returns to
 * it. `watch(cache, i)` instruments each, again after a restart.
 */
export function damperServerCaches(clock: Clock, origin: (server: number) => RowOrigin, shape: CacheShape, servers: number, options: (server: number) => CacheOptions<Row>, watch: (cache: Cache<Row>, server: number) => () => void): DataTier & { readonly caches: readonly Cache<Row>[] } {
  const caches: Cache<Row>[] = [];
  const reads: DataRead[] = [];
  const unwatch: (() => void)[] = [];
  const warming: (AbortController | undefined)[] = [];
  let ranked: readonly string[] = [];
  const open = (i: number): Cache<Row> => {
    unwatch[i]?.();
    const cache = new Cache<Row>({ ...options(i), clock });
    caches[i] = cache;
    reads[i] = damperRead(clock, cache, origin(i));
    unwatch[i] = watch(cache, i);
    return cache;
  };
  for (let i = 0; i < servers; i++) open(i);
  return {
    caches,
    // The server keeps this function; a restart changes the Cache behind it.
    reader: (i) => (key, priority, then) => reads[i]!(key, priority, then),
    flush: () => caches.forEach((cache) => cache.clear()),
    // An invalid push is refused by validation: the last known good stays.
    push: (key, row) => caches.forEach((cache) => void cache.set(key, row).catch(() => {})),
    restart(i) {
      warming[i]?.abort();
      void caches[i]!.close();
      const cache = open(i);
      if (shape.warm === undefined) return;
      const stop = new AbortController();
      warming[i] = stop;
      const loader = origin(i)(new OriginWaits(clock));
      cache.warm(ranked, loader, { rate: shape.warm.rate, concurrency: shape.warm.concurrency, signal: stop.signal }).catch(() => {});
    },
    prewarm: async (keys, row, freshMs) => {
      ranked = keys.keys;
      for (const cache of caches) await eachKey(keys.keys, row, freshMs, (key, r, ms) => cache.set(key, r, { ttl: ms }));
    },
    close: () => warming.forEach((stop) => stop?.abort()),
  };
}

/** How a variant's in-process cache tier is made and watched: naive's counts per map (named `server=i`, or '' for the tier's one), or damper's options and gauges per `Cache`. */
export type InProcessVariant =
  | { readonly variant: 'naive'; readonly counts: (name: string) => QueryCounts }
  | {
      readonly variant: 'damper';
      /** Server `i`'s `Cache` options (0 for the one that stands for the tier), asked again at a restart. */
      readonly options: (server: number) => CacheOptions<Row>;
      readonly watch: (cache: Cache<Row>, labels: { readonly server?: number }) => () => void;
    };

/**
 * The cache tier held in the servers' own memory (no `cache.nodes`), per
 * variant: naive's look-aside maps, or damper's `Cache`, one per server
 * with `scope: 'server'`, else one standing for the tier (facebook-2010).
 * One composition for the simulation and for a real run's server
 * (real/server-data.ts), so the two cannot build different tiers: they
 * differ only in `db` and `origin` (the simulated database, or PostgreSQL).
 */
export function inProcessTier(clock: Clock, shape: CacheShape, servers: number, db: DatabaseAccess, origin: { server(i: number): RowOrigin; readonly tier: RowOrigin }, how: InProcessVariant): DataTier & { readonly caches?: readonly Cache<Row>[] } {
  if (how.variant === 'naive') return naiveCache(clock, db, shape, servers, (i) => how.counts(shape.scope === 'server' ? `server=${i}` : ''));
  if (shape.scope === 'server') return damperServerCaches(clock, (i) => origin.server(i), shape, servers, how.options, (cache, i) => how.watch(cache, { server: i }));
  const tier = damperCache(clock, origin.tier, how.options(0));
  how.watch(tier.caches[0]!, {});
  return tier;
}

/**
 * A read through damper's `cache`, loading from `origin`: whether it waited for
 * the database is told by the loads it shared, whether it was answered
 * stale at once by the cache's own `stale` event (stale-answers.ts).
 */
export function damperRead(clock: Clock, cache: Cache<Row>, origin: RowOrigin): DataRead {
  const waits = new OriginWaits(clock);
  const stale = new StaleAnswers(cache);
  const loader = origin(waits);
  // One options object per priority, made once: the hot path must not allocate.
  const options = new Map<Priority, { readonly priority: Priority }>();
  const optionsOf = (priority: Priority): { readonly priority: Priority } => {
    let o = options.get(priority);
    if (o === undefined) options.set(priority, (o = { priority }));
    return o;
  };
  return (key, priority, then) => {
    const since = clock.now();
    const read = stale.read(() => cache.get(key, loader, optionsOf(priority)));
    const source = (): Source => (waits.waited(key, since) ? 'origin' : read.stale ? 'stale' : 'cache');
    read.result.then(
      (row) => then(row.valid ? 'ok' : 'invalid', source()),
      (error: unknown) => then(error instanceof OverloadedError ? 'shed' : 'error', source()),
    );
  };
}
