import { Cache, type CacheOptions, type VirtualClock } from 'damper';
import { type ClientRequest, type Replies } from '../clients.js';
import { cacheOptions, type DamperSettings } from '../damper-config.js';
import { type Watch } from '../damper-gauges.js';
import { type CacheCounts } from '../lab-counters.js';
import { type CacheAsideScenario as Scenario } from './cache-aside.js';
import { type Database, QueryError, type Row } from './database.js';
import { databaseLoader, OriginWaits } from './origin-waits.js';
import { StaleAnswers } from './stale-answers.js';

/**
 * The two read paths a client process can run against the same cache tier and
 * database. A reader also receives the operator's writes (`write`): a write
 * puts the new value in the database and pushes it to the cache tier, as the
 * configuration system of the Facebook 2010 outage did.
 */
export interface Reader {
  /** Reads `req.key` and replies to the client; marks the request when it waited for the database. */
  read(req: ClientRequest, replies: Replies): void;
  /** The write path's push of a freshly written row into the cache tier. */
  push(key: string, row: Row): void;
  /** Puts `row` in the cache tier, fresh for `freshMs` more: the steady state a run starts from. */
  prewarm(key: string, row: Row, freshMs: number): Promise<void>;
}

/**
 * The postmortem's cache-aside loop, bugs included. A missing, expired or
 * invalid cached value sends the client to the database; a database error, a
 * timeout or an invalid value there deletes the cache key, because the client
 * cannot tell "the database is struggling" from "the value is bad". So every
 * failure turns the next request into another database query. `counts`
 * counts its reads and queries, for the characteristic metrics.
 */
export function naiveReader(clock: VirtualClock, db: Database, scenario: Scenario, counts: CacheCounts): Reader {
  const tier = new Map<string, { row: Row; expires: number }>();
  const ttlMs = scenario.cache.ttlS * 1000;
  // No exceptions and no rejected promises on the failure path: in an
  // overload it runs millions of times, and each throw or rejection cost more
  // than the rest of a request. A hit is answered at once, with no promise.
  return {
    read(req, replies) {
      const { key } = req;
      counts.requests++;
      const hit = tier.get(key);
      if (hit !== undefined && hit.expires > clock.now() && hit.row.valid) return replies.answer(req);
      req.waitedForOrigin = true;
      counts.loads++;
      void db.query(key, { timeoutMs: req.population.timeoutMs }).then((outcome) => {
        // The client sees an invalid value as an error: it is never served, only deleted.
        if (outcome instanceof QueryError || !outcome.valid) {
          tier.delete(key);
          return replies.fail(req);
        }
        tier.set(key, { row: outcome, expires: clock.now() + ttlMs });
        replies.answer(req);
      });
    },
    push(key, row) {
      tier.set(key, { row, expires: clock.now() + ttlMs });
    },
    async prewarm(key, row, freshMs) {
      tier.set(key, { row, expires: clock.now() + freshMs });
    },
  };
}

/**
 * damper's read path: one `Cache` for the cache tier, validating every value,
 * with the scenario's ttl and stale window and damper's defaults for the rest
 * (coalescing, error backoff, origin budget), or the user's configuration's
 * `cache(0)` laid over them. Nothing here is told about the scenario's faults.
 * The cache is instrumented through `watch`.
 */
export function damperReader(clock: VirtualClock, db: Database, scenario: Scenario, keyCount: number, settings: DamperSettings, watch: Watch): Reader {
  const lab: CacheOptions<Row> = {
    ttl: scenario.cache.ttlS * 1000,
    staleFor: scenario.cache.staleForS * 1000,
    maxEntries: keyCount + 1,
    validate: (row) => row.valid || 'invalid configuration value',
  };
  // One process: the cache tier's clients are one population of readers.
  const cache = new Cache<Row>(cacheOptions(settings, 0, lab, { clock }));
  watch(cache, {});
  const waits = new OriginWaits(clock);
  const stale = new StaleAnswers(cache);
  const loader = databaseLoader(db, waits);
  return {
    read(req, replies) {
      const read = stale.read(() => cache.get(req.key, loader));
      if (read.stale) req.servedStale = true;
      read.result.then(
        (row) => {
          waits.mark(req);
          if (row.valid) replies.answer(req);
          else replies.invalid(req);
        },
        () => replies.fail(req),
      );
    },
    push(key, row) {
      // An invalid push is refused by validation: the last known good stays.
      cache.set(key, row).catch(() => {});
    },
    prewarm: (key, row, freshMs) => cache.set(key, row, { ttl: freshMs }),
  };
}
