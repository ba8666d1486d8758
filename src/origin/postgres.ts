/**
 * Cache loaders over PostgreSQL with `pg` (node-postgres 8): one parameterised
 * query that returns at most one row, made abortable on the server.
 *
 * Imported from `damper/postgres`. It does not import `pg` itself: it takes
 * your `pg.Pool` (anything with the same `connect`/`query`/`release` shape).
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { ConfigError } from '../errors.js';
import { checkRowOptions, oneRow, type OriginLoader } from './loader.js';
import { type CancelOutcome, sendCancel } from './postgres-cancel.js';

export { type OriginLoader, TOO_MANY_ROWS } from './loader.js';

/** The part of a `pg.PoolClient` the loader uses. */
export interface PgClientLike {
  /** `name` absent: an unnamed statement (`postgresLoader`'s `name: false`). */
  query(config: { name?: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>;
  /** `release(true)` destroys the connection instead of returning it to the pool. */
  release(destroy?: boolean): void;
  /** pg's EventEmitter side: a checked-out client reports a dropped connection as an `error` event. */
  on?(event: 'error', listener: (error: Error) => void): unknown;
  off?(event: 'error', listener: (error: Error) => void): unknown;
}

/**
 * Listens to a checked-out client's `error` event. The pool only handles the
 * errors of idle clients; a connection that drops while the loader holds it
 * (a PostgreSQL restart between the query's end and the release, say) emits
 * `error` on the client, and an EventEmitter with no listener for it crashes
 * the process. The query itself still fails and is reported through it.
 */
const ignoreDroppedConnection = (): void => {};

/** The part of a `pg.Pool` the loader uses. */
export interface PgPoolLike {
  connect(): Promise<PgClientLike>;
}

/** Options of {@link postgresLoader}. */
export interface PostgresLoaderOptions<V, R> {
  /** A `pg.Pool`. Each load checks one connection out for its query, so the load can be cancelled without touching anyone else's. */
  pool: PgPoolLike;
  /** The query, with `$1`, `$2`… placeholders. It must return zero or one row. */
  text: string;
  /** The query's parameters for a cache key. Default: `(key) => [key]`. */
  params?: (key: string) => unknown[];
  /** Maps the one row to the cached value. */
  row: (row: R) => V;
  /**
   * Name of the prepared statement, so each connection parses and plans the
   * query once. Default: `damper_` and a hash of `text` (two loaders with the
   * same text share it; pg refuses one name for two texts).
   *
   * `false`: an unnamed statement, parsed and planned with each query. What a
   * pooler in transaction mode needs: pgbouncer before 1.21 hands each
   * transaction whichever server connection is free, where a statement
   * prepared on another one does not exist (or, on a new client connection,
   * already exists under that name).
   */
  name?: string | false;
}


/**
 * Builds a cache loader ({@link OriginLoader}) that runs one query per load and maps its single row.
 *
 * The loader takes its parameters from the cache key (`context.key`), so one
 * loader, made once at startup, serves every key: `articles.get(id, loadArticle)`,
 * and `articles.warm(ids, loadArticle)` works the same way. Keys that carry a
 * prefix are parsed by `params`.
 *
 * - **No row** → `undefined`: the cache stores "absent" for `absentTtl`
 *   (negative caching), so a missing id does not query the database on every
 *   read. This is why the loader's type is `Loader<V | undefined>`: the cache
 *   must be a `Cache<V | undefined>`.
 * - **More than one row** → rejects with a `DamperError` whose `code` is
 *   `'TOO_MANY_ROWS'`. It is an error, not a value: the cache keeps the last
 *   known good value and backs the key off (principle 1).
 * - **Abort** (the cache's hard timeout, `loadTimeout`): the loader rejects at
 *   once with `signal.reason`, and a PostgreSQL cancel request (what psql
 *   sends on Ctrl-C) goes to the server for the connection running the query,
 *   so the database stops working on it too. The cancel opens its own short
 *   socket: it takes no pool slot and no session, so it gets through even when
 *   the pool is exhausted, which is when timeouts fire. The connection goes
 *   back to the pool once the server has answered; if the query finished
 *   before the cancel could land, the connection is destroyed instead, so a
 *   late cancel can never hit someone else's query; if the cancel landed, the
 *   connection waits for the server to close the cancel's socket, since
 *   PostgreSQL signals the backend twice and the second can come late. Aborted while waiting for
 *   a connection, the query is never sent.
 *
 * The loader uses no timer. A query that the server never answers (a hung
 * server) keeps its connection until the socket fails: set `pg`'s
 * `statement_timeout` (server side) and `query_timeout` (client side) on the
 * Pool as the backstop for what a cancel cannot reach.
 *
 * @example
 * const pool = new pg.Pool({ connectionString, max: 10, statement_timeout: 15_000 });
 * const loadArticle = postgresLoader({
 *   pool,
 *   text: 'SELECT title, body FROM articles WHERE id = $1',
 *   row: (r: { title: string; body: string }) => ({ title: r.title, body: r.body }),
 * });
 * const articles = new Cache<Article | undefined>({ ttl: 60_000, loadTimeout: 2_000 });
 * const article = await articles.get(id, loadArticle); // undefined if no such id
 */
export function postgresLoader<V, R = Record<string, unknown>>(options: PostgresLoaderOptions<V, R>): OriginLoader<V> {
  if (typeof options !== 'object' || options === null) throw new ConfigError('postgresLoader options must be an object');
  const { pool, text, row } = options;
  if (typeof pool !== 'object' || pool === null || typeof pool.connect !== 'function') throw new ConfigError('postgresLoader: `pool` must be a pg.Pool');
  if (typeof text !== 'string' || text.trim() === '') throw new ConfigError('postgresLoader: `text` must be a non-empty SQL string');
  const params = checkRowOptions('postgresLoader', options);
  const name = options.name ?? `damper_${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
  if (name !== false && (typeof name !== 'string' || name === '')) throw new ConfigError('postgresLoader: `name` must be a non-empty string, or false for an unnamed statement');
  const statement = name === false ? {} : { name };

  return async ({ key, signal }) => {
    signal.throwIfAborted();
    const rows = await cancellableQuery(pool, { ...statement, text, values: params(key) }, signal);
    return oneRow(key, rows, row);
  };
}

/** pg's `SQLSTATE` for "canceling statement due to user request". */
const QUERY_CANCELED = '57014';

/** Runs one query on its own connection; on abort, rejects at once and cancels it on the server. */
function cancellableQuery(pool: PgPoolLike, config: { name?: string; text: string; values: unknown[] }, signal: AbortSignal): Promise<unknown[]> {
  return new Promise<unknown[]>((resolve, reject) => {
    let client: PgClientLike | undefined;
    let cancel: Promise<CancelOutcome> | undefined;
    let released = false;
    const release = (c: PgClientLike, destroy: boolean): void => {
      if (released) return;
      released = true;
      c.off?.('error', ignoreDroppedConnection);
      c.release(destroy);
    };
    const onAbort = (): void => {
      reject(signal.reason);
      if (client === undefined) return; // still waiting for a connection: the query will not be sent
      cancel = sendCancel(client);
      // No way to reach the server: drop the connection rather than keep a slot for a result nobody wants.
      if (cancel === undefined) release(client, true);
    };
    const done = (): void => signal.removeEventListener('abort', onAbort);
    signal.addEventListener('abort', onAbort, { once: true });

    pool.connect().then(
      (c) => {
        c.on?.('error', ignoreDroppedConnection);
        if (signal.aborted) {
          done();
          release(c, false);
          return;
        }
        client = c;
        let query: Promise<{ rows: unknown[] }>;
        try {
          query = c.query(config);
        } catch (error) {
          done();
          release(c, false);
          reject(error);
          return;
        }
        query.then(
          (result) => {
            done();
            // It finished before the cancel took effect, which may still land on this session: discard it.
            release(c, cancel !== undefined);
            resolve(result.rows);
          },
          (error: unknown) => {
            done();
            reject(error);
            if (cancel === undefined) release(c, false);
            else if (sqlState(error) !== QUERY_CANCELED) release(c, true);
            // Our cancel landed, but its second signal may not have yet: the connection goes back only once the server says it is done.
            else void cancel.then((outcome) => release(c, outcome === 'lost'));
          },
        );
      },
      (error: unknown) => {
        done();
        reject(error);
      },
    );
  });
}

function sqlState(error: unknown): unknown {
  return typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
}
