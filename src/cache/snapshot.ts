import { ArgumentError, ConfigError, describe } from '../errors.js';
import { checkTags } from './tags.js';

/** Format tag and version of {@link Snapshot}; a snapshot with another version is refused. */
export const SNAPSHOT_FORMAT = 'damper.cache.snapshot';
export const SNAPSHOT_VERSION = 1;

/**
 * One servable entry of a snapshot. Times are durations remaining when the
 * snapshot was taken, never instants: a restarted process reads another
 * clock, so an instant from the old one would mean nothing.
 */
export interface SnapshotEntry<V> {
  readonly key: string;
  readonly value: V;
  /** How much longer the value was fresh, ms (0 if it was already stale). */
  readonly freshMs: number;
  /** How much longer the value was servable at all (fresh plus stale window), ms; ≥ `freshMs`, > 0. */
  readonly servableMs: number;
  /** The value's tags, when it has any: restored with it, so `invalidateTags` still finds it. */
  readonly tags?: readonly string[];
}

/**
 * The in-process tier's servable values, JSON-serialisable when `V` is.
 * Entries are ordered least recently used first. "Absent" answers and keys
 * with only an error record are not included.
 */
export interface Snapshot<V> {
  readonly format: typeof SNAPSHOT_FORMAT;
  readonly version: typeof SNAPSHOT_VERSION;
  readonly entries: readonly SnapshotEntry<V>[];
}

/** Options of `cache.restore(snapshot, options)`. */
export interface RestoreOptions {
  /**
   * Time that passed between `snapshot()` and `restore()`, ms, subtracted from
   * every entry's windows. damper reads no wall clock, so only the caller can
   * know it (e.g. `Date.now() - savedAt`, saved beside the snapshot). Default 0:
   * entries keep the windows they had, as if no time had passed.
   */
  elapsedMs?: number;
  /**
   * Upper bound on how long a restored value stays servable from now, ms: both
   * windows are cut to it. A bound that holds even when `elapsedMs` is unknown
   * or wrong. Default: none.
   */
  maxAgeMs?: number;
}

/** What `cache.restore` did with each entry. */
export interface RestoreSummary {
  /** Entries stored. */
  readonly restored: number;
  /** Entries whose value failed `validate`: never stored. */
  readonly invalid: number;
  /** Entries no longer servable after `elapsedMs` (or with `maxAgeMs` 0). */
  readonly expired: number;
  /** Entries not stored because the cache already held a value for the key, or was loading it (that value is newer). */
  readonly kept: number;
}

/**
 * Checks a snapshot's shape and returns a copy of what it checked (a getter
 * cannot hand `restore` other entries than the ones checked); throws
 * ArgumentError naming the first defect, including a snapshot that cannot be
 * read (a revoked Proxy, a getter that throws). Reads only, changes nothing.
 */
export function checkSnapshot(s: unknown): Snapshot<unknown> {
  if (typeof s !== 'object' || s === null) throw new ArgumentError(`snapshot must be an object, got ${s === null ? 'null' : typeof s}`);
  try {
    return copyChecked(s);
  } catch (error) {
    if (error instanceof ArgumentError) throw error;
    throw new ArgumentError(`snapshot cannot be read: ${describe(error)}`);
  }
}

function copyChecked(s: object): Snapshot<unknown> {
  const o = s as Record<string, unknown>;
  if (o.format !== SNAPSHOT_FORMAT) throw new ArgumentError(`snapshot.format must be "${SNAPSHOT_FORMAT}", got ${JSON.stringify(o.format) ?? 'undefined'}`);
  if (o.version !== SNAPSHOT_VERSION) throw new ArgumentError(`snapshot.version ${describe(o.version)} is not supported (this damper reads version ${SNAPSHOT_VERSION})`);
  if (!Array.isArray(o.entries)) throw new ArgumentError('snapshot.entries must be an array');
  const seen = new Set<string>();
  const entries = o.entries.map((e: unknown, i): SnapshotEntry<unknown> => {
    if (typeof e !== 'object' || e === null) throw new ArgumentError(`snapshot.entries[${i}] must be an object`);
    const { key, freshMs, servableMs, tags } = e as Record<string, unknown>;
    if (typeof key !== 'string' || key.length === 0) throw new ArgumentError(`snapshot.entries[${i}].key must be a non-empty string`);
    if (seen.has(key)) throw new ArgumentError(`snapshot.entries[${i}]: key "${key}" appears twice`);
    seen.add(key);
    if (!('value' in e)) throw new ArgumentError(`snapshot.entries[${i}] ("${key}") has no value`);
    if (typeof freshMs !== 'number' || !Number.isFinite(freshMs) || freshMs < 0) throw new ArgumentError(`snapshot.entries[${i}].freshMs must be a finite number ≥ 0`);
    if (typeof servableMs !== 'number' || !Number.isFinite(servableMs) || servableMs < freshMs || servableMs <= 0) {
      throw new ArgumentError(`snapshot.entries[${i}].servableMs must be a finite number > 0 and ≥ freshMs`);
    }
    const value = (e as { value: unknown }).value;
    if (tags === undefined) return { key, value, freshMs, servableMs };
    const checked = checkTags(`snapshot.entries[${i}].tags`, tags);
    return checked === undefined ? { key, value, freshMs, servableMs } : { key, value, freshMs, servableMs, tags: checked };
  });
  return { format: SNAPSHOT_FORMAT, version: SNAPSHOT_VERSION, entries };
}

/** Checks restore options; throws ConfigError. */
export function resolveRestoreOptions(o: RestoreOptions | undefined): { elapsedMs: number; maxAgeMs: number } {
  if (o !== undefined && (typeof o !== 'object' || o === null)) throw new ConfigError(`restore options must be an object, got ${o === null ? 'null' : typeof o}`);
  const check = (name: string, v: unknown, fallback: number): number => {
    if (v === undefined) return fallback;
    if (typeof v !== 'number' || Number.isNaN(v) || v < 0) throw new ConfigError(`${name} must be a number of milliseconds ≥ 0, got ${describe(v)}`);
    return v;
  };
  return { elapsedMs: check('elapsedMs', o?.elapsedMs, 0), maxAgeMs: check('maxAgeMs', o?.maxAgeMs, Infinity) };
}
