import { duration, hasMethods, integer, isInstance, optionsObject, or } from '../config.js';
import { ConfigError, type DamperError, LeaseBackoffError, SharedTierError } from '../errors.js';
import { CircuitBreaker, type CircuitBreakerOptions } from '../guard/breaker.js';
import { type GuardContext, startTask } from '../guard/guard.js';
import { type LeaseGrant, type SharedBackend } from '../stores/backend.js';
import { type CorruptReason, decodeEnvelope, encodeEnvelope } from '../stores/envelope.js';
import { type Clock, preciseNow, type Timer } from '../time/clock.js';
import { type HardTimeout } from './hard-timeout.js';
import { LeaseWaiters } from './lease.js';
import { refusedByBudget } from './refusal.js';
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
}

/** What the shared tier reports to its cache. */
export interface SharedTierHooks {
  /** Another process changed `key`: `drop` (set or delete) forgets it, `expire` (a refill) keeps it as last known good, stale. */
  invalidate(key: string, how: 'drop' | 'expire'): void;
  /** The bus was lost (`false`) or is back (`true`). */
  bus(up: boolean): void;
  /** A stored envelope could not be used: it is treated as a miss. */
  corrupt(key: string, reason: CorruptReason | 'invalid'): void;
  /** A call to the store failed or timed out (the breaker counts it). */
  error(operation: string, error: SharedTierError): void;
}

/** What one process asks of the shared tier for one key in flight. */
export interface ResolveRequest<V> {
  readonly key: string;
  /** The load's hard timeout: read its `signal` only to wait or load (it is made when first read), `expired` otherwise. */
  readonly hard: HardTimeout;
  /** This process holds a value it may serve (within its stale window). */
  readonly servable: boolean;
  /** An early (XFetch) refresh: a fresh shared value does not end it, a lease attempt is made. */
  readonly early: boolean;
  /** Consecutive failures this process has seen for the key. */
  readonly failures: number;
  /** When the load must end, on the clock: bounds the lease and every wait. */
  readonly deadline: number;
  readonly staleFor: number;
  /** Freshness to give a value loaded now, ms (jittered by the cache). */
  freshFor(value: V): number;
  /** Delay before the next load after `failures` consecutive failures. */
  backoff(failures: number): number;
  /** Validates a value read from the store (untrusted bytes). */
  accept(value: unknown): Verdict<V> | Promise<Verdict<V>>;
  /** Loads from the origin, through the cache's guard, validated. Rejects on failure. */
  load(): Promise<V>;
}

/** How a key in flight was resolved. */
export type Resolution<V> =
  /** Fresh in the shared tier; no origin load. Windows are durations from now. */
  | { readonly kind: 'hit'; readonly value: V; readonly freshMs: number; readonly servableMs: number; readonly loadMs: number }
  /** Loaded from the origin by this process. `keep` is false when a newer write or delete overtook the load. */
  | { readonly kind: 'loaded'; readonly value: V; readonly freshMs: number; readonly loadMs: number; readonly keep: boolean }
  /** Another process holds the lease; here is the shared tier's stale value to serve meanwhile. */
  | { readonly kind: 'stale'; readonly value: V; readonly servableMs: number; readonly loadMs: number; readonly retryInMs: number }
  /** Nothing to do now: serve this process's stale value and look again in `retryInMs` (lease held elsewhere, or the store unavailable). */
  | { readonly kind: 'deferred'; readonly error: DamperError; readonly retryInMs: number }
  /** The load failed, here or in the cluster; the key backs off for `retryInMs`. */
  | { readonly kind: 'failed'; readonly error: unknown; readonly failures: number; readonly retryInMs: number };

/** A store call in flight, with when it gives up. */
interface PendingCall {
  readonly deadline: number;
  readonly operation: string;
  readonly reject: (error: SharedTierError) => void;
}

