import { clockOption, isInstance, optionalFunction, optionsObject } from '../config.js';
import { ArgumentError, ConfigError, type SharedTierError, ValidationError } from '../errors.js';
import { Events } from '../events.js';
import { Backoff } from '../guard/backoff.js';
import { checkGuard, type Guard } from '../guard/guard.js';
import { ConcurrencyLimiter } from '../guard/limiter.js';
import { type Clock } from '../time/clock.js';
import { type BusCause } from './bus.js';
import { shouldRefreshEarly } from './early-refresh.js';
import { type Entry, isFresh, isServable } from './entry.js';
import { LocalTier } from './local-tier.js';
import { type CacheOptions, type LoadOptions, resolveCacheShape, resolveLoadOptions, type ResolvedLoadOptions } from './options.js';
import { ReadPath } from './read-path.js';
import { MAX_TAGS_PER_INVALIDATION, SharedTier } from './shared-tier.js';
import { checkSnapshot, resolveRestoreOptions, type RestoreOptions, type RestoreSummary, type Snapshot, SNAPSHOT_FORMAT, SNAPSHOT_VERSION } from './snapshot.js';
import { CacheCounters, type CacheStats } from './stats.js';
import { checkTags } from './tags.js';
import { compileValidator, type Verdict } from './validate.js';
import { warm, type WarmOptions, type WarmSummary } from './warm.js';

/** What a loader receives. */
export interface LoaderContext<V> {
  readonly key: string;
  /** Aborts when the load is abandoned (hard timeout). Pass it to your database driver. */
  readonly signal: AbortSignal;
  /** The last known good value, if the key has one (even past its stale window), else `undefined`. */
  readonly stale: V | undefined;
  /**
   * Sets the tags of the value this load returns, in place of the call's
   * `tags` (what the value depends on is often known only once it is read:
   * the author of a post, the products of an order).
   * @throws ArgumentError for anything but an array of at most 32 non-empty strings.
   */
  setTags(tags: readonly string[]): void;
}

/**
 * Produces the value of a key from the origin. Return `undefined` to say "this
 * key has no value" (negative caching, kept for `absentTtl`); this is only
 * possible when `V` includes `undefined`.
 */
export type Loader<V> = (context: LoaderContext<V>) => Promise<V> | V;

/** Why a stale value was served. */
export type StaleReason = 'revalidate' | 'error' | 'backoff' | 'timeout';

/** Typed events of a {@link Cache}. Listeners run synchronously; what they throw is isolated. */
export interface CacheEvents {
  /**
   * A load by this process succeeded and its value was stored; `ms` is the
   * load's time from its start (the origin budget's queue included), read
   * precisely. Not emitted for `set`, a restore, or a copy from the shared tier.
   */
  load: (e: { readonly key: string; readonly ms: number; readonly absent: boolean }) => void;
  /** A load failed (error, rejection, timeout, refusal by the guard); the key now backs off. `ms`: the load's time until it failed. */
  error: (e: { readonly key: string; readonly error: unknown; readonly failures: number; readonly retryInMs: number; readonly ms: number }) => void;
  /** A loaded value failed validation; it was dropped, the last known good kept, and the key backs off. */
  invalid: (e: { readonly key: string; readonly reason: string; readonly issues: readonly unknown[] | undefined; readonly failures: number; readonly retryInMs: number; readonly ms: number }) => void;
  /** A value past its ttl was served. */
  stale: (e: { readonly key: string; readonly reason: StaleReason; readonly ageMs: number }) => void;
  /** An entry was pushed out to bound memory, or a value was too large to keep. */
  evict: (e: { readonly key: string; readonly reason: 'capacity' | 'oversize' }) => void;
  /**
   * The shared tier held a value this process could not use (another
   * version's layout, bad JSON, too large, or rejected by `validate`); it was
   * treated as a miss. `oversize` is also reported for a value too large to share.
   */
  corrupt: (e: { readonly key: string; readonly reason: 'oversize' | 'version' | 'header' | 'json' | 'invalid' }) => void;
  /** A call to the shared tier failed or timed out. Reads carry on from memory or the origin budget. */
  sharedError: (e: { readonly operation: string; readonly error: SharedTierError }) => void;
  /**
   * The invalidation bus was lost (`up: false`: values in memory are fresh for
   * at most `freshWithoutBus`) or is back, or messages on it were lost
   * (`cause` `disconnect` or `missed`, see {@link BusCause}): every value in
   * memory was then made stale (`staled` of them), served only while it is
   * checked against the shared tier.
   */
  bus: (e: { readonly up: boolean; readonly cause: BusCause; readonly missed?: number; readonly staled: number }) => void;
}

