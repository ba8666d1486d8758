/**
 * Cache loaders over SQLite with `better-sqlite3` 12: one prepared query that
 * returns at most one row.
 *
 * Imported from `damper/sqlite`. It does not import `better-sqlite3` itself:
 * it takes your `Database` (anything with the same `prepare` shape).
 *
 * @module
 */
import { ConfigError } from '../errors.js';
import { checkRowOptions, oneRow, type OriginLoader } from './loader.js';

export { type OriginLoader, TOO_MANY_ROWS } from './loader.js';

/** The part of a better-sqlite3 `Statement` the loader uses. */
export interface SqliteStatementLike {
  /** True when the statement returns rows (a SELECT, or `… RETURNING`). */
  readonly reader: boolean;
  iterate(...params: unknown[]): IterableIterator<unknown>;
}

/** The part of a better-sqlite3 `Database` the loader uses. */
export interface SqliteDatabaseLike {
  prepare(source: string): SqliteStatementLike;
}

/** Options of {@link sqliteLoader}. */
export interface SqliteLoaderOptions<V, R> {
  /** An open better-sqlite3 `Database`. */
  db: SqliteDatabaseLike;
  /** The query, with `?` (or `@name`) placeholders. It must return zero or one row. */
  sql: string;
  /**
   * The query's parameters for a cache key: an array for `?` placeholders, an
   * object for named ones. Default: `(key) => [key]`.
   */
  params?: (key: string) => unknown[] | Record<string, unknown>;
  /** Maps the one row to the cached value. */
  row: (row: R) => V;
}


/**
 * Builds a cache loader ({@link OriginLoader}) that runs one prepared query per load and maps its
 * single row. The statement is prepared once, here (a syntax error or an
 * unknown table throws now, not on the first read).
 *
 * The loader takes its parameters from the cache key (`context.key`), so one
 * loader serves every key: `articles.get(id, loadArticle)`.
 *
 * - **No row** → `undefined`: the cache stores "absent" for `absentTtl`
 *   (negative caching). The cache must be a `Cache<V | undefined>`.
 * - **More than one row** → rejects with a `DamperError` whose `code` is
 *   `'TOO_MANY_ROWS'` (at most two rows are read to decide). It is an error,
 *   not a value: the last known good value is kept and the key backs off.
 * - **Abort**: the signal is checked before the query runs; an aborted load
 *   rejects with `signal.reason` and never touches the database. Once started,
 *   a query cannot be interrupted.
 *
 * **It blocks the event loop.** better-sqlite3 is synchronous: each load runs
 * its query on the main thread, and nothing else in the process runs
 * meanwhile. What keeps that bounded is the cache: concurrent reads of a key
 * share one load (coalescing), fresh values are answered from memory, and the
 * origin budget (`maxConcurrentLoads`) caps how many loads are started at
 * once, so the time spent blocked is about (distinct keys missed) × (one
 * indexed lookup), not (reads) × (lookup). Keep the query to an indexed
 * lookup; for slow queries use a worker thread or a server database.
 *
 * @example
 * const db = new Database('articles.db', { readonly: true });
 * const loadArticle = sqliteLoader({
 *   db,
 *   sql: 'SELECT title, body FROM articles WHERE id = ?',
 *   row: (r: { title: string; body: string }) => ({ title: r.title, body: r.body }),
 * });
 * const articles = new Cache<Article | undefined>({ ttl: 60_000 });
 * const article = await articles.get(id, loadArticle); // undefined if no such id
 */
export function sqliteLoader<V, R = Record<string, unknown>>(options: SqliteLoaderOptions<V, R>): OriginLoader<V> {
  if (typeof options !== 'object' || options === null) throw new ConfigError('sqliteLoader options must be an object');
  const { db, sql, row } = options;
  if (typeof db !== 'object' || db === null || typeof db.prepare !== 'function') throw new ConfigError('sqliteLoader: `db` must be a better-sqlite3 Database');
  if (typeof sql !== 'string' || sql.trim() === '') throw new ConfigError('sqliteLoader: `sql` must be a non-empty SQL string');
  const params = checkRowOptions('sqliteLoader', options);
  const statement = db.prepare(sql);
  if (!statement.reader) throw new ConfigError('sqliteLoader: `sql` must return rows (a SELECT)');

  return async ({ key, signal }) => {
    signal.throwIfAborted();
    const p = params(key);
    const found: unknown[] = [];
    // Stop after two rows: enough to tell "one" from "several"; leaving the loop closes the cursor.
    for (const r of Array.isArray(p) ? statement.iterate(...p) : statement.iterate(p)) {
      found.push(r);
      if (found.length > 1) break;
    }
    return oneRow(key, found, row, false);
  };
}