/** What one look at the shared tier found. */
export type Lookup<V> =
  | Extract<Resolution<V>, { kind: 'hit' }>
  | { readonly kind: 'stale'; readonly value: V; readonly servableMs: number; readonly loadMs: number }
  | { readonly kind: 'none' }
  | { readonly kind: 'unavailable'; readonly error: SharedTierError };

const NEVER = new AbortController().signal;

/** The store's operations (a backend's methods), as the breaker and the error reports name them. */
const BACKEND_METHODS = ['read', 'acquire', 'fill', 'fail', 'release', 'write', 'remove', 'publish', 'subscribe'] as const;
type Operation = (typeof BACKEND_METHODS)[number];

/** One breaker context per operation, made once: the read path runs on every L1 miss. */
const CONTEXTS: Readonly<Record<Operation, GuardContext>> = Object.fromEntries(
  BACKEND_METHODS.map((operation) => [operation, Object.freeze({ key: operation, signal: NEVER, wait: false })]),
) as Record<Operation, GuardContext>;

const NONE = Object.freeze({ kind: 'none' }) satisfies Lookup<never>;
/** The verdict on a value whose validator threw. */
const THREW = Object.freeze({ ok: false, reason: 'validator threw' }) satisfies Verdict<never>;

/** A shared value, decoded and accepted. */
interface Decoded<V> {
  readonly value: V;
  readonly staleFor: number;
  readonly loadMs: number;
}
/** What a {@link SharedBackend} must answer; checked at construction, so a half-made store fails there, not at its first miss. */

/**
 * The shared tier's logic, apart from any client: leases, the store's breaker
 * and timeouts, the invalidation bus and the fail-closed rules. It runs over a
 * {@link SharedBackend}, so the lab replays the very same code over simulated
 * cache nodes.
 *
 * The rule it exists for (Discord 2019, principle 4): a degraded or dead
 * shared cache is never a reason to hit the database harder. Every peer we
 * studied fails open: when the cache or its lock is unavailable, every process
 * loads from the database. Here:
 * - one process in the cluster holds a key's lease and loads; the others wait
 *   for its fill (woken by the bus) or serve stale (memcache's leases);
 * - a failed load leaves a failure marker in place of the lease for the
 *   backoff delay, so a bad key is loaded once per backoff step cluster-wide;
 * - when the store is unavailable, a process with a value serves it and
 *   defers the refresh (fail closed: no lease, no load); only a key with
 *   nothing to serve is loaded, coalesced in this process, within the cache's
 *   origin budget. The origin then sees at most one load per key per process,
 *   at the rate the budget allows, and never more than that.
 */
