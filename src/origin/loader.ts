/**
 * What the origin helpers (`damper/postgres`, `damper/sqlite`) share: the
 * shape of the loader they build, and the rule "a key is at most one row".
 *
 * @module
 */
import { type LoaderContext } from '../cache/cache.js';
import { ConfigError, DamperError } from '../errors.js';

/**
 * What the helpers return: a cache `Loader<V | undefined>` (it needs only the
 * key and the signal of its context, so it also fits any `Cache<X>` where
 * `X` includes `V | undefined`, and can be called alone as `load({ key, signal })`).
 */
export type OriginLoader<V> = (context: Pick<LoaderContext<unknown>, 'key' | 'signal'>) => Promise<V | undefined>;

/** `code` of the error a loader rejects with when its query returns more than one row. */
export const TOO_MANY_ROWS = 'TOO_MANY_ROWS';

/**
 * The common options of a helper, checked: `row` a function, `params` a
 * function (default: the key as the one parameter).
 */
export function checkRowOptions<R, V, P>(helper: string, options: { row: (row: R) => V; params?: ((key: string) => P) | undefined }): (key: string) => P | string[] {
  if (typeof options.row !== 'function') throw new ConfigError(`${helper}: \`row\` must be a function`);
  const params = options.params ?? ((key: string): string[] => [key]);
  if (typeof params !== 'function') throw new ConfigError(`${helper}: \`params\` must be a function`);
  return params;
}

/**
 * The value of a key from the rows its query returned: `undefined` for none
 * (damper caches "absent"), the mapped row for one, and for several a
 * `TOO_MANY_ROWS` error (an error, not a value: the last known good is kept
 * and the key backs off).
 */
export function oneRow<R, V>(key: string, rows: readonly unknown[], row: (row: R) => V, complete = true): V | undefined {
  if (rows.length === 0) return undefined;
  // `complete`: `rows` is the whole result, so its length is the count (SQLite stops reading at two).
  if (rows.length > 1) throw new DamperError(TOO_MANY_ROWS, `query for key "${key}" returned ${complete ? `${rows.length} rows` : 'more than one row'}, expected at most one`);
  return row(rows[0] as R);
}
