import { duration, hasMethods, integer, isInstance, optionsObject, or } from '../config.js';
import { ConfigError, SharedTierError } from '../errors.js';
import { CircuitBreaker, type CircuitBreakerOptions } from '../guard/breaker.js';
import { type GuardContext, NOT_NOW, startTask } from '../guard/guard.js';
import { type SharedBackend, type SharedRead } from '../stores/backend.js';
import { type CorruptReason, decodeEnvelope, encodeEnvelope, parseTags } from '../stores/envelope.js';
import { type Clock, type Timer } from '../time/clock.js';
import { type BusCause, InvalidationBus } from './bus.js';
import { ClusterFlight, type LeaseStore, type ResolveRequest, type Resolution } from './cluster-flight.js';
import { type SharedTierStats } from './stats.js';
import { type Verdict } from './validate.js';

/** Options of the shared tier: `new Cache({ shared: { store, … } })`. */
export interface SharedTierOptions {
  /** The backend every process sees: a `RedisStore`, or an `InMemorySharedStore` in tests and the lab. */
  store: SharedBackend;
  /** Keeps this cache's keys and bus apart from other caches on the same store (`namespace:key` in the store). Default `default`; no `:` or `|`. */
  namespace?: string;
  /**
   * Time limit on each call to the store, ms. Default 250. Tight on purpose:
   * a value that takes longer than this to come from a cache is worth less
   * than the stale copy in memory, and a hung store (SIGSTOP, a full network
   * buffer) must turn into a fast "unavailable" before callers pile up behind it.
   */
  timeout?: number;
  /**
   * The store's own breaker. Default: opens after 3 failed calls in a row,
   * for 500 ms doubling to 3 s, so a dead store costs one timeout per key at
   * most a few times a second and a store that is back is used again within
   * seconds. Pass a `CircuitBreaker` to share or observe it.
   */
  breaker?: CircuitBreaker | CircuitBreakerOptions;
  /** How often this process publishes a heartbeat on the bus, ms. Default 1 000. */
  heartbeat?: number;
  /** The bus counts as lost when this process has not heard its own heartbeat for this long, ms. Default 3 000. */
  busTimeout?: number;
  /**
   * While the bus is lost, no value in memory is fresh for longer than this
   * after it was stored (or after the loss was noticed), ms. Default 1 000.
   * An invalidation sent meanwhile cannot arrive, so a value served from
   * memory is known to be current only this long: past it, the value is
   * stale (still served while a refresh runs) and the next read goes to the
   * store. The loss is judged at each heartbeat, so a value may be outdated
   * for at most `busTimeout + heartbeat + freshWithoutBus`.
   */
  freshWithoutBus?: number;
  /**
   * Longest wait between two looks at the store while another process holds
   * a key's lease, ms. Default 200. The holder's fill normally wakes waiters at
   * once through the bus; the poll only matters when a message is lost.
   */
  leasePoll?: number;
  /** Extra lease lifetime beyond the load's own deadline, ms. Default 1 000. */
  leaseMargin?: number;
  /** Largest envelope read or written, in UTF-16 code units. Default 1 048 576. Larger ones are not shared (written) or are a reported miss (read). */
  maxValueChars?: number;
  /**
   * How long the store keeps the record of a tag's invalidation, ms. Default
   * 86 400 000 (a day). A tagged value is stored in the shared tier for at
   * most this long (its `ttl + staleFor` is cut to it), so no tagged value
   * outlives the record that makes it stale.
   */
  tagRetention?: number;
}

/** What the shared tier reports to its cache. */
export interface SharedTierHooks {
  /** Another process changed `key`: `drop` (set or delete) forgets it, `expire` (a refill) keeps it as last known good, stale. */
  invalidate(key: string, how: 'drop' | 'expire'): void;
  /** Another process invalidated `tags`: every value here carrying one is stale. */
  invalidateTags(tags: readonly string[]): void;
  /**
   * The bus was lost (`up: false`) or is back (`true`), or messages on it were
   * lost (`disconnect`, `missed`: every value in memory is to be made stale).
   */
  bus(up: boolean, cause: BusCause, missed: number | undefined): void;
  /** A stored envelope could not be used: it is treated as a miss. */
  corrupt(key: string, reason: CorruptReason | 'invalid'): void;
  /** A call to the store failed or timed out (the breaker counts it). */
  error(operation: string, error: SharedTierError): void;
}