export class SharedTier {
  readonly namespace: string;
  readonly breaker: CircuitBreaker;
  private readonly store: SharedBackend;
  private readonly clock: Clock;
  private readonly timeout: number;
  private readonly heartbeatMs: number;
  private readonly busTimeout: number;
  readonly freshWithoutBus: number;
  private readonly leasePoll: number;
  private readonly leaseMargin: number;
  private readonly maxValueChars: number;
  private readonly hooks: SharedTierHooks;
  private readonly waiters = new LeaseWaiters();
  /** This process's name on the bus, and the prefix of its lease tokens. */
  private readonly id: string;
  private tokens = 0;
  private up = false;
  private lastHeard = Number.NEGATIVE_INFINITY;
  private unsubscribe: (() => Promise<void>) | undefined;
  private subscribing = false;
  private ticker: Timer | undefined;
  private closed = false;
  /** Store calls in flight, for the time-limit sweep. */
  private readonly pending = new Set<PendingCall>();
  private sweeper: Timer | undefined;
  /** For {@link stats}: plain counts, bumped where each happens. */
  private reads = 0;
  private hits = 0;
  private errors = 0;
  private leaseWaits = 0;

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
    this.heartbeatMs = duration('shared.heartbeat', or(options.heartbeat, 1_000), { positive: true, timer: true });
    this.busTimeout = duration('shared.busTimeout', or(options.busTimeout, 3_000), { positive: true, timer: true });
    this.freshWithoutBus = duration('shared.freshWithoutBus', or(options.freshWithoutBus, 1_000));
    this.leasePoll = duration('shared.leasePoll', or(options.leasePoll, 200), { positive: true, timer: true });
    this.leaseMargin = duration('shared.leaseMargin', or(options.leaseMargin, 1_000));
    this.maxValueChars = integer('shared.maxValueChars', or(options.maxValueChars, 1_048_576), 16);
    this.breaker =
      isInstance(options.breaker, CircuitBreaker)
        ? options.breaker
        : new CircuitBreaker({ consecutiveFailures: 3, openFor: 500, maxOpenFor: 3_000, probeTimeout: this.timeout * 2, clock, ...optionsObject('shared.breaker', options.breaker) });
    this.id = Math.floor(clock.random() * 2 ** 32).toString(36) + Math.floor(clock.random() * 2 ** 32).toString(36);
    this.tick();
  }

  /** True while this process hears its own heartbeats: invalidations from other processes reach it. */
  get busUp(): boolean {
    return this.up;
  }

  /** What this tier has done, and its bus now (a cache's `stats().shared`). */
  stats(): SharedTierStats {
    return { reads: this.reads, hits: this.hits, errors: this.errors, leaseWaits: this.leaseWaits, busUp: this.up };
  }

  /** Stops the heartbeat and leaves the bus. The store itself is the caller's to close. */
  async close(): Promise<void> {
    this.closed = true;
    this.ticker?.cancel();
    this.sweeper?.cancel();
    this.sweeper = undefined;
    this.waiters.wakeAll();
    const unsubscribe = this.unsubscribe;
    this.unsubscribe = undefined;
    if (unsubscribe !== undefined) await unsubscribe().catch(() => {});
  }

  /**
   * Resolves one key in flight: the store's value if fresh, else the lease
   * protocol. Never rejects: every outcome is data.
   */
  async resolve<V>(r: ResolveRequest<V>, first?: Lookup<V>): Promise<Resolution<V>> {
    let poll = Math.min(25, this.leasePoll);
    let seen = first;
    for (;;) {
      const timedOut = r.hard.expired;
      if (timedOut !== undefined) {
        // The load's hard timeout passed while waiting on another process's lease: for a
        // caller with nothing to serve that is a timed-out load, as without a shared tier.
        if (r.servable) return this.deferred(timedOut);
        return { kind: 'failed', error: timedOut, failures: r.failures + 1, retryInMs: r.backoff(r.failures + 1) };
      }
      seen ??= await this.lookup(r.key, r.accept);
      if (seen.kind === 'unavailable') return this.unavailable(r, seen.error);
      if (seen.kind === 'hit' && !r.early) return seen;
      const token = this.token();
      const grant = await this.call('acquire', () => this.store.acquire(this.keyOf(r.key), token, this.leaseTtl(r)));
      if (!grant.ok) return seen.kind === 'hit' ? seen : this.unavailable(r, grant.error);
      if (grant.value.granted) {
        if (seen.kind === 'hit') return this.holdLease(r, token, grant.value.failures); // an early refresh
        // Read and lease are two steps: a holder may have filled and dropped its lease
        // between them, so look once more before loading (else two loads for one miss).
        const again = await this.lookup(r.key, r.accept);
        if (again.kind === 'hit') {
          await this.call('release', () => this.store.release(this.keyOf(r.key), token));
          return again;
        }
        return this.holdLease(r, token, grant.value.failures);
      }
      if (seen.kind === 'hit') return seen; // an early refresh someone else is already doing
      const held: Extract<LeaseGrant, { granted: false }> = grant.value;
      const retryInMs = Math.min(held.ttlMs, this.leasePoll);
      // Someone else loads (or the key backs off cluster-wide): serve stale if there is any.
      if (seen.kind === 'stale') return { ...seen, retryInMs };
      if (r.servable) return { kind: 'deferred', error: new LeaseBackoffError(r.key, held.ttlMs, held.failures), retryInMs };
      if (held.holder === 'failed') return { kind: 'failed', error: new LeaseBackoffError(r.key, held.ttlMs, held.failures), failures: held.failures, retryInMs: held.ttlMs };
      // Nothing to serve: wait for the holder's fill (the bus wakes us) or a bounded poll.
      this.leaseWaits++;
      await this.waiters.wait(r.key, Math.min(poll, held.ttlMs, Math.max(0, r.deadline - this.clock.now())), r.hard.signal, this.clock);
      poll = Math.min(poll * 2, this.leasePoll);
      seen = undefined;
    }
  }

  /**
   * Shares a value written by `cache.set`: stored unconditionally, any lease
   * dropped, every other process told to forget its copy.
   * @throws SharedTierError when the store could not be reached, or the other
   *   processes could not be told (the store itself was changed then).
   */
  async write(key: string, value: unknown, freshMs: number, staleFor: number): Promise<void> {
    const text = this.encode(key, value, staleFor, 0);
    // A value that cannot be shared (too large, not JSON) must not leave the
    // older one in the store for the other processes to serve: remove it.
    if (text === undefined) return this.remove(key);
    const done = await this.call('write', () => this.store.write(this.keyOf(key), text, freshMs + staleFor));
    if (!done.ok) throw done.error;
    await this.announce('s', key, true);
  }

  /**
   * Removes a key cluster-wide: value, lease (a load in flight anywhere can no
   * longer fill), failure count; every process told to forget it.
   * @throws SharedTierError when the store could not be reached, or the other
   *   processes could not be told (the store itself was changed then).
   */
  async remove(key: string): Promise<void> {
    const done = await this.call('remove', () => this.store.remove(this.keyOf(key)));
    if (!done.ok) throw done.error;
    await this.announce('d', key, true);
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
    // Chained, not awaited: this is the L2 hit path, and each async layer costs it a promise and a tick.
    return this.call('read', () => this.store.read(this.keyOf(key))).then((read) => {
      if (!read.ok) return { kind: 'unavailable', error: read.error };
      if (read.value === undefined) return NONE;
      const { ttlMs } = read.value;
      const found = this.decode(key, accept, read.value.value);
      return found instanceof Promise ? found.then((f) => this.judge(f, ttlMs)) : this.judge(found, ttlMs);
    });
  }

  /** A decoded shared value is a hit while fresh, else stale; `undefined` (unusable) is none. */
  private judge<V>(found: Decoded<V> | undefined, ttlMs: number): Lookup<V> {
    if (found === undefined) return NONE;
    const freshMs = ttlMs - found.staleFor;
    if (freshMs > 0) {
      this.hits++;
      return { kind: 'hit', value: found.value, freshMs, servableMs: ttlMs, loadMs: found.loadMs };
    }
    return { kind: 'stale', value: found.value, servableMs: ttlMs, loadMs: found.loadMs };
  }

  /** This process holds the lease: load, then fill (or leave a failure marker). */
  private async holdLease<V>(r: ResolveRequest<V>, token: string, clusterFailures: number): Promise<Resolution<V>> {
    const started = preciseNow(this.clock);
    let value: V;
    try {
      value = await r.load();
    } catch (error) {
      if (refusedByBudget(error)) {
        // Not the key's fault (refusal.ts): no failure marker; the lease goes back for another process to take.
        await this.call('release', () => this.store.release(this.keyOf(r.key), token));
        return { kind: 'failed', error, failures: r.failures + 1, retryInMs: r.backoff(r.failures + 1) };
      }
      const failures = Math.max(r.failures, clusterFailures) + 1;
      const retryInMs = r.backoff(failures);
      const marked = await this.call('fail', () => this.store.fail(this.keyOf(r.key), token, failures, retryInMs));
      if (marked.ok && marked.value) await this.announce('x', r.key);
      return { kind: 'failed', error, failures, retryInMs };
    }
    const loadMs = preciseNow(this.clock) - started;
    const freshMs = r.freshFor(value);
    const text = this.encode(r.key, value, r.staleFor, loadMs);
    if (text === undefined) {
      // Cannot be shared (too large, or not JSON): free the lease so waiters do not sit out its ttl.
      await this.call('release', () => this.store.release(this.keyOf(r.key), token));
      return { kind: 'loaded', value, freshMs, loadMs, keep: true };
    }
    const filled = await this.call('fill', () => this.store.fill(this.keyOf(r.key), token, text, freshMs + r.staleFor));
    if (filled.ok && filled.value) await this.announce('f', r.key);
    // Refused: a write or delete came after the lease was granted; this value may be older than it.
    return { kind: 'loaded', value, freshMs, loadMs, keep: !filled.ok || filled.value };
  }

  /**
   * The store could not be asked. Fail closed: a process with a value serves
   * it and looks again later; only a key with nothing to serve is loaded here
   * (coalesced by the cache's flight, within its origin budget).
   */
  private async unavailable<V>(r: ResolveRequest<V>, error: DamperError): Promise<Resolution<V>> {
    if (r.servable) return this.deferred(error);
    const started = preciseNow(this.clock);
    try {
      const value = await r.load();
      return { kind: 'loaded', value, freshMs: r.freshFor(value), loadMs: preciseNow(this.clock) - started, keep: true };
    } catch (loadError) {
      const failures = r.failures + 1;
      return { kind: 'failed', error: loadError, failures, retryInMs: r.backoff(failures) };
    }
  }

  private deferred(error: unknown): Resolution<never> {
    const e = error instanceof SharedTierError || error instanceof LeaseBackoffError ? error : new SharedTierError('lookup', error);
    // Look again when the breaker may admit a probe, spread so processes do not come back together.
    const retryAfter = this.breaker.state === 'open' ? this.breaker.openFor : this.leasePoll;
    return { kind: 'deferred', error: e, retryInMs: retryAfter * (0.5 + this.clock.random()) };
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
    const { value, staleFor, loadMs } = decoded.envelope;
    if (value === undefined) return { value: value as V, staleFor, loadMs };
    let verdict: Verdict<V> | Promise<Verdict<V>>;
    try {
      verdict = accept(value);
    } catch {
      verdict = THREW;
    }
    const judged = (v: Verdict<V>): Decoded<V> | undefined => {
      if (v.ok) return { value: v.value, staleFor, loadMs };
      this.hooks.corrupt(key, 'invalid');
      return undefined;
    };
    return verdict instanceof Promise ? verdict.then(judged, () => judged(THREW)) : judged(verdict);
  }

  private encode(key: string, value: unknown, staleFor: number, loadMs: number): string | undefined {
    let text: string;
    try {
      text = encodeEnvelope(value, staleFor, loadMs);
    } catch (error) {
      this.hooks.error('encode', new SharedTierError(`encode of "${key}"`, error));
      return undefined;
    }
    if (text.length > this.maxValueChars) {
      this.hooks.corrupt(key, 'oversize');
      return undefined;
    }
    return text;
  }

  /** The store's key: the namespace keeps caches that share a store apart (their keys and their bus). */
  private keyOf(key: string): string {
    return `${this.namespace}:${key}`;
  }

  private leaseTtl(r: ResolveRequest<unknown>): number {
    return Math.max(1, r.deadline - this.clock.now()) + this.leaseMargin;
  }

  private token(): string {
    return `${this.id}.${++this.tokens}`;
  }

  /**
   * One call to the store, through its breaker and time limit. Never rejects:
   * a failure comes back as a `SharedTierError` (already reported).
   */
  private call<T>(operation: Operation, fn: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: SharedTierError }> {
    return this.breaker.run(() => this.timed(operation, fn), CONTEXTS[operation]).then(
      (value) => ({ ok: true, value }),
      (error: unknown) => {
        const e = error instanceof SharedTierError ? error : new SharedTierError(operation, error);
        this.errors++;
        this.hooks.error(operation, e);
        return { ok: false, error: e };
      },
    );
  }

  /**
   * Runs `fn` with the store's time limit. One sweep timer serves every call
   * in flight (armed while any is pending, every `timeout / 4`) rather than a
   * timer per call: the read path runs this on every L1 miss, and arming and
   * clearing a timer per call was a visible share of an L2 hit. A call thus
   * gives up between `timeout` and `1.25 × timeout` after it started.
   */
  private timed<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const call: PendingCall = { deadline: this.clock.now() + this.timeout, operation, reject };
      this.pending.add(call);
      if (this.sweeper === undefined) this.sweeper = this.clock.setTimer(this.sweep, this.timeout / 4);
      startTask(fn, NEVER).then(
        (v) => {
          this.pending.delete(call);
          resolve(v);
        },
        (e: unknown) => {
          this.pending.delete(call);
          reject(e);
        },
      );
    });
  }

  private readonly sweep = (): void => {
    this.sweeper = undefined;
    const now = this.clock.now();
    for (const call of this.pending) {
      if (now < call.deadline) continue;
      this.pending.delete(call);
      call.reject(new SharedTierError(call.operation, new Error(`no answer within ${this.timeout} ms`)));
    }
    if (this.pending.size > 0) this.sweeper = this.clock.setTimer(this.sweep, this.timeout / 4);
  };

  // ---------------------------------------------------------------- the bus

  /**
   * Publishes `kind` for `key`. Best effort for fills, failures and
   * heartbeats (a lost message is covered by the lease poll and
   * `freshWithoutBus`); `required` for `set` and `delete`, whose callers
   * must learn that the other processes were not told.
   */
  private async announce(kind: 'f' | 's' | 'd' | 'x' | 'h', key: string, required = false): Promise<void> {
    const sent = await this.call('publish', () => this.store.publish(this.namespace, `${kind}${this.id}|${key}`));
    if (!sent.ok && required) throw sent.error;
  }

  private onMessage(message: string): void {
    const bar = message.indexOf('|');
    if (bar < 1) return;
    const kind = message[0];
    const origin = message.slice(1, bar);
    if (kind === 'h') {
      if (origin === this.id) this.heard();
      return;
    }
    if (origin === this.id) return;
    const key = message.slice(bar + 1);
    if (key.length === 0) return;
    this.waiters.wake(key);
    if (kind === 'f') this.hooks.invalidate(key, 'expire');
    else if (kind === 's' || kind === 'd') this.hooks.invalidate(key, 'drop');
  }

  private heard(): void {
    this.lastHeard = this.clock.now();
    if (!this.up) {
      this.up = true;
      this.hooks.bus(true);
    }
  }

  /** Heartbeat: subscribe if not yet, publish, and judge the bus by when our own last heartbeat came back. */
  private tick(): void {
    if (this.closed) return;
    this.ticker = this.clock.setTimer(() => this.tick(), this.heartbeatMs);
    if (this.up && this.clock.now() - this.lastHeard > this.busTimeout) {
      this.up = false;
      this.hooks.bus(false);
    }
    if (this.unsubscribe === undefined) {
      if (this.subscribing) return;
      this.subscribing = true;
      void this.subscribe();
      return;
    }
    void this.announce('h', '');
  }

  private async subscribe(): Promise<void> {
    const done = await this.call('subscribe', () => this.store.subscribe(this.namespace, (m) => this.onMessage(m)));
    this.subscribing = false;
    if (!done.ok) return;
    if (this.closed) {
      await done.value().catch(() => {});
      return;
    }
    this.unsubscribe = done.value;
    await this.announce('h', '');
  }
}