/**
 * A read-through cache that cannot turn an error or an invalid value into a
 * flood of origin queries.
 *
 * - One load per key in flight: concurrent callers share it (principle 2).
 * - An error is not a value: a failed load never evicts or overwrites; the
 *   stale value is served while it lasts, and the key backs off (principles 1, 3).
 * - Values are validated; an invalid one never replaces the last known good (principle 6).
 * - Every load passes through one origin budget (`guard`), so a cold cache over
 *   many keys cannot exceed a stated concurrency on the database.
 *
 * @example
 * const users = new Cache<User>({ ttl: 60_000, staleFor: 3_600_000 });
 * const user = await users.get(`user:${id}`, ({ signal }) => db.findUser(id, { signal }));
 */
export class Cache<V> {
  private readonly clock: Clock;
  /** The in-process tier (L1): each key's entry, and the rules that write one. */
  private readonly local: LocalTier<V>;
  /** The same entries' map, read directly by the hit path (one lookup, no call in between). */
  private readonly store: LocalTier<V>['store'];
  /** Everything a get does past a fresh hit: the flight, the shared tier, the lease, the origin. */
  private readonly reads: ReadPath<V>;
  private readonly defaults: ResolvedLoadOptions;
  private readonly check: ((value: V) => Verdict<V> | Promise<Verdict<V>>) | undefined;
  private readonly beta: number;
  private readonly random: () => number;
  private readonly events: Events<CacheEvents>;
  private readonly counts = new CacheCounters();
  /** The shared tier (Redis), when configured. */
  private readonly shared: SharedTier | undefined;

  constructor(cacheOptions?: CacheOptions<V>) {
    const options = optionsObject('Cache options', cacheOptions);
    const shape = resolveCacheShape(options as CacheOptions<unknown>);
    const clock = clockOption('clock', options.clock);
    this.clock = clock;
    this.events = new Events<CacheEvents>(optionalFunction('onListenerError', options.onListenerError));
    // The clock's `random`, bound: a user's Clock may implement it as a method that uses `this`.
    this.random = () => clock.random();
    this.defaults = resolveLoadOptions(options);
    this.beta = shape.earlyRefresh;
    const backoff = isInstance(options.backoff, Backoff) ? options.backoff : new Backoff(options.backoff);
    const guard: Guard = options.guard === undefined ? new ConcurrencyLimiter({ limit: shape.maxConcurrentLoads, clock }) : checkGuard('guard', options.guard);
    this.check = options.validate === undefined ? undefined : compileValidator(options.validate);
    this.local = new LocalTier<V>({
      clock,
      random: this.random,
      backoff,
      events: this.events,
      counts: this.counts,
      ttlJitter: shape.ttlJitter,
      maxEntries: shape.maxEntries,
      maxBytes: options.maxBytes,
      sizeOf: optionalFunction('size', options.size),
      // While the bus is lost, nothing is fresh for longer than freshWithoutBus: an invalidation could not reach us.
      freshCap: () => (this.shared !== undefined && !this.shared.busUp ? this.shared.freshWithoutBus : Number.POSITIVE_INFINITY),
    });
    this.store = this.local.store;
    this.shared =
      options.shared === undefined
        ? undefined
        : new SharedTier(options.shared, clock, {
            invalidate: (key, how) => this.invalidate(key, how),
            invalidateTags: (tags) => void this.staleTags(tags),
            bus: (up, cause, missed) => this.onBus(up, cause, missed),
            corrupt: (key, reason) => this.events.emit('corrupt', { key, reason }),
            error: (operation, error) => this.events.emit('sharedError', { operation, error }),
          });
    this.reads = new ReadPath<V>({
      clock,
      random: this.random,
      local: this.local,
      shared: this.shared,
      guard,
      check: this.check,
      backoff,
      defaults: this.defaults,
      events: this.events,
      counts: this.counts,
    });
  }

