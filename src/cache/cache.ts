import assert from 'node:assert/strict';
import { clockOption, isInstance, optionalFunction, optionsObject } from '../config.js';
import { AbortedError, ArgumentError, ConfigError, type DamperError, isError, LoaderError, LoadTimeoutError, type SharedTierError, ValidationError } from '../errors.js';
import { Events } from '../events.js';
import { Backoff } from '../guard/backoff.js';
import { runAbandonable } from '../guard/abandon.js';
import { checkGuard, type Guard } from '../guard/guard.js';
import { ConcurrencyLimiter } from '../guard/limiter.js';
import { type Priority } from '../guard/priority.js';
import { MemoryStore } from '../stores/memory.js';
import { type Clock, preciseNow, type Timer } from '../time/clock.js';
import { type BusCause } from './bus.js';
import { shouldRefreshEarly } from './early-refresh.js';
import { emptyEntry, type Entry, isBackingOff, isFresh, isServable } from './entry.js';
import { type Flight, type FlightKind, Flights, type Outcome } from './flight.js';
import { countsAgainstKey, refusedByBudget } from './refusal.js';
import { HardTimeout } from './hard-timeout.js';
import { CacheCounters, type CacheStats } from './stats.js';
import { type CacheOptions, type LoadOptions, resolveCacheShape, resolveLoadOptions, type ResolvedLoadOptions } from './options.js';
import { type Resolution } from './cluster-flight.js';
import { type Lookup, MAX_TAGS_PER_INVALIDATION, SharedTier } from './shared-tier.js';
import { checkTags, sharesTag, TagIndex } from './tags.js';
import { checkSnapshot, resolveRestoreOptions, type RestoreOptions, type RestoreSummary, type Snapshot, SNAPSHOT_FORMAT, SNAPSHOT_VERSION, type SnapshotEntry } from './snapshot.js';
import { compileValidator, type Verdict, verdictBefore, verdictWithin } from './validate.js';
import { warm, type WarmKeyOutcome, type WarmOptions, type WarmSummary } from './warm.js';

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