/** How one call to the store ended: never a rejection; a failure is already reported. */
export type Called<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: SharedTierError };

/** A store call in flight, with when it gives up. */
interface PendingCall {
  readonly deadline: number;
  readonly operation: Operation;
  /** Ends the call with a failure: the store's, or the sweep's timeout. Called once, by whoever took it out of `pending`. */
  readonly fail: (error: unknown) => void;
}

/** What one look at the shared tier found. */
export type Lookup<V> =
  | Extract<Resolution<V>, { kind: 'hit' }>
  | { readonly kind: 'stale'; readonly value: V; readonly servableMs: number; readonly loadMs: number; readonly tags: readonly string[] | undefined }
  | { readonly kind: 'none' }
  | { readonly kind: 'unavailable'; readonly error: SharedTierError };

const NEVER = new AbortController().signal;

/** The store's operations (a backend's methods), as the breaker and the error reports name them; checked at construction, so a half-made store fails there, not at its first miss. */
const BACKEND_METHODS = ['read', 'acquire', 'fill', 'fail', 'release', 'write', 'remove', 'markTag', 'tagAge', 'publish', 'subscribe'] as const;
type Operation = (typeof BACKEND_METHODS)[number];

/** One breaker context per operation, made once: the read path runs on every L1 miss. */
const CONTEXTS: Readonly<Record<Operation, GuardContext>> = Object.fromEntries(
  BACKEND_METHODS.map((operation) => [operation, Object.freeze({ key: operation, signal: NEVER, wait: false })]),
) as Record<Operation, GuardContext>;

const NONE = Object.freeze({ kind: 'none' }) satisfies Lookup<never>;
const UNAVAILABLE = (error: SharedTierError): Lookup<never> => ({ kind: 'unavailable', error });
const CALLED = <T>(value: T): Called<T> => ({ ok: true, value });
const NOT_CALLED = (error: SharedTierError): Called<never> => ({ ok: false, error });
/** The verdict on a value whose validator threw. */
const THREW = Object.freeze({ ok: false, reason: 'validator threw' }) satisfies Verdict<never>;

/** A shared value, decoded and accepted. */
interface Decoded<V> {
  readonly value: V;
  readonly staleFor: number;
  readonly loadMs: number;
  readonly tags: readonly string[] | undefined;
  /** With tags: its whole lifetime in the store, ms. */
  readonly lifeMs: number;
}

/** A value ready for the store: its envelope, and the lifetime to store it for. */
export interface Shareable {
  readonly text: string;
  readonly ttlMs: number;
}

/** Most tags one `invalidateTags` call takes: they travel in one bus message. */
export const MAX_TAGS_PER_INVALIDATION = 1_000;

/**
 * The shared tier's logic, apart from any client: the store's breaker and
 * time limit, the read path, the envelope, the invalidation bus, and the
 * leases ({@link ClusterFlight}, src/cache/cluster-flight.ts). It runs over a
 * {@link SharedBackend}, so the lab replays the very same code over simulated
 * cache nodes.
 *
 * The rule it exists for (Discord 2019, principle 4): a degraded or dead
 * shared cache is never a reason to hit the database harder. Every peer we
 * studied fails open: when the cache or its lock is unavailable, every process
 * loads from the database. Here every call to the store is bounded by its time
 * limit and its breaker, so a hung or dead store is a fast "unavailable", and
 * an unavailable store fails closed: no lease, so no load for a key this
 * process can serve ({@link ClusterFlight} says the rest). The origin then
 * sees at most one load per key per process, at the rate the cache's origin
 * budget allows, and never more than that.
 */