  /**
   * Stops the shared tier's heartbeat and leaves its bus. A cache without a
   * shared tier holds no timer and needs no close. The store (a `RedisStore`)
   * is yours to close after.
   */
  async close(): Promise<void> {
    await this.shared?.close();
  }

  /** Subscribes to an event; returns the function that unsubscribes. */
  on<K extends keyof CacheEvents>(event: K, listener: CacheEvents[K]): () => void {
    return this.events.on(event, listener);
  }

  /** Unsubscribes a listener. */
  off<K extends keyof CacheEvents>(event: K, listener: CacheEvents[K]): void {
    this.events.off(event, listener);
  }

  /** Number of keys held (with a value or an error record). */
  get size(): number {
    return this.store.size;
  }

  /** Loads in flight now; a load superseded by a write counts until it ends, so one key can count twice. */
  get loading(): number {
    return this.reads.flights.size;
  }

  /**
   * What this cache has done since it was made, and holds now (see
   * {@link CacheStats}): a plain object, cheap to take, read by
   * `damper/otel` at each collection. Keeping it costs the hit path one
   * increment and nothing else.
   */
  stats(): CacheStats {
    return this.counts.snapshot(this.store.size, this.reads.flights.size, this.shared?.stats());
  }

  /**
   * Returns the value of `key`, loading it through `loader` when it is missing
   * or expired. Concurrent calls for one key share one load. While the key is
   * stale, its value is returned at once and refreshed in the background; when
   * the load fails, the stale value is returned while it lasts, else the error
   * is thrown. After a failure the key backs off: until the backoff ends,
   * callers get the stale value or the remembered error without a load.
   *
   * @throws ArgumentError for an empty or non-string key or a loader that is not a function.
   * @throws the loader's error (a `LoaderError` if it was not an `Error`), `ValidationError`,
   *   `LoadTimeoutError`, `OverloadedError` or `AbortedError` when there is no value to serve.
   */
  async get(key: string, loader: Loader<V>, options?: LoadOptions): Promise<V> {
    assertKey(key);
    if (typeof loader !== 'function') throw new ArgumentError(`loader for key "${key}" must be a function, got ${typeof loader}`);
    // Per-call options that are not an object are refused at once; their
    // values are checked where they are read, when a load may start: checking
    // every field on every hit costs a hit 1.4–1.6× (docs/cache.md, "Bad input").
    if (options !== undefined && (typeof options !== 'object' || options === null)) throw new ConfigError(`options must be an object, got ${options === null ? 'null' : typeof options}`);
    // Hit path: one map lookup, one clock read, two comparisons. An async
    // function: returning a value from one is cheaper than Promise.resolve
    // from a plain function (measured, bench/hot-paths-ab.ts); a miss hands
    // back its flight's promise (`miss` keeps no async frame of its own).
    const entry = this.store.get(key);
    if (entry !== undefined) {
      const now = this.clock.now();
      if (isFresh(entry, now)) {
        if (this.beta > 0 && shouldRefreshEarly(now, entry.freshUntil, entry.loadMs, this.beta, this.random)) {
          this.reads.refresh(key, entry, loader, now);
        }
        this.counts.hits++;
        return entry.value;
      }
    }
    return this.reads.miss(key, entry, loader, options === undefined ? this.defaults : resolveLoadOptions(options, this.defaults));
  }

  /**
   * Returns the value of `key` if it may be served now (fresh or within its
   * stale window), without loading and without marking it recently used.
   * `undefined` also stands for a cached "absent".
   */
  peek(key: string): V | undefined {
    const entry = this.store.peek(key);
    return isServable(entry, this.clock.now()) ? entry.value : undefined;
  }