/** When and how a load began: what `resolve` needs from `run`. */
interface LoadStart<V> {
  /** Precise clock reading at the start, for the load's duration. */
  readonly started: number;
  /** When the get's `loadTimeout` ends, on the clock. */
  readonly deadline: number;
  readonly accept: (value: unknown) => Verdict<V> | Promise<Verdict<V>>;
  /** The shared tier's first read, when it was made and was no hit. */
  readonly first: Lookup<V> | undefined;
}

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
  /** The clock's `random`, bound: a user's Clock may implement it as a method that uses `this`. */
  private readonly random: () => number;
  private readonly store: MemoryStore<Entry<V>>;
  private readonly flights = new Flights<V>();
  /** Which keys in memory carry which tag: `invalidateTags` finds them without a scan. */
  private readonly tagIndex = new TagIndex();
  private readonly defaults: ResolvedLoadOptions;
  private readonly check: ((value: V) => Verdict<V> | Promise<Verdict<V>>) | undefined;
  private readonly backoff: Backoff;
  private readonly guard: Guard;
  private readonly ttlJitter: number;
  private readonly beta: number;
  private readonly events: Events<CacheEvents>;
  private readonly counts = new CacheCounters();
  /** The shared tier (Redis), when configured. */
  private readonly shared: SharedTier | undefined;
  /**
   * Validates a value read from the shared tier (untrusted bytes) for a load
   * that must end by `deadline`: `validate`, or accept as is. An async verdict
   * gets what is left of the load's time: the first read of the shared tier
   * comes before the load's hard timeout is armed, and nothing else would end
   * a validator that never settles. So `loadTimeout` bounds the whole get.
   */
  private acceptBy(deadline: number): (value: unknown) => Verdict<V> | Promise<Verdict<V>> {
    const check = this.check;
    if (check === undefined) return acceptAny as (value: unknown) => Verdict<V>;
    return (value) => {
      const verdict = check(value as V);
      return verdict instanceof Promise ? verdictWithin(verdict, this.clock, Math.max(0, deadline - this.clock.now())) : verdict;
    };
  }

  constructor(cacheOptions?: CacheOptions<V>) {
    const options = optionsObject('Cache options', cacheOptions);
    const shape = resolveCacheShape(options as CacheOptions<unknown>);
    this.clock = clockOption('clock', options.clock);
    this.events = new Events<CacheEvents>(optionalFunction('onListenerError', options.onListenerError));
    const clock = this.clock;
    this.random = () => clock.random();
    this.defaults = resolveLoadOptions(options);
    this.ttlJitter = shape.ttlJitter;
    this.beta = shape.earlyRefresh;
    this.backoff = isInstance(options.backoff, Backoff) ? options.backoff : new Backoff(options.backoff);
    this.guard = options.guard === undefined ? new ConcurrencyLimiter({ limit: shape.maxConcurrentLoads, clock: this.clock }) : checkGuard('guard', options.guard);
    this.check = options.validate === undefined ? undefined : compileValidator(options.validate);
    const size = optionalFunction('size', options.size);
    this.store = new MemoryStore<Entry<V>>({
      maxEntries: shape.maxEntries,
      maxBytes: options.maxBytes,
      sizeOf: size === undefined ? undefined : (e, key) => (e.hasValue ? size(e.value, key) : 1),
      onEvict: (key, entry) => {
        this.tagIndex.remove(key, entry.tags);
        this.evicted(key, 'capacity');
      },
    });
    this.shared =
      options.shared === undefined
        ? undefined
        : new SharedTier(options.shared, this.clock, {
            invalidate: (key, how) => this.invalidate(key, how),
            invalidateTags: (tags) => void this.staleTags(tags),
            bus: (up, cause, missed) => this.onBus(up, cause, missed),
            corrupt: (key, reason) => this.events.emit('corrupt', { key, reason }),
            error: (operation, error) => this.events.emit('sharedError', { operation, error }),
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

  /** Keys currently being loaded. */
  get loading(): number {
    return this.flights.size;
  }

  /**
   * What this cache has done since it was made, and holds now (see
   * {@link CacheStats}): a plain object, cheap to take, read by
   * `damper/otel` at each collection. Keeping it costs the hit path one
   * increment and nothing else.
   */
  stats(): CacheStats {
    return this.counts.snapshot(this.store.size, this.flights.size, this.shared?.stats());
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
          this.refresh(key, entry, loader, now);
        }
        this.counts.hits++;
        return entry.value;
      }
    }
    return this.miss(key, entry, loader, options === undefined ? this.defaults : resolveLoadOptions(options, this.defaults));
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
   * every other process is told to forget its copy.
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
    this.flights.supersede(key);
    const fresh = this.freshFor(stored, o);
    this.commit(key, stored, fresh, fresh + o.staleFor, 0, 'set', o.tags);
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
    this.flights.supersede(key);
    this.tagIndex.remove(key, this.store.peek(key)?.tags);
    const had = this.store.delete(key);
    await this.shared?.remove(key);
    return had;
  }

  /** Removes every key from this process; loads in flight are superseded (their callers still get results). The shared tier is not touched. */
  clear(): void {
    this.flights.supersedeAll();
    this.store.clear();
    this.tagIndex.clear();
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
        load: (key, priority) => this.warmLoad(key, loader, priority),
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
    const now = this.clock.now();
    const entries: SnapshotEntry<V>[] = [];
    for (const [key, e] of this.store.entriesOldestFirst()) {
      if (!isServable(e, now) || e.value === undefined) continue;
      const windows = { key, value: e.value, freshMs: Math.max(0, e.freshUntil - now), servableMs: e.staleUntil - now };
      entries.push(e.tags === undefined ? windows : { ...windows, tags: e.tags });
    }
    return { format: SNAPSHOT_FORMAT, version: SNAPSHOT_VERSION, entries };
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
      const prev = this.store.peek(e.key);
      if (this.flights.has(e.key) || prev?.hasValue === true) {
        kept++;
        continue;
      }
      if (this.clock.now() >= start + servable) {
        expired++;
        continue;
      }
      const entry: Entry<V> = { value, hasValue: true, freshUntil: start + fresh, staleUntil: start + servable, loadMs: 0, failures: prev?.failures ?? 0, retryAt: prev?.retryAt ?? 0, error: prev?.error, tags: e.tags };
      if (this.store.set(e.key, entry)) {
        this.tagIndex.replace(e.key, prev?.tags, e.tags);
        restored++;
      } else this.evicted(e.key, 'oversize');
    }
    return { restored, invalid, expired, kept };
  }

  // ---------------------------------------------------------------- internals

  /** One warm-up key through the normal load path; joins a load in flight. Never rejects. */
  private async warmLoad(key: string, loader: Loader<V>, priority: Priority): Promise<WarmKeyOutcome> {
    const entry = this.store.peek(key);
    const now = this.clock.now();
    if (isFresh(entry, now)) return { status: 'skipped' };
    let flight = this.flights.get(key);
    if (flight === undefined) {
      if (entry !== undefined && isBackingOff(entry, now)) return entry.failures > 0 ? { status: 'failed', error: entry.error } : { status: 'skipped' };
      flight = this.start(key, entry, loader, { ...this.defaults, priority }, 'warm');
    }
    const outcome = await flight.promise;
    return outcome.ok ? { status: 'loaded' } : { status: 'failed', error: outcome.error };
  }

  /** Everything but a fresh hit. Synchronous up to the wait, so a miss keeps no suspended frame; what it throws rejects `get`. */
  private miss(key: string, entry: Entry<V> | undefined, loader: Loader<V>, o: ResolvedLoadOptions): V | Promise<V> {
    if (o.signal?.aborted === true) {
      this.counts.errors++;
      throw new AbortedError(`get("${key}") aborted before it started`, o.signal.reason);
    }
    const now = this.clock.now();
    const servable = isServable(entry, now) ? entry : undefined;

    // Backing off after a failure (or deferred by the shared tier): answer
    // from memory, do not touch the origin.
    if (entry !== undefined && isBackingOff(entry, now)) {
      this.counts.backoffRefusals++;
      if (servable !== undefined) return this.serveStale(key, servable, 'backoff', now);
      this.counts.errors++;
      throw entry.error;
    }

    // Queue for the origin budget only if this caller will wait for the result.
    const joined = this.flights.get(key);
    const flight = joined ?? this.start(key, entry, loader, o, servable === undefined || !o.staleWhileRevalidate ? 'read' : 'revalidate');
    if (servable !== undefined && o.staleWhileRevalidate) return this.serveStale(key, servable, 'revalidate', now);
    if (joined !== undefined) this.counts.coalesced++;
    return this.wait(key, flight, o, servable !== undefined);
  }

  /** Starts a background refresh of a key that has a value, unless one runs or the key backs off. */
  private refresh(key: string, entry: Entry<V>, loader: Loader<V>, now: number): void {
    if (this.flights.has(key) || isBackingOff(entry, now)) return;
    this.start(key, entry, loader, this.defaults, 'early');
  }

  private start(key: string, entry: Entry<V> | undefined, loader: Loader<V>, o: ResolvedLoadOptions, kind: FlightKind): Flight<V> {
    return this.flights.start(key, kind, (flight) => this.run(key, flight, loader, o, entry));
  }

  /**
   * Runs one load to its end. Never rejects: the outcome is data, so no
   * rejection goes unhandled. The hard timeout covers the whole load (the
   * origin budget's queue, every attempt a guard makes, the loader), and is
   * handed to the guard as the load's deadline, so a retry never starts an
   * attempt that could not finish in time.
   */
  private run(key: string, flight: Flight<V>, loader: Loader<V>, o: ResolvedLoadOptions, entry: Entry<V> | undefined): Promise<Outcome<V>> {
    // Durations read the clock precisely (a load of 0.36 ms is not 0 ms); deadlines read it as every decision does.
    const started = preciseNow(this.clock);
    const deadline = this.clock.now() + o.loadTimeout;
    const accept = this.acceptBy(deadline);
    const shared = this.shared;
    if (shared === undefined || flight.kind === 'early') return this.resolve(key, flight, loader, o, entry, { started, deadline, accept, first: undefined });
    // The common miss in a cluster: the value is fresh in the shared tier. It
    // needs no signal, no hard-timeout timer and no lease (the store's own time
    // limit bounds the read), so none is made: this is the L2 hit path, chained
    // rather than awaited, so no suspended frame is kept per miss.
    return shared.lookup(key, accept).then((first) => {
      if (first.kind !== 'hit') return this.resolve(key, flight, loader, o, entry, { started, deadline, accept, first });
      const outcome = this.settle(key, flight, first, o, started, undefined);
      this.flights.land(key, flight);
      return outcome;
    });
  }

  /** The rest of a load once the shared tier (if any) has no fresh value: the lease, the origin, the outcome. */
  private async resolve(key: string, flight: Flight<V>, loader: Loader<V>, o: ResolvedLoadOptions, entry: Entry<V> | undefined, at: LoadStart<V>): Promise<Outcome<V>> {
    const { started, deadline, accept, first } = at;
    // Armed for what is left of loadTimeout after the first read: the get's one bound, from its start.
    const hard = new HardTimeout(this.clock, key, o.loadTimeout, deadline - this.clock.now());
    const stale = entry !== undefined && entry.hasValue ? entry.value : undefined;
    // The call's tags, which the loader may replace (setTags) before its value is stored.
    const tagged: LoadTags = { tags: o.tags };
    const load = (): Promise<V> => this.load(key, flight, hard, loader, o, stale, deadline, tagged);
    try {
      if (this.shared !== undefined) {
        const resolution = await this.shared.resolve<V>({
          key,
          hard,
          servable: isServable(entry, started),
          early: flight.kind === 'early',
          failures: entry?.failures ?? 0,
          deadline,
          staleFor: o.staleFor,
          freshFor: (value) => this.freshFor(value, o),
          backoff: (failures) => this.backoff.delay(failures, this.random),
          accept,
          load,
          tags: () => tagged.tags,
        }, first);
        return this.settle(key, flight, resolution, o, started, tagged.tags);
      }
      const value = await load();
      if (!flight.superseded) {
        const fresh = this.freshFor(value, o);
        this.commit(key, value, this.unlessTagged(flight, tagged.tags, fresh), fresh + o.staleFor, preciseNow(this.clock) - started, 'load', tagged.tags);
      }
      return { ok: true, value };
    } catch (thrown) {
      // Past the hard timeout, whatever a guard rejected with, the cause is the timeout.
      const error = hard.expired ?? thrown;
      if (!flight.superseded && countsAgainstKey(flight.kind, error)) this.fail(key, error, preciseNow(this.clock) - started);
      return { ok: false, error };
    } finally {
      hard.cancel();
      this.flights.land(key, flight);
    }
  }

  /** One origin load: through the guard (the origin budget), then validated. Rejects on any failure. */
  private async load(key: string, flight: Flight<V>, hard: HardTimeout, loader: Loader<V>, o: ResolvedLoadOptions, stale: V | undefined, deadline: number, tagged: LoadTags): Promise<V> {
    // Only a caller who waits queues for the origin budget; a warm-up keeps its priority, a background refresh has none.
    const wait = flight.kind === 'read';
    const context = { key, signal: hard.signal, wait, priority: wait || flight.kind === 'warm' ? o.priority : 'background', deadline };
    const loaded = await this.guard.run((attempt) => this.callLoader(key, flight, loader, attempt, stale, tagged), context);
    if (this.check === undefined || loaded === undefined) return loaded;
    const checked = this.check(loaded);
    // The hard timeout covers validation too: an async validator that never settles ends with the load's LoadTimeoutError.
    // A synchronous verdict is awaited all the same: one microtask, as before this bound, so the lab's replays keep their order of events.
    const verdict = await (checked instanceof Promise ? verdictBefore(checked, hard.signal) : Promise.resolve(checked));
    if (!verdict.ok) {
      this.counts.validationRejections++;
      throw new ValidationError(key, verdict.reason, verdict.issues);
    }
    return verdict.value;
  }

  /** Applies what the shared tier decided to this process's memory, and turns it into the flight's outcome. */
  private settle(key: string, flight: Flight<V>, r: Resolution<V>, o: ResolvedLoadOptions, started: number, loadedTags: readonly string[] | undefined): Outcome<V> {
    const keep = !flight.superseded;
    switch (r.kind) {
      case 'hit':
        // Read before messages on the bus were found lost: it may predate an invalidation this process never got.
        if (keep) this.commit(key, r.value, started < (this.shared?.lastBusGapAt ?? Number.NEGATIVE_INFINITY) ? 0 : this.unlessTagged(flight, r.tags, r.freshMs), r.servableMs, r.loadMs, 'shared', r.tags);
        return { ok: true, value: r.value };
      case 'loaded':
        if (keep && r.keep) this.commit(key, r.value, this.unlessTagged(flight, loadedTags, r.freshMs), r.freshMs + o.staleFor, r.loadMs, 'load', loadedTags);
        return { ok: true, value: r.value };
      case 'stale':
        // Another process refreshes it: keep the shared (newest) copy, stale, and look again later.
        if (keep) this.commit(key, r.value, 0, r.servableMs, r.loadMs, 'shared', r.tags);
        this.defer(key, r.retryInMs);
        return { ok: true, value: r.value };
      case 'deferred':
        this.defer(key, r.retryInMs);
        return { ok: false, error: r.error };
      case 'failed':
        if (keep && countsAgainstKey(flight.kind, r.error)) this.fail(key, r.error, preciseNow(this.clock) - started, r.failures, r.retryInMs);
        return { ok: false, error: r.error };
    }
  }

  /**
   * Calls the loader, turning every way it can misbehave into a rejection with
   * an Error, and giving up when `signal` aborts even if the loader ignores it.
   */
  private callLoader(key: string, flight: Flight<V>, loader: Loader<V>, signal: AbortSignal, stale: V | undefined, tagged: LoadTags): Promise<V> {
    const abortedLoad = (reason: unknown): Error => (isError(reason) ? reason : new AbortedError(`load of "${key}" aborted`, reason));
    if (signal.aborted) return Promise.reject(abortedLoad(signal.reason));
    this.counts.loads++;
    if (flight.kind === 'warm') this.counts.warmLoads++;
    // The load's time limit is the signal's (the hard timeout, or a guard's attempt): no limit of its own.
    // A loader may return a plain value: runAbandonable starts it through startTask, which makes it a promise.
    const setTags = (tags: readonly string[]): void => {
      tagged.tags = checkTags('setTags', tags);
    };
    return runAbandonable((s) => loader({ key, signal: s, stale, setTags }) as Promise<V>, {
      clock: this.clock,
      parent: signal,
      at: undefined,
      timeout: () => abortedLoad(signal.reason),
      aborted: abortedLoad,
      // Whatever the loader threw, the load settles: a value that is no Error (or will not say) becomes a LoaderError.
      failure: (error) => {
        this.counts.loadErrors++;
        return isError(error) ? error : new LoaderError(key, error);
      },
      onAbandon: this.countLoadError,
    });
  }

  private readonly countLoadError = (): void => {
    this.counts.loadErrors++;
  };

  /** Waits for a flight on behalf of one caller, who may leave early (signal, wait or soft timeout). */
  private wait(key: string, flight: Flight<V>, o: ResolvedLoadOptions, hasStale: boolean): Promise<V> {
    const soft = hasStale ? o.softTimeout : undefined;
    if (o.signal === undefined && o.waitTimeout === undefined && soft === undefined) {
      return flight.promise.then((outcome) => this.answer(key, outcome));
    }
    return new Promise<V>((resolve, reject) => {
      const timers: Timer[] = [];
      const { signal } = o;
      let left = false;
      const leave = (): void => {
        left = true;
        for (const t of timers) t.cancel();
        signal?.removeEventListener('abort', onAbort);
      };
      const onAbort = (): void => {
        leave();
        this.counts.errors++;
        reject(new AbortedError(`get("${key}") aborted while waiting for its load`, signal?.reason));
      };
      // Leaving early: serve the stale value if it is still within its window, else fail this caller only.
      const giveUp = (error: DamperError): void => {
        leave();
        const entry = this.store.peek(key);
        const now = this.clock.now();
        if (isServable(entry, now)) {
          resolve(this.serveStale(key, entry, 'timeout', now));
        } else {
          this.counts.errors++;
          reject(error);
        }
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      if (o.waitTimeout !== undefined) timers.push(this.clock.setTimer(() => giveUp(new LoadTimeoutError(key, o.waitTimeout as number, 'wait')), o.waitTimeout));
      if (soft !== undefined) timers.push(this.clock.setTimer(() => giveUp(new LoadTimeoutError(key, soft, 'wait')), soft));
      flight.promise.then((outcome) => {
        if (left) return;
        leave();
        try {
          resolve(this.answer(key, outcome));
        } catch (error) {
          reject(error);
        }
      });
    });
  }

  /** What a waiting caller gets from a finished load: its value, else the stale value within its window, else the error. */
  private answer(key: string, outcome: Outcome<V>): V {
    if (outcome.ok) {
      this.counts.misses++;
      return outcome.value;
    }
    const entry = this.store.peek(key);
    const now = this.clock.now();
    if (isServable(entry, now)) return this.serveStale(key, entry, 'error', now);
    this.counts.errors++;
    throw outcome.error;
  }

  private serveStale(key: string, entry: Entry<V>, reason: StaleReason, now: number): V {
    this.counts.stale[reason]++;
    if (this.events.has('stale')) this.events.emit('stale', { key, reason, ageMs: now - entry.freshUntil });
    return entry.value;
  }

  /** How long a value loaded now stays fresh: its ttl, shortened by jitter only (never fresh for longer than its ttl). */
  private freshFor(value: V, o: ResolvedLoadOptions): number {
    const ttl = value === undefined ? o.absentTtl : o.ttl;
    return ttl * (1 - this.ttlJitter * this.clock.random());
  }

  /**
   * Stores a good value, fresh for `freshMs` and servable for `servableMs`
   * from now, backoff cleared. While the shared tier's bus is lost, nothing is
   * fresh for longer than `freshWithoutBus`: an invalidation could not reach us.
   * Only a value this process loaded is a `load` event: a `set` or a copy from
   * the shared tier took no load here, and a `load` with `ms: 0` would drag
   * down every load-duration histogram built on the event.
   */
  private commit(key: string, value: V, freshMs: number, servableMs: number, loadMs: number, source: 'load' | 'shared' | 'set', tags: readonly string[] | undefined): void {
    const now = this.clock.now();
    const fresh = this.shared !== undefined && !this.shared.busUp ? Math.min(freshMs, this.shared.freshWithoutBus) : freshMs;
    const entry: Entry<V> = { value, hasValue: true, freshUntil: now + fresh, staleUntil: now + servableMs, loadMs, failures: 0, retryAt: 0, error: undefined, tags };
    assert(fresh >= 0 && entry.staleUntil >= entry.freshUntil, 'a stale window starts where freshness ends');
    const before = this.store.peek(key)?.tags;
    if (this.store.set(key, entry)) {
      this.tagIndex.replace(key, before, tags);
    } else {
      this.tagIndex.remove(key, before);
      this.store.delete(key);
      this.evicted(key, 'oversize');
    }
    if (source === 'load' && this.events.has('load')) this.events.emit('load', { key, ms: loadMs, absent: value === undefined });
  }

  /** No load for `key` before `ms` from now, without counting a failure (the shared tier asked us to look again later). */
  private defer(key: string, ms: number): void {
    const entry = this.store.peek(key);
    if (entry !== undefined) entry.retryAt = Math.max(entry.retryAt, this.clock.now() + ms);
  }

  /** Another process changed `key` (through the shared tier's bus). */
  private invalidate(key: string, how: 'drop' | 'expire'): void {
    if (how === 'drop') {
      this.flights.supersede(key);
      this.tagIndex.remove(key, this.store.peek(key)?.tags);
      this.store.delete(key);
      return;
    }
    // A refill elsewhere: our copy is outdated but still the last known good.
    const entry = this.store.peek(key);
    if (entry !== undefined && entry.hasValue) {
      entry.freshUntil = Math.min(entry.freshUntil, this.clock.now());
      entry.retryAt = 0;
    }
  }

  /**
   * `tags` were invalidated (here, or by another process through the bus):
   * every value in memory carrying one is stale from now (still the last
   * known good, served for its stale window while it is refreshed), and a load in flight stores
   * what it brings stale if it carries one: it may have read the origin
   * before the invalidation. A key backing off after failures keeps its
   * backoff. Returns how many values it made stale.
   */
  private staleTags(tags: readonly string[]): number {
    const now = this.clock.now();
    let staled = 0;
    for (const tag of tags) {
      for (const key of this.tagIndex.keysOf(tag)) {
        const entry = this.store.peek(key);
        if (entry === undefined || !entry.hasValue || entry.tags?.includes(tag) !== true) continue;
        if (entry.freshUntil > now) {
          // The stale window now starts here, as if the value had aged out: with `staleFor: 0` it is not served at all.
          entry.staleUntil = now + (entry.staleUntil - entry.freshUntil);
          entry.freshUntil = now;
          staled++;
        }
        if (entry.failures === 0) entry.retryAt = 0;
      }
    }
    this.flights.invalidateTags(tags);
    return staled;
  }

  /** `freshMs`, or 0 when a value with `tags` was brought by a flight that a tag invalidation overtook. */
  private unlessTagged(flight: Flight<V>, tags: readonly string[] | undefined, freshMs: number): number {
    return sharesTag(tags, flight.invalidatedTags) ? 0 : freshMs;
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
      const cap = cause === 'heartbeat' ? now + this.shared.freshWithoutBus : now;
      for (const [, entry] of this.store.entriesOldestFirst()) {
        if (entry.freshUntil <= cap) continue;
        entry.freshUntil = cap;
        if (cap === now && entry.hasValue) staled++;
      }
    }
    this.events.emit('bus', missed === undefined ? { up, cause, staled } : { up, cause, missed, staled });
  }

  /**
   * Records a failed load. The value, if any, is untouched: an error is not a
   * value (principle 1). The key backs off for a capped, jittered, growing
   * delay (principle 3).
   */
  private fail(key: string, error: unknown, ms: number, failures?: number, retryInMs?: number): void {
    const now = this.clock.now();
    let entry = this.store.peek(key);
    if (entry === undefined) {
      entry = emptyEntry<V>();
      this.store.set(key, entry);
    }
    const had = entry.hasValue;
    const kept = entry.value;
    // With a shared tier, the count and delay are the cluster's: backoff grows per key, not per process.
    entry.failures = failures ?? entry.failures + 1;
    let delay = retryInMs ?? this.backoff.delay(entry.failures, this.random);
    // Refused by the origin budget while a value is served: the budget is a
    // queue for refreshes, not an outage, so the retry waits at most
    // REFUSED_RETRY_MAX_MS (an exponential backoff to 30 s would leave the key
    // stale that long for being one of many due at once).
    if (refusedByBudget(error) && entry.hasValue) delay = Math.min(delay, REFUSED_RETRY_MAX_MS * (1 - 0.2 * this.clock.random()));
    entry.retryAt = now + delay;
    entry.error = error;
    // Principle 1, the Facebook 2010 loop's first half: a failure is recorded beside the value, never in its place.
    assert(entry.hasValue === had && entry.value === kept, 'an error is not a value: a failed load leaves the value as it was');
    if (error instanceof ValidationError) {
      this.events.emit('invalid', { key, reason: error.reason, issues: error.issues, failures: entry.failures, retryInMs: delay, ms });
    } else {
      this.events.emit('error', { key, error, failures: entry.failures, retryInMs: delay, ms });
    }
  }

  private evicted(key: string, reason: 'capacity' | 'oversize'): void {
    this.counts.evictions++;
    this.events.emit('evict', { key, reason });
  }
}

/** The tags of the value one load brings: the call's, until its loader sets its own. */
interface LoadTags {
  tags: readonly string[] | undefined;
}

/** Longest wait before a key whose refresh the origin budget refused tries again, ms. */
const REFUSED_RETRY_MAX_MS = 1_000;

/** The verdict without `validate`: a shared copy is taken as it decoded. */
function acceptAny<V>(value: unknown): Verdict<V> {
  return { ok: true, value: value as V };
}

function assertKey(key: unknown): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) throw new ArgumentError(`key must be a non-empty string, got ${key === '' ? 'an empty string' : typeof key}`);
}
