import assert from 'node:assert/strict';
import { type DamperError, LeaseBackoffError, SharedTierError } from '../errors.js';
import { type CircuitBreaker } from '../guard/breaker.js';
import { type LeaseGrant } from '../stores/backend.js';
import { type Clock, preciseNow } from '../time/clock.js';
import { type HardTimeout } from './hard-timeout.js';
import { refusedByBudget } from './refusal.js';
import { type Called, type Lookup, type Shareable } from './shared-tier.js';
import { type Verdict } from './validate.js';

/** What one process asks of the cluster for one key in flight. */
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
  /** The tags of the value `load` brought (the call's, or the loader's own), read once it resolved. */
  tags(): readonly string[] | undefined;
}

/** How a key in flight was resolved. */
export type Resolution<V> =
  /** Fresh in the shared tier; no origin load. Windows are durations from now. */
  | { readonly kind: 'hit'; readonly value: V; readonly freshMs: number; readonly servableMs: number; readonly loadMs: number; readonly tags: readonly string[] | undefined }
  /** Loaded from the origin by this process. `keep` is false when a newer write or delete overtook the load. */
  | { readonly kind: 'loaded'; readonly value: V; readonly freshMs: number; readonly loadMs: number; readonly keep: boolean }
  /** Another process holds the lease; here is the shared tier's stale value to serve meanwhile. */
  | { readonly kind: 'stale'; readonly value: V; readonly servableMs: number; readonly loadMs: number; readonly tags: readonly string[] | undefined; readonly retryInMs: number }
  /** Nothing to do now: serve this process's stale value and look again in `retryInMs` (lease held elsewhere, or the store unavailable). */
  | { readonly kind: 'deferred'; readonly error: DamperError; readonly retryInMs: number }
  /** The load failed, here or in the cluster; the key backs off for `retryInMs`. */
  | { readonly kind: 'failed'; readonly error: unknown; readonly failures: number; readonly retryInMs: number };

/**
 * The shared tier as its leases use it (`SharedTier` makes one): the store's
 * lease operations on this cache's namespace, each through the store's breaker
 * and time limit, none of them rejecting (a failure is `{ ok: false }`, already
 * reported); the tier's read path, envelope and bus.
 */
export interface LeaseStore {
  lookup<V>(key: string, accept: (value: unknown) => Verdict<V> | Promise<Verdict<V>>): Promise<Lookup<V>>;
  acquire(key: string, token: string, ttlMs: number): Promise<Called<LeaseGrant>>;
  fill(key: string, token: string, text: string, ttlMs: number): Promise<Called<boolean>>;
  fail(key: string, token: string, failures: number, backoffMs: number): Promise<Called<boolean>>;
  release(key: string, token: string): Promise<Called<void>>;
  /** The envelope of a loaded value and its lifetime in the store, or undefined (reported) when it cannot be shared. */
  encode(key: string, value: unknown, freshMs: number, staleFor: number, loadMs: number, tags: readonly string[] | undefined): Shareable | undefined;
  /** Tells the other processes the key was filled (`f`) or failed (`x`), which wakes their waiters. Best effort, never rejects. */
  announce(kind: 'f' | 'x', key: string): Promise<void>;
  /** The store's breaker: when it is open, a deferred key looks again once it may admit a probe. */
  readonly breaker: Pick<CircuitBreaker, 'state' | 'openFor'>;
}

/** How the leases are timed: `SharedTierOptions.leasePoll` and `leaseMargin`, and this process's name. */
export interface ClusterFlightSettings {
  /** This process's name on the bus: the prefix of its lease tokens. */
  readonly id: string;
  /** Longest wait between two looks at the store while another process holds the lease, ms. */
  readonly leasePoll: number;
  /** Extra lease lifetime beyond the load's own deadline, ms. */
  readonly leaseMargin: number;
}