export class SharedTier {
  readonly namespace: string;
  readonly breaker: CircuitBreaker;
  private readonly store: SharedBackend;
  private readonly clock: Clock;
  private readonly timeout: number;
  readonly freshWithoutBus: number;
  private readonly maxValueChars: number;
  private readonly tagRetention: number;
  private readonly hooks: SharedTierHooks;
  /** This process's name on the bus, and the prefix of its lease tokens. */
  private readonly id: string;
  /** The leases: one load per key in flight across the cluster. */
  private readonly cluster: ClusterFlight;
  /** Heartbeats and numbered invalidations: whether what the other processes say reaches this one. */
  private readonly bus: InvalidationBus;
  /** Store calls in flight, for the time-limit sweep. */
  private readonly pending = new Set<PendingCall>();
  private sweeper: Timer | undefined;
  /** For {@link stats}: plain counts, bumped where each happens. */
  private reads = 0;
  private hits = 0;
  private errors = 0;
  private tagsHeard = 0;

  constructor(sharedOptions: SharedTierOptions, clock: Clock, hooks: SharedTierHooks) {
    if (sharedOptions === undefined) throw new ConfigError('shared must be an object with a `store`');
    const options = optionsObject('shared', sharedOptions);
    const store = options.store;
    if (!hasMethods(store, BACKEND_METHODS)) {
      throw new ConfigError(`shared.store must be a shared backend (a RedisStore, an InMemorySharedStore, … with ${BACKEND_METHODS.join(', ')})`);
    }
    this.store = store as SharedBackend;
    this.clock = clock;
    this.hooks = hooks;
    const namespace = or(options.namespace, 'default');
    // No ':' (it ends the namespace in the store's keys, so "a:b" + "c" and "a" + "b:c" could meet) and no '|' (it ends a bus message's header).
    if (typeof namespace !== 'string' || namespace.length === 0 || /[:|]/.test(namespace)) {
      throw new ConfigError(`shared.namespace must be a non-empty string without ":" or "|", got ${typeof namespace === 'string' ? JSON.stringify(namespace) : typeof namespace}`);
    }
    this.namespace = namespace;
    this.timeout = duration('shared.timeout', or(options.timeout, 250), { positive: true, timer: true });
    const heartbeatMs = duration('shared.heartbeat', or(options.heartbeat, 1_000), { positive: true, timer: true });
    const busTimeout = duration('shared.busTimeout', or(options.busTimeout, 3_000), { positive: true, timer: true });
    this.freshWithoutBus = duration('shared.freshWithoutBus', or(options.freshWithoutBus, 1_000));
    const leasePoll = duration('shared.leasePoll', or(options.leasePoll, 200), { positive: true, timer: true });
    const leaseMargin = duration('shared.leaseMargin', or(options.leaseMargin, 1_000));
    this.maxValueChars = integer('shared.maxValueChars', or(options.maxValueChars, 1_048_576), 16);
    this.tagRetention = duration('shared.tagRetention', or(options.tagRetention, 86_400_000), { positive: true });
    this.breaker =
      isInstance(options.breaker, CircuitBreaker)
        ? options.breaker
        : new CircuitBreaker({ consecutiveFailures: 3, openFor: 500, maxOpenFor: 3_000, probeTimeout: this.timeout * 2, clock, ...optionsObject('shared.breaker', options.breaker) });
    this.id = Math.floor(clock.random() * 2 ** 32).toString(36) + Math.floor(clock.random() * 2 ** 32).toString(36);
    this.cluster = new ClusterFlight(this.leaseStore(), clock, { id: this.id, leasePoll, leaseMargin });
    this.bus = new InvalidationBus(
      clock,
      {
        publish: (message) => this.call('publish', () => this.store.publish(this.namespace, message)),
        subscribe: (listener, interrupted) => this.call('subscribe', () => this.store.subscribe(this.namespace, listener, interrupted)),
      },
      {
        message: (kind, key) => {
          if (kind !== 't') this.cluster.wake(key);
          if (kind === 'f') this.hooks.invalidate(key, 'expire');
          else if (kind === 's' || kind === 'd') this.hooks.invalidate(key, 'drop');
          else if (kind === 't') {
            // The key field holds the tags' JSON: untrusted bytes, parsed as a stored tag list is.
            const tags = parseTags(key, MAX_TAGS_PER_INVALIDATION);
            if (tags === undefined) return;
            this.tagsHeard++;
            this.hooks.invalidateTags(tags);
          }
        },
        changed: (up, cause, missed) => this.hooks.bus(up, cause, missed),
      },
      { id: this.id, heartbeatMs, busTimeout },
    );
    this.bus.start();
  }

