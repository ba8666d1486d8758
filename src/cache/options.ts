import { checkTags } from './tags.js';
import { MAX_TAGS } from '../stores/envelope.js';
import { between, boolean, duration, integer, optionalSignal, or } from '../config.js';
import { ConfigError, describe } from '../errors.js';
import { type Guard } from '../guard/guard.js';
import { type Backoff, type BackoffOptions } from '../guard/backoff.js';
import { type Clock } from '../time/clock.js';
import { checkPriority, type Priority } from '../guard/priority.js';
import { type SharedTierOptions } from './shared-tier.js';
import { type Validator } from './validate.js';
import { type ListenerErrorOption } from '../events.js';

/**
 * Options that can be set on the cache and overridden per `get` call.
 */
export interface LoadOptions {
  /** How long a loaded value is fresh, ms. Default 60 000. */
  ttl?: number;
  /**
   * How long past `ttl` a value may still be served, ms: while a refresh runs
   * (stale-while-revalidate) or when it fails (stale-if-error). Default 300 000.
   * A served value is never older than `ttl + staleFor`.
   */
  staleFor?: number;
  /** Freshness of an "absent" answer (the loader returned `undefined`), ms. Default: the cache's `ttl`. */
  absentTtl?: number;
  /**
   * Hard timeout of one load, ms, from its start: queueing in the origin
   * budget, every attempt a guard makes, and the loader. At its end the
   * loader's signal aborts and the load counts as a failure (backoff, stale
   * served). Default 10 000. A loader that never settles thus ends as a
   * `LoadTimeoutError` instead of pinning its key; guards receive it as the
   * load's `deadline`.
   */
  loadTimeout?: number;
  /**
   * Soft timeout, ms: a caller that waits for a refresh while holding a stale
   * value gets the stale value after this long; the load continues in the
   * background. Only meaningful with `staleWhileRevalidate: false` (otherwise
   * such a caller never waits). Default: none.
   */
  softTimeout?: number | undefined;
  /**
   * How long this caller waits for a load, ms, before it gets the stale value
   * or a `LoadTimeoutError` (phase `wait`). Releases only this caller: others
   * sharing the load keep waiting. Default: none (the load's own timeout bounds it).
   */
  waitTimeout?: number | undefined;
  /** Aborts this caller's wait (only this caller's); rejects with `AbortedError`. */
  signal?: AbortSignal | undefined;
  /**
   * Importance of a load this call starts, for the guard's priority shedding.
   * Default `normal`. Background refreshes (a stale value is being served
   * meanwhile) always go as `background`: they are the first to shed.
   */
  priority?: Priority | undefined;
  /**
   * When a value is stale, return it at once and refresh in the background
   * (true, default), or wait for the refresh and fall back to the stale value
   * only on failure or after `softTimeout` (false).
   */
  staleWhileRevalidate?: boolean;
  /**
   * Tags for the value a load this call starts stores (a loader may replace
   * them with `setTags`): `invalidateTags` makes every value carrying one of
   * them stale, in every process. At most 32, each a non-empty string.
   * Default: none.
   */
  tags?: readonly string[] | undefined;
}

/** Options of `new Cache(options)`. */
export interface CacheOptions<V> extends Omit<LoadOptions, 'signal' | 'waitTimeout' | 'tags'>, ListenerErrorOption {
  /** Most keys held in process (values and error records). Default 10 000. */
  maxEntries?: number;
  /** Optional bound on the summed size of values; needs `size`. */
  maxBytes?: number;
  /** Size of a value in the unit of `maxBytes`. */
  size?: (value: V, key: string) => number;
  /**
   * Checks every loaded or `set` value. An invalid value is never stored and
   * never replaces a valid one; the key backs off as after an error and an
   * `invalid` event is emitted (the Facebook 2010 trigger).
   */
  validate?: Validator<V>;
  /** Per-key backoff after failed loads. Default: 100 ms doubling to 30 s, ±20% jitter. */
  backoff?: BackoffOptions | Backoff;
  /**
   * Fraction of `ttl` by which each value's freshness is shortened at random
   * (0 to 1), so keys loaded together do not expire together. Default 0.1.
   */
  ttlJitter?: number;
  /** XFetch's beta: higher refreshes earlier. 0 disables early refresh. Default 1. */
  earlyRefresh?: number;
  /**
   * The origin budget: every load goes through it. Default: a
   * `ConcurrencyLimiter` of 64 concurrent loads, 1 s queue timeout.
   */
  guard?: Guard;
  /** Default `ConcurrencyLimiter` limit when no `guard` is given. Default 64. */
  maxConcurrentLoads?: number;
  /** Time, timers and randomness. Default `systemClock`. */
  clock?: Clock;
  /**
   * The shared tier (L2), e.g. `{ store: new RedisStore({ client }) }`: values
   * shared by every process, cluster-wide leases so one process loads a key,
   * an invalidation bus for `set`/`delete`, and fail-closed rules when the
   * store degrades. See docs/shared-tier.md. Call `cache.close()` on shutdown.
   */
  shared?: SharedTierOptions;
}

