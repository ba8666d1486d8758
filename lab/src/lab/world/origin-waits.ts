import { type Clock } from 'damper';
import { type ClientRequest } from '../engine/clients.js';
import { type Queryable, QueryError, type Row } from './database.js';

/**
 * Where a read's value came from: from a cache at once (`cache`: a hit), at
 * once but past its ttl while it is refreshed (`stale`: not a hit, as an
 * operator's dashboard counts), or after waiting for the origin (`origin`).
 */
export type Source = 'cache' | 'stale' | 'origin';

/** Marks `req` with where its answer came from (a hit is marked with nothing). */
export function markSource(req: ClientRequest, source: Source): void {
  if (source === 'origin') req.waitedForOrigin = true;
  else if (source === 'stale') req.servedStale = true;
}

/**
 * Which requests read through a damper `Cache` waited for the origin. The
 * cache does not say, per call, whether its answer came from memory, from
 * the shared tier, or from a load: a request waited for the origin when it
 * was not answered at once and its answer came at the instant a load of its
 * key (its own, or one it was coalesced onto) came back from the database in
 * its process. A request answered stale at once while a refresh runs did not
 * wait; one answered from the shared tier did not either, even when that
 * value was being loaded by another process.
 */
export class OriginWaits {
  private readonly loadedAt = new Map<string, number>();

  constructor(private readonly clock: Clock) {}

  /** A query for `key` came back (a row or an error): called by the loader. */
  loaded(key: string): void {
    this.loadedAt.set(key, this.clock.now());
  }

  /** Marks `req`, now being answered, if it waited for the origin. */
  mark(req: ClientRequest): void {
    if (this.waited(req.key, req.start)) req.waitedForOrigin = true;
  }

  /** Whether a read of `key` started at `since` and answered now waited for the origin. */
  waited(key: string, since: number): boolean {
    const now = this.clock.now();
    return now !== since && this.loadedAt.get(key) === now;
  }
}

/** damper's loader of a row: a key and the load's signal in, the row out; a failed query rejects (an error is not a value). */
export type RowLoader = (context: { key: string; signal: AbortSignal }) => Promise<Row>;

/**
 * Where damper's `Cache` loads its rows from, as a loader made for `waits`
 * (each load's return, row or error, told to it): the simulated database
 * ({@link queried}), or in a real run PostgreSQL through `damper/postgres`
 * (real/postgres-rows.ts). One type for both, so the data tier is composed
 * once for the simulation and the real server alike.
 */
export type RowOrigin = (waits: OriginWaits) => RowLoader;

/** The simulated database (or a pool in front of it) as a {@link RowOrigin}. */
export function queried(db: Queryable): RowOrigin {
  return (waits) => databaseLoader(db, waits);
}

/**
 * damper's loader of a key from the simulated database: the query under the
 * load's signal, its return told to `waits`; a failed query rejects (an error
 * is not a value).
 */
export function databaseLoader(db: Queryable, waits: OriginWaits): RowLoader {
  return async ({ key, signal }) => {
    const outcome = await db.query(key, { signal });
    waits.loaded(key);
    if (outcome instanceof QueryError) throw outcome;
    return outcome;
  };
}