  /** True while this process hears its own heartbeats: invalidations from other processes reach it. */
  get busUp(): boolean {
    return this.bus.isUp;
  }

  /**
   * When this process last found that messages on the bus were lost, on the
   * clock: a shared value read by a call that started before it may predate
   * an invalidation that never came, and is stored stale.
   */
  get lastBusGapAt(): number {
    return this.bus.lastGapAt;
  }

  /** What this tier has done, and its bus now (a cache's `stats().shared`). */
  stats(): SharedTierStats {
    return { reads: this.reads, hits: this.hits, errors: this.errors, leaseWaits: this.cluster.leaseWaits, busUp: this.bus.isUp, busGaps: this.bus.gaps, tagInvalidationsHeard: this.tagsHeard };
  }

  /** Stops the heartbeat and leaves the bus. The store itself is the caller's to close. */
  async close(): Promise<void> {
    this.sweeper?.cancel();
    this.sweeper = undefined;
    this.cluster.wakeAll();
    await this.bus.close();
  }

  /** Resolves one key in flight: the store's value if fresh, else its lease ({@link ClusterFlight}). Never rejects. */
  resolve<V>(r: ResolveRequest<V>, first?: Lookup<V>): Promise<Resolution<V>> {
    return this.cluster.resolve(r, first);
  }

  /**
   * Shares a value written by `cache.set`: stored unconditionally, any lease
   * dropped, every other process told to forget its copy.
   * @throws SharedTierError when the store could not be reached, or the other
   *   processes could not be told (the store itself was changed then).
   */
  async write(key: string, value: unknown, freshMs: number, staleFor: number, tags: readonly string[] | undefined): Promise<void> {
    const shared = this.encode(key, value, freshMs, staleFor, 0, tags);
    // A value that cannot be shared (too large, not JSON) must not leave the
    // older one in the store for the other processes to serve: remove it.
    if (shared === undefined) return this.remove(key);
    const done = await this.call('write', () => this.store.write(this.keyOf(key), shared.text, shared.ttlMs));
    await this.tell('s', key, done);
  }

  /**
   * Invalidates `tags` cluster-wide: each is marked in the store (so a value
   * whose data is older is stale to every reader of the store from now on),
   * then `local` makes this process's values stale, then the other processes
   * are told (their values carrying a tag go stale as the message arrives).
   * Local marking comes after the store's: a refresh that read the store
   * before the mark is in flight when `local` runs, and stores stale.
   * @throws SharedTierError when a mark could not be made, or the other
   *   processes could not be told (this process's values are stale all the same).
   */
  async invalidateTags(tags: readonly string[], local: () => void): Promise<void> {
    const marked = await Promise.all(tags.map((tag) => this.call('markTag', () => this.store.markTag(this.tagKeyOf(tag), this.tagRetention))));
    local();
    const sent = await this.bus.send('t', JSON.stringify(tags));
    for (const done of marked) if (!done.ok) throw done.error;
    if (!sent.ok) throw sent.error;
  }

  /**
   * Removes a key cluster-wide: value, lease (a load in flight anywhere can no
   * longer fill), failure count; every process told to forget it.
   * @throws SharedTierError when the store could not be reached, or the other
   *   processes could not be told (the store itself was changed then).
   */
  async remove(key: string): Promise<void> {
    const done = await this.call('remove', () => this.store.remove(this.keyOf(key)));
    await this.tell('d', key, done);
  }