/** A lease granted to this process: its token, until when (on the clock) it holds, and whether it was given back (filled, failed or released). */
interface Held {
  readonly key: string;
  readonly token: string;
  readonly until: number;
  returned: boolean;
}

/**
 * One load per key in flight across the cluster (principle 2, its cluster
 * half; `Flights`, src/cache/flight.ts, is the half in one process): a lease
 * per key in the shared store, after memcache's. Coalescing alone leaves a
 * herd of one load per process for every cold key: Facebook's clients
 * repaired the same configuration value from the database at once (2010),
 * Discord's misses reached MongoDB as a herd when Redis nodes were ejected
 * (2019). Here the cluster sends one:
 * - the process granted the lease loads, then fills it (the others are woken
 *   by the bus) or, when the load fails, leaves a failure marker in its place
 *   for the backoff delay, so a bad key is loaded once per backoff step
 *   cluster-wide and its value in the store stays;
 * - read and lease are two steps, so the holder looks once more before it
 *   loads: another holder may have filled in between;
 * - the others serve a stale value (the store's or their own) or, with none,
 *   wait for the fill, woken by the bus or a bounded poll.
 * When the store cannot be asked there is no lease to take: fail closed (a
 * process with a value serves it and looks again later; only a key with
 * nothing to serve is loaded, by this process's one flight, within its origin
 * budget), so the cluster never sends more than one load per key per process.
 *
 * Asserted: a lease is given back once, by the token it was granted to.
 */
export class ClusterFlight {
  private readonly store: LeaseStore;
  private readonly clock: Clock;
  private readonly settings: ClusterFlightSettings;
  private readonly waiters = new LeaseWaiters();
  /** Leases granted here and not used, whose give-back the store did not take: key → token, until its ttl. */
  private readonly owed = new Map<string, { readonly token: string; readonly until: number }>();
  private tokens = 0;
  private waits = 0;

  constructor(store: LeaseStore, clock: Clock, settings: ClusterFlightSettings) {
    this.store = store;
    this.clock = clock;
    this.settings = settings;
  }

  /** Waits for another process's lease so far (`stats().shared.leaseWaits`). */
  get leaseWaits(): number {
    return this.waits;
  }

  /** Another process filled or failed `key` (a bus message): its waiters here look again now. */
  wake(key: string): void {
    this.waiters.wake(key);
  }

  /** Wakes every waiter (on close). */
  wakeAll(): void {
    this.waiters.wakeAll();
  }