  /**
   * Stores `value` for `key` as freshly loaded, after validation. A load in
   * flight for the key is superseded: its result still reaches its callers but
   * is not stored, so it cannot overwrite this newer value. Clears the key's
   * backoff.
   *
   * With a shared tier, the value is written there too (any lease dropped) and
   * every other process is told to forget its copy. With `tags`, the value is
   * made stale by `invalidateTags` on any of them, here and elsewhere.
   *
   * @throws ValidationError when `validate` rejects the value; nothing changes then.
   * @throws SharedTierError when the shared tier could not be written: this
   *   process holds the value, the others were not told.
   */
  async set(key: string, value: V, options?: Pick<LoadOptions, 'ttl' | 'staleFor' | 'absentTtl' | 'tags'>): Promise<void> {
    assertKey(key);
    const o = options === undefined ? this.defaults : resolveLoadOptions(options, this.defaults);
    let stored = value;
    if (this.check !== undefined && value !== undefined) {
      const verdict = await this.check(value);
      if (!verdict.ok) throw new ValidationError(key, verdict.reason, verdict.issues);
      stored = verdict.value;
    }
    this.reads.flights.supersede(key);
    const fresh = this.local.freshFor(stored, o);
    this.local.commit(key, stored, fresh, fresh + o.staleFor, 0, 'set', o.tags);
    await this.shared?.write(key, stored, fresh, o.staleFor, o.tags);
  }

  /**
   * Removes `key`, its value and its error record. A load in flight is
   * superseded and will not write its result back. This is the only way a
   * value leaves the cache other than LRU eviction: damper itself never
   * deletes on error (the Facebook 2010 loop). With a shared tier, the key is
   * removed there too, with its lease: a load in flight in any process can no
   * longer write back a value older than this delete. Resolves to whether this
   * process held the key.
   *
   * @throws SharedTierError when the shared tier could not be reached: the key
   *   is gone from this process only.
   */
  async delete(key: string): Promise<boolean> {
    assertKey(key);
    this.reads.flights.supersede(key);
    const had = this.local.delete(key);
    await this.shared?.remove(key);
    return had;
  }

  /** Removes every key from this process; loads in flight are superseded (their callers still get results). The shared tier is not touched. */
  clear(): void {
    this.reads.flights.supersedeAll();
    this.local.clear();
  }

  /**
   * Makes every value carrying one of `tags` stale, in this process and, with
   * a shared tier, in every process and in the store: a value set or loaded
   * before this call is never served as fresh once it resolves (in another
   * process, once the bus message arrives; a lost message makes all its
   * values stale, see docs/shared-tier.md). Stale, not deleted: each is
   * still served while one refresh per key runs within the origin budget, so
   * invalidating a tag on many hot keys is no stampede (Facebook 2010's
   * loop was a herd of repairs), and a key whose refresh fails keeps its
   * last known good value. Resolves to how many values in this process it
   * made stale.
   *
   * @throws ArgumentError for anything but an array of non-empty strings (at most 1 000).
   * @throws SharedTierError when the store or the bus could not be reached:
   *   this process's values are stale all the same; other processes' may not be.
   */
  async invalidateTags(tags: readonly string[]): Promise<number> {
    const list = checkTags('tags', tags, MAX_TAGS_PER_INVALIDATION);
    if (list === undefined) return 0;
    let staled = 0;
    if (this.shared === undefined) return this.staleTags(list);
    await this.shared.invalidateTags(list, () => {
      staled = this.staleTags(list);
    });
    return staled;
  }

  /**
   * Loads `keys` ahead of traffic (after a restart, say) at a bounded origin
   * rate: at most `concurrency` loads at once (default 4), starts spaced
   * `1000 / rate` ms apart (default 50/s), through the normal load path
   * (coalescing, validation, the `guard`, at priority `background` by
   * default). Fresh keys are skipped; a failing key is counted and the rest go
   * on. Pacing uses the cache's clock; no timer is left once it resolves.
   *
   * @throws ConfigError for bad options; ArgumentError when `keys` is not iterable or `loader` not a function.
   */
  async warm(keys: Iterable<string> | AsyncIterable<string>, loader: Loader<V>, options?: WarmOptions): Promise<WarmSummary> {
    if (typeof loader !== 'function') throw new ArgumentError(`warm-up loader must be a function, got ${typeof loader}`);
    return warm(
      {
        clock: this.clock,
        isFresh: (key) => isFresh(this.store.peek(key), this.clock.now()),
        load: (key, priority) => this.reads.warm(key, loader, priority),
      },
      keys,
      options,
    );
  }

