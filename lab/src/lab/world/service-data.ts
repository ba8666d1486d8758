import { Cache, type CacheOptions, OverloadedError, type VirtualClock } from 'damper';
import { type CacheCounts } from '../lab-counters.js';
import { type Database, QueryError, type Row } from './database.js';
import { databaseLoader, OriginWaits } from './origin-waits.js';
import { type DataRead } from './service-server.js';

/** The service world's cache tier, as the scenario gives it. */
export interface CacheShape {
  /** How long a cached value is fresh, s. */
  readonly ttlS: number;
  /** damper: how long past its freshness a value may be served stale, s. */
  readonly staleForS: number;
  /** How long a server waits for the database on a miss, ms: naive gives up and caches nothing; damper's `loadTimeout`. */
  readonly loadTimeoutMs: number;
}

/** What stands behind the servers: a read per request, and what faults do to it. */
export interface DataTier {
  readonly read: DataRead;
  /** The cache tier loses every entry (Brooker's cache_sim; OSDI'22's look-aside experiment). */
  flush(): void;
  /** The write path pushes a freshly written row into the cache tier (cache-aside's invalid value). */
  push(key: string, row: Row): void;
  /** Puts `row` in the cache tier, fresh for `freshMs` more: the steady state a run starts from. */
  prewarm(key: string, row: Row, freshMs: number): Promise<void>;
}

/** A database with no cache in front: every request queries it, the same in both variants. */
export function databaseOnly(db: Database): DataTier {
  return {
    read: (key, then) => void db.query(key).then((outcome) => then(outcome instanceof QueryError ? 'error' : outcome.valid ? 'ok' : 'invalid', true)),
    flush() {},
    push() {},
    prewarm: async () => {},
  };
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
 */
export function naiveCache(clock: VirtualClock, db: Database, shape: CacheShape, counts: CacheCounts): DataTier {
  let tier = new Map<string, { row: Row; expires: number }>();
  const ttlMs = shape.ttlS * 1000;
  return {
    read(key, then) {
      counts.requests++;
      const hit = tier.get(key);
      if (hit !== undefined && hit.expires > clock.now()) return then(hit.row.valid ? 'ok' : 'invalid', false);
      counts.loads++;
      void db.query(key, { timeoutMs: shape.loadTimeoutMs }).then((outcome) => {
        if (outcome instanceof QueryError) return then('error', true);
        tier.set(key, { row: outcome, expires: clock.now() + ttlMs });
        then(outcome.valid ? 'ok' : 'invalid', true);
      });
    },
    flush: () => (tier = new Map()),
    push: (key, row) => void tier.set(key, { row, expires: clock.now() + ttlMs }),
    prewarm: async (key, row, freshMs) => void tier.set(key, { row, expires: clock.now() + freshMs }),
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

/** damper's cache tier: one real `Cache` (coalescing, stale window, validation, origin budget) with `options`. */
export function damperCache(clock: VirtualClock, db: Database, options: CacheOptions<Row>): DataTier & { readonly cache: Cache<Row> } {
  const cache = new Cache<Row>({ ...options, clock });
  const waits = new OriginWaits(clock);
  const loader = databaseLoader(db, waits);
  return {
    cache,
    read(key, then) {
      const since = clock.now();
      cache.get(key, loader).then(
        (row) => then(row.valid ? 'ok' : 'invalid', waits.waited(key, since)),
        (error: unknown) => then(error instanceof OverloadedError ? 'shed' : 'error', waits.waited(key, since)),
      );
    },
    flush: () => cache.clear(),
    // An invalid push is refused by validation: the last known good stays.
    push: (key, row) => void cache.set(key, row).catch(() => {}),
    prewarm: (key, row, freshMs) => cache.set(key, row, { ttl: freshMs }),
  };
}