  /**
   * Tells the other processes of a set or delete, whether or not the store
   * took it (a call that timed out may still have been applied; and a
   * process that forgets its copy only reads the store again), then throws
   * the first failure: the caller must learn that the store or the other
   * processes may not have it. A message that cannot be sent still takes
   * its number: the others find the hole at this process's next message.
   */
  private async tell(kind: 's' | 'd', key: string, done: Called<void>): Promise<void> {
    const sent = await this.bus.send(kind, key);
    if (!done.ok) throw done.error;
    if (!sent.ok) throw sent.error;
  }

  // ---------------------------------------------------------------- internals

  /**
   * Reads the key's shared value: fresh (a hit), stale, absent or unusable
   * (`none`), or the store unavailable. Never rejects. A hit is the common
   * miss of a cluster; the cache calls this first, before it arms anything a
   * load would need.
   */
  lookup<V>(key: string, accept: (value: unknown) => Verdict<V> | Promise<Verdict<V>>): Promise<Lookup<V>> {
    this.reads++;
    const sentAt = this.clock.now();
    // Chained, not awaited: this is the L2 hit path, and each async layer costs it a promise and a tick.
    return this.ask('read', () => this.store.read(this.keyOf(key)), (read) => this.found(key, accept, read, sentAt), UNAVAILABLE);
  }

  /** What a read brought: none, or the decoded value judged by its remaining lifetime. */
  private found<V>(key: string, accept: (value: unknown) => Verdict<V> | Promise<Verdict<V>>, read: SharedRead | undefined, sentAt: number): Lookup<V> | Promise<Lookup<V>> {
    if (read === undefined) return NONE;
    const { ttlMs } = read;
    const decoded = this.decode(key, accept, read.value);
    // An estimated lifetime's error widens the tag check's allowance (towards stale), as the time between its two reads does.
    const slack = read.ttlErrorMs ?? 0;
    return decoded instanceof Promise ? decoded.then((d) => this.judge(d, ttlMs, sentAt, slack)) : this.judge(decoded, ttlMs, sentAt, slack);
  }

  /**
   * A decoded shared value is a hit while fresh, else stale; `undefined`
   * (unusable) is none. A tagged value is fresh only if none of its tags was
   * invalidated after its data was read from the origin (one more look at
   * the store per tag; an untagged value costs nothing more).
   */
  private judge<V>(found: Decoded<V> | undefined, ttlMs: number, sentAt: number, ttlErrorMs: number): Lookup<V> | Promise<Lookup<V>> {
    if (found === undefined) return NONE;
    const freshMs = ttlMs - found.staleFor;
    if (freshMs <= 0) return stale(found, ttlMs);
    if (found.tags === undefined) return this.hit(found, freshMs, ttlMs);
    // How long ago the value's data left the origin, on the store's clock: its age in the store, plus the load.
    const dataAge = Math.max(0, found.lifeMs - ttlMs) + found.loadMs;
    return this.invalidatedSince(found.tags, dataAge + ttlErrorMs, sentAt).then((invalidated) => (invalidated ? stale(found, ttlMs) : this.hit(found, freshMs, ttlMs)));
  }

  private hit<V>(found: Decoded<V>, freshMs: number, ttlMs: number): Lookup<V> {
    this.hits++;
    return { kind: 'hit', value: found.value, freshMs, servableMs: ttlMs, loadMs: found.loadMs, tags: found.tags };
  }

  /**
   * Whether any of `tags` was invalidated after data `dataAge` ms old (as
   * the value's read saw it) was read. The value's age and each tag's are
   * read by two calls, so the comparison allows for the time between them
   * (at most from this read's start until now), a millisecond of rounding,
   * and the error of an estimated lifetime (added to `dataAge` by the
   * caller), always towards "invalidated": a tag the store cannot be asked
   * about counts as invalidated too. Wrong that way costs one refresh;
   * wrong the other way would serve an invalidated value as fresh.
   */
  private async invalidatedSince(tags: readonly string[], dataAge: number, sentAt: number): Promise<boolean> {
    const ages = await Promise.all(tags.map((tag) => this.call('tagAge', () => this.store.tagAge(this.tagKeyOf(tag)))));
    const slack = this.clock.now() - sentAt + 1;
    return ages.some((age) => !age.ok || (age.value !== undefined && age.value <= dataAge + slack));
  }