  /**
   * The servable values held in process, to save on shutdown and `restore` on
   * start. JSON-serialisable when `V` is. Windows are durations remaining now,
   * not instants (a restarted process reads another clock).
   */
  snapshot(): Snapshot<V> {
    return { format: SNAPSHOT_FORMAT, version: SNAPSHOT_VERSION, entries: this.local.servable() };
  }

  /**
   * Stores a snapshot's values, each validated by `validate` (an invalid one
   * is skipped), its windows shortened by `elapsedMs` and cut to `maxAgeMs`.
   * A key that already holds a value, or is being loaded, keeps it: that value
   * is newer. A key's error record, if any, is kept.
   *
   * @throws ArgumentError for a malformed snapshot, before anything is stored.
   * @throws ConfigError for bad options.
   */
  async restore(snapshot: Snapshot<V>, options?: RestoreOptions): Promise<RestoreSummary> {
    const o = resolveRestoreOptions(options);
    const s = checkSnapshot(snapshot) as Snapshot<V>;
    const start = this.clock.now();
    let restored = 0;
    let invalid = 0;
    let expired = 0;
    let kept = 0;
    for (const e of s.entries) {
      const servable = Math.min(e.servableMs - o.elapsedMs, o.maxAgeMs);
      // A tagged value restores stale beside a shared tier: another process may have invalidated a tag while this one was down.
      const fresh = e.tags !== undefined && this.shared !== undefined ? 0 : Math.min(Math.max(0, e.freshMs - o.elapsedMs), servable);
      if (!(servable > 0)) {
        expired++;
        continue;
      }
      let value = e.value;
      if (this.check !== undefined && value !== undefined) {
        const verdict = await this.check(value);
        if (!verdict.ok) {
          invalid++;
          continue;
        }
        value = verdict.value;
      }
      // Checked after validation, which may have awaited: a load may have landed meanwhile.
      const prev = this.local.peek(e.key);
      if (this.reads.flights.has(e.key) || prev?.hasValue === true) {
        kept++;
        continue;
      }
      if (this.clock.now() >= start + servable) {
        expired++;
        continue;
      }
      const entry: Entry<V> = { value, hasValue: true, freshUntil: start + fresh, staleUntil: start + servable, loadMs: 0, failures: prev?.failures ?? 0, retryAt: prev?.retryAt ?? 0, error: prev?.error, tags: e.tags };
      if (this.local.restore(e.key, entry)) restored++;
    }
    return { restored, invalid, expired, kept };
  }

  // ---------------------------------------------------------------- internals

  /** Another process changed `key` (through the shared tier's bus): a set or delete drops it, a refill elsewhere makes it stale. */
  private invalidate(key: string, how: 'drop' | 'expire'): void {
    if (how === 'expire') return this.local.expire(key);
    this.reads.flights.supersede(key);
    this.local.delete(key);
  }

  /**
   * `tags` were invalidated (here, or by another process through the bus):
   * every value in memory carrying one is stale from now, and a load in
   * flight stores what it brings stale if it carries one (it may have read
   * the origin before the invalidation). Returns how many values it made stale.
   */
  private staleTags(tags: readonly string[]): number {
    this.reads.flights.invalidateTags(tags);
    return this.local.staleTags(tags);
  }

  /**
   * The bus went down (or came back), or lost messages. Down: every value's
   * freshness is capped at `freshWithoutBus` from now. Messages lost: every
   * value is stale from now (the last known good, served while it is checked
   * against the shared tier), so an invalidation that never came outlives
   * the gap by no more than the time it took to find it.
   */
  private onBus(up: boolean, cause: BusCause, missed: number | undefined): void {
    let staled = 0;
    if (this.shared !== undefined && (cause !== 'heartbeat' || !up)) {
      const now = this.clock.now();
      staled = this.local.capFreshness(cause === 'heartbeat' ? now + this.shared.freshWithoutBus : now, now);
    }
    this.events.emit('bus', missed === undefined ? { up, cause, staled } : { up, cause, missed, staled });
  }
}

function assertKey(key: unknown): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) throw new ArgumentError(`key must be a non-empty string, got ${key === '' ? 'an empty string' : typeof key}`);
}