/** Load options after defaults and checks. */
export interface ResolvedLoadOptions {
  readonly ttl: number;
  readonly staleFor: number;
  readonly absentTtl: number;
  readonly loadTimeout: number;
  readonly softTimeout: number | undefined;
  readonly waitTimeout: number | undefined;
  readonly signal: AbortSignal | undefined;
  readonly priority: Priority | undefined;
  readonly staleWhileRevalidate: boolean;
  readonly tags: readonly string[] | undefined;
}

/** Applies defaults to, and checks, the load options; `base` supplies what `o` leaves out. */
export function resolveLoadOptions(o: LoadOptions, base?: ResolvedLoadOptions): ResolvedLoadOptions {
  if (typeof o !== 'object' || o === null) throw new ConfigError(`options must be an object, got ${o === null ? 'null' : typeof o}`);
  try {
    return resolve(o, base);
  } catch (error) {
    // A getter that throws, a revoked Proxy: what cannot be read is a bad option too.
    if (error instanceof ConfigError) throw error;
    throw new ConfigError(`options cannot be read: ${describe(error)}`);
  }
}

function resolve(o: LoadOptions, base: ResolvedLoadOptions | undefined): ResolvedLoadOptions {
  const ttl = duration('ttl', or(o.ttl, base?.ttl ?? 60_000));
  // `or`, not `??`: a null is a bad option, not an absent one (`??` took it for the default).
  const softTimeout = or(o.softTimeout, base?.softTimeout);
  const waitTimeout = or(o.waitTimeout, base?.waitTimeout);
  const signal = optionalSignal('signal', or(o.signal, base?.signal));
  const priority = checkPriority('priority', or(o.priority, base?.priority));
  const swr = boolean('staleWhileRevalidate', or(o.staleWhileRevalidate, base?.staleWhileRevalidate ?? true));
  return {
    ttl,
    staleFor: duration('staleFor', or(o.staleFor, base?.staleFor ?? 300_000)),
    absentTtl: duration('absentTtl', or(o.absentTtl, base?.absentTtl ?? ttl)),
    loadTimeout: duration('loadTimeout', or(o.loadTimeout, base?.loadTimeout ?? 10_000), { timer: true, positive: true }),
    softTimeout: softTimeout === undefined ? undefined : duration('softTimeout', softTimeout, { timer: true }),
    waitTimeout: waitTimeout === undefined ? undefined : duration('waitTimeout', waitTimeout, { timer: true }),
    signal,
    priority,
    staleWhileRevalidate: swr,
    // Per call only: the cache's own defaults carry none.
    tags: base === undefined || o.tags === undefined ? undefined : checkTags('tags', o.tags, MAX_TAGS, (m) => new ConfigError(m)),
  };
}

/** Checks the cache-wide numeric options that are not load options. */
export function resolveCacheShape(o: CacheOptions<unknown>): { maxEntries: number; ttlJitter: number; earlyRefresh: number; maxConcurrentLoads: number } {
  return {
    maxEntries: integer('maxEntries', or(o.maxEntries, 10_000), 1),
    ttlJitter: between('ttlJitter', or(o.ttlJitter, 0.1), 0, 1),
    earlyRefresh: between('earlyRefresh', or(o.earlyRefresh, 1), 0, 1000),
    maxConcurrentLoads: integer('maxConcurrentLoads', or(o.maxConcurrentLoads, 64), 1),
  };
}