  /**
   * Resolves one key in flight: the store's value if fresh (`first`, when the
   * cache has read it already), else the lease. Never rejects: every outcome is data.
   */
  async resolve<V>(r: ResolveRequest<V>, first?: Lookup<V>): Promise<Resolution<V>> {
    const { leasePoll } = this.settings;
    let poll = Math.min(25, leasePoll);
    let seen = first;
    // Checked without an await: the path of every key in flight keeps its ticks.
    if (this.owed.has(r.key)) await this.settleOwed(r.key);
    for (;;) {
      const timedOut = r.hard.expired;
      if (timedOut !== undefined) {
        // The load's hard timeout passed while waiting on another process's lease: for a
        // caller with nothing to serve that is a timed-out load, as without a shared tier.
        if (r.servable) return this.deferred(timedOut);
        return { kind: 'failed', error: timedOut, failures: r.failures + 1, retryInMs: r.backoff(r.failures + 1) };
      }
      seen ??= await this.store.lookup(r.key, r.accept);
      if (seen.kind === 'unavailable') return this.unavailable(r, seen.error);
      if (seen.kind === 'hit' && !r.early) return seen;
      const token = this.token();
      const ttlMs = this.leaseTtl(r);
      const grant = await this.store.acquire(r.key, token, ttlMs);
      if (!grant.ok) {
        if (seen.kind === 'hit') return seen;
        // The store read, then stopped answering: the stale value it gave is served, not loaded past.
        if (seen.kind === 'stale') return { ...seen, retryInMs: this.retryAfterUnavailable() };
        return this.unavailable(r, grant.error);
      }
      if (grant.value.granted) {
        const lease: Held = { key: r.key, token, until: this.clock.now() + ttlMs, returned: false };
        if (seen.kind === 'hit') return this.holdLease(r, lease, grant.value.failures); // an early refresh
        // Read and lease are two steps: a holder may have filled and dropped its lease
        // between them, so look once more before loading (else two loads for one miss).
        const again = await this.store.lookup(r.key, r.accept);
        if (again.kind === 'hit') {
          await this.release(lease);
          return again;
        }
        if (again.kind === 'unavailable' && (seen.kind === 'stale' || r.servable)) {
          // The store granted the lease and then stopped answering: fail closed
          // here too. A key with a value (the store's stale one, or ours) is
          // not loaded while the store cannot be asked (principle 4: a hung
          // Redis is no reason to load harder). The lease is given back
          // without waiting on the same silent store, and again at the key's
          // next look if the store did not take it: a lease held for nothing
          // would make the processes with nothing to serve wait out its ttl.
          this.abandon(lease);
          return seen.kind === 'stale' ? { ...seen, retryInMs: this.retryAfterUnavailable() } : this.deferred(again.error);
        }
        return this.holdLease(r, lease, grant.value.failures);
      }
      if (seen.kind === 'hit') return seen; // an early refresh someone else is already doing
      const held: Extract<LeaseGrant, { granted: false }> = grant.value;
      const retryInMs = Math.min(held.ttlMs, leasePoll);
      // Someone else loads (or the key backs off cluster-wide): serve stale if there is any.
      if (seen.kind === 'stale') return { ...seen, retryInMs };
      if (r.servable) return { kind: 'deferred', error: new LeaseBackoffError(r.key, held.ttlMs, held.failures), retryInMs };
      if (held.holder === 'failed') return { kind: 'failed', error: new LeaseBackoffError(r.key, held.ttlMs, held.failures), failures: held.failures, retryInMs: held.ttlMs };
      // Nothing to serve: wait for the holder's fill (the bus wakes us) or a bounded poll.
      this.waits++;
      await this.waiters.wait(r.key, Math.min(poll, held.ttlMs, Math.max(0, r.deadline - this.clock.now())), r.hard.signal, this.clock);
      poll = Math.min(poll * 2, leasePoll);
      seen = undefined;
    }
  }

  /** This process holds the lease: load, then fill (or leave a failure marker). */
  private async holdLease<V>(r: ResolveRequest<V>, lease: Held, clusterFailures: number): Promise<Resolution<V>> {
    const started = preciseNow(this.clock);
    let value: V;
    try {
      value = await r.load();
    } catch (error) {
      if (refusedByBudget(error)) {
        // Not the key's fault (refusal.ts): no failure marker; the lease goes back for another process to take.
        await this.release(lease);
        return { kind: 'failed', error, failures: r.failures + 1, retryInMs: r.backoff(r.failures + 1) };
      }
      const failures = Math.max(r.failures, clusterFailures) + 1;
      const retryInMs = r.backoff(failures);
      const marked = await this.store.fail(r.key, this.giveBack(lease), failures, retryInMs);
      if (marked.ok && marked.value) await this.store.announce('x', r.key);
      return { kind: 'failed', error, failures, retryInMs };
    }
    const loadMs = preciseNow(this.clock) - started;
    const freshMs = r.freshFor(value);
    const shared = this.store.encode(r.key, value, freshMs, r.staleFor, loadMs, r.tags());
    if (shared === undefined) {
      // Cannot be shared (too large, or not JSON): free the lease so waiters do not sit out its ttl.
      await this.release(lease);
      return { kind: 'loaded', value, freshMs, loadMs, keep: true };
    }
    const filled = await this.store.fill(r.key, this.giveBack(lease), shared.text, shared.ttlMs);
    if (filled.ok && filled.value) await this.store.announce('f', r.key);
    // Refused: a write or delete came after the lease was granted; this value may be older than it.
    return { kind: 'loaded', value, freshMs, loadMs, keep: !filled.ok || filled.value };
  }