  /**
   * A stored string made into a value, or undefined (reported) when it cannot
   * be used. Synchronous unless the validator is: no validator, or a
   * synchronous one, costs the L2 hit no promise.
   */
  private decode<V>(key: string, accept: (value: unknown) => Verdict<V> | Promise<Verdict<V>>, text: string): Decoded<V> | undefined | Promise<Decoded<V> | undefined> {
    const decoded = decodeEnvelope(text, this.maxValueChars);
    if (!decoded.ok) {
      this.hooks.corrupt(key, decoded.reason);
      return undefined;
    }
    const { value, staleFor, loadMs, tags, lifeMs } = decoded.envelope;
    if (value === undefined) return { value: value as V, staleFor, loadMs, tags, lifeMs };
    let verdict: Verdict<V> | Promise<Verdict<V>>;
    try {
      verdict = accept(value);
    } catch {
      verdict = THREW;
    }
    const judged = (v: Verdict<V>): Decoded<V> | undefined => {
      if (v.ok) return { value: v.value, staleFor, loadMs, tags, lifeMs };
      this.hooks.corrupt(key, 'invalid');
      return undefined;
    };
    return verdict instanceof Promise ? verdict.then(judged, () => judged(THREW)) : judged(verdict);
  }

  /**
   * A value as the store keeps it, or undefined (reported) when it cannot be
   * shared. A tagged value lives at most `tagRetention`: past it, the record
   * of a tag's invalidation may be gone.
   */
  private encode(key: string, value: unknown, freshMs: number, staleFor: number, loadMs: number, tags: readonly string[] | undefined): Shareable | undefined {
    const ttlMs = tags === undefined ? freshMs + staleFor : Math.min(freshMs + staleFor, this.tagRetention);
    let text: string;
    try {
      text = encodeEnvelope(value, staleFor, loadMs, tags === undefined ? undefined : { tags, lifeMs: ttlMs });
    } catch (error) {
      this.hooks.error('encode', new SharedTierError(`encode of "${key}"`, error));
      return undefined;
    }
    if (text.length > this.maxValueChars) {
      this.hooks.corrupt(key, 'oversize');
      return undefined;
    }
    return { text, ttlMs };
  }

  /** The store's key: the namespace keeps caches that share a store apart (their keys and their bus). */
  private keyOf(key: string): string {
    return `${this.namespace}:${key}`;
  }

  /** A tag's mark in the store: `|` sets it apart from every key (`namespace:key`), as no namespace holds one. */
  private tagKeyOf(tag: string): string {
    return `${this.namespace}|${tag}`;
  }

  /** The store as the leases see it: this namespace, every call through the breaker and the time limit. */
  private leaseStore(): LeaseStore {
    return {
      lookup: (key, accept) => this.lookup(key, accept),
      acquire: (key, token, ttlMs) => this.call('acquire', () => this.store.acquire(this.keyOf(key), token, ttlMs)),
      fill: (key, token, text, ttlMs) => this.call('fill', () => this.store.fill(this.keyOf(key), token, text, ttlMs)),
      fail: (key, token, failures, backoffMs) => this.call('fail', () => this.store.fail(this.keyOf(key), token, failures, backoffMs)),
      release: (key, token) => this.call('release', () => this.store.release(this.keyOf(key), token)),
      encode: (key, value, freshMs, staleFor, loadMs, tags) => this.encode(key, value, freshMs, staleFor, loadMs, tags),
      announce: async (kind, key) => void (await this.bus.send(kind, key)),
      breaker: this.breaker,
    };
  }

  /**
   * One call to the store, through its breaker and time limit. Never rejects:
   * a failure comes back as a `SharedTierError` (already reported).
   */
  private call<T>(operation: Operation, fn: () => Promise<T>): Promise<Called<T>> {
    return this.ask(operation, fn, CALLED, NOT_CALLED);
  }