  /** Gives the lease back without a result worth recording: another process may take it at once. */
  private release(lease: Held): Promise<Called<void>> {
    return this.store.release(lease.key, this.giveBack(lease));
  }

  /** Gives back, without waiting, a lease this process will not use; if the store does not take it, it is owed until its ttl. */
  private abandon(lease: Held): void {
    void this.release(lease).then((done) => {
      if (done.ok) return;
      const now = this.clock.now();
      for (const [key, owed] of this.owed) if (owed.until <= now) this.owed.delete(key);
      this.owed.set(lease.key, { token: lease.token, until: lease.until });
    });
  }

  /** Gives back a lease owed on `key` (see {@link abandon}), before the key is looked at again. */
  private async settleOwed(key: string): Promise<void> {
    const owed = this.owed.get(key);
    if (owed === undefined) return;
    this.owed.delete(key);
    if (owed.until <= this.clock.now()) return;
    const done = await this.store.release(key, owed.token);
    if (!done.ok) this.owed.set(key, owed);
  }

  /**
   * The one way to a lease's token for `fill`, `fail` or `release`: a lease
   * given back twice would be a second answer for one load (the store refuses
   * the second, but this process would have counted and announced it).
   */
  private giveBack(lease: Held): string {
    assert(!lease.returned, 'a lease is given back once, by the token it was granted to');
    lease.returned = true;
    return lease.token;
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
    return { kind: 'deferred', error: e, retryInMs: this.retryAfterUnavailable() };
  }

  /** When to look again at a store that did not answer: when its breaker may admit a probe, spread so processes do not come back together. */
  private retryAfterUnavailable(): number {
    const breaker = this.store.breaker;
    const retryAfter = breaker.state === 'open' ? breaker.openFor : this.settings.leasePoll;
    return retryAfter * (0.5 + this.clock.random());
  }

  /** The lease outlives the load's deadline by the margin: a holder still inside its time keeps it. */
  private leaseTtl(r: ResolveRequest<unknown>): number {
    return Math.max(1, r.deadline - this.clock.now()) + this.settings.leaseMargin;
  }

  private token(): string {
    return `${this.settings.id}.${++this.tokens}`;
  }
}

/**
 * Processes waiting for another process's lease on a key: woken by the bus
 * when the holder fills (or fails), else by a bounded poll. One entry per key
 * a flight waits on; a flight is already one per key in this process, so this
 * never holds more than one waiter per key in practice, but it allows more
 * (a flight superseded by a `delete` may still wait beside its successor).
 */
class LeaseWaiters {
  private readonly byKey = new Map<string, Set<() => void>>();

  /** Resolves when `key` is woken, after `ms`, or when `signal` aborts, whichever is first. Never rejects. */
  wait(key: string, ms: number, signal: AbortSignal, clock: Clock): Promise<void> {
    return new Promise<void>((resolve) => {
      let set = this.byKey.get(key);
      if (set === undefined) this.byKey.set(key, (set = new Set()));
      const waiters = set;
      const done = (): void => {
        timer.cancel();
        signal.removeEventListener('abort', done);
        waiters.delete(done);
        if (waiters.size === 0 && this.byKey.get(key) === waiters) this.byKey.delete(key);
        resolve();
      };
      const timer = clock.setTimer(done, ms);
      waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** Wakes every waiter on `key`. */
  wake(key: string): void {
    const set = this.byKey.get(key);
    if (set !== undefined) for (const done of [...set]) done();
  }

  /** Wakes everyone (on close). */
  wakeAll(): void {
    for (const key of [...this.byKey.keys()]) this.wake(key);
  }
}