  /**
   * One call to the store, through its breaker and time limit, turned into
   * `answered(value)` or `failed(error)` (the error already reported). While
   * the breaker is closed (nearly always) the call is one promise: the
   * breaker admits it at once and is told the outcome where the time limit
   * settles, and the answer is mapped in the same step, where a nested
   * breaker, time limit and result would cost the L2 hit three promises and
   * a closure each. Otherwise the breaker decides, as for any task.
   */
  private ask<T, R>(operation: Operation, fn: () => Promise<T>, answered: (value: T) => R | PromiseLike<R>, failed: (error: SharedTierError) => R): Promise<R> {
    const context = CONTEXTS[operation];
    const token = this.breaker.enter(context);
    if (token === NOT_NOW) {
      return this.breaker.run(() => this.timed(operation, fn), context).then(answered, (error: unknown) => failed(this.reported(operation, error)));
    }
    return new Promise<R>((resolve, reject) => {
      // A mapping that throws (it should not) rejects the call rather than leave it unsettled.
      const settle = (ok: boolean, outcome: unknown): void => {
        this.breaker.leave(token, context, ok, ok ? undefined : outcome);
        try {
          resolve(ok ? answered(outcome as T) : failed(this.reported(operation, outcome)));
        } catch (thrown) {
          reject(thrown);
        }
      };
      this.bounded(operation, fn, settle);
    });
  }

  /** A failed call, as a `SharedTierError`, counted and told to the hooks. */
  private reported(operation: Operation, error: unknown): SharedTierError {
    const e = error instanceof SharedTierError ? error : new SharedTierError(operation, error);
    this.errors++;
    this.hooks.error(operation, e);
    return e;
  }

  /**
   * Runs `fn` with the store's time limit (for a call the breaker runs
   * itself: open or half-open). See {@link track}.
   */
  private timed<T>(operation: Operation, fn: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => this.bounded(operation, fn, (ok, outcome) => (ok ? resolve(outcome as T) : reject(outcome))));
  }

  /**
   * Starts `fn` under the store's time limit and calls `settle` once: with
   * its answer, its failure, or the sweep's timeout, whichever comes first.
   */
  private bounded(operation: Operation, fn: () => Promise<unknown>, settle: (ok: boolean, outcome: unknown) => void): void {
    const call: PendingCall = { deadline: this.clock.now() + this.timeout, operation, fail: (error) => settle(false, error) };
    this.track(call);
    startTask(fn, NEVER).then(
      (value) => {
        if (this.pending.delete(call)) settle(true, value); // else the sweep ended it
      },
      (error: unknown) => {
        if (this.pending.delete(call)) settle(false, error);
      },
    );
  }

  /**
   * Bounds a call with the store's time limit. One sweep timer serves every
   * call in flight (armed while any is pending, every `timeout / 4`) rather
   * than a timer per call: the read path runs this on every L1 miss, and
   * arming and clearing a timer per call was a visible share of an L2 hit. A
   * call thus gives up between `timeout` and `1.25 × timeout` after it started.
   */
  private track(call: PendingCall): void {
    this.pending.add(call);
    if (this.sweeper === undefined) this.sweeper = this.clock.setTimer(this.sweep, this.timeout / 4);
  }

  private readonly sweep = (): void => {
    this.sweeper = undefined;
    const now = this.clock.now();
    for (const call of this.pending) {
      if (now < call.deadline) continue;
      this.pending.delete(call);
      call.fail(new SharedTierError(call.operation, new Error(`no answer within ${this.timeout} ms`)));
    }
    if (this.pending.size > 0) this.sweeper = this.clock.setTimer(this.sweep, this.timeout / 4);
  };
}

/** A decoded shared value past its freshness, or overtaken by a tag's invalidation: served while it is refreshed. */
function stale<V>(found: Decoded<V>, ttlMs: number): Lookup<V> {
  return { kind: 'stale', value: found.value, servableMs: ttlMs, loadMs: found.loadMs, tags: found.tags };
}
