import assert from 'node:assert/strict';
import { type Clock, MAX_TIMER_MS, type Timer } from '../time/clock.js';
import { between, clockOption, duration, integer, optionsObject, or, positive, optionalFunction } from '../config.js';
import { ConfigError } from '../errors.js';
import { Events, type ListenerErrorOption } from '../events.js';
import { effectiveDeadline } from './deadline.js';
import { type CallOptions, type Guard, type GuardContext, guarded, notATask } from './guard.js';
import { priorityRank } from './priority.js';
import { type QueueAdmission, type QueuedCall, WaitQueue } from './wait-queue.js';

/** Options for {@link RateLimiter}. */
export interface RateLimiterOptions extends ListenerErrorOption {
  /** Calls admitted per second, on average: the bucket's refill rate. Required, > 0. */
  rate: number;
  /**
   * Most calls admitted at once after a quiet spell: the bucket's size, ≥ 1.
   * Default `max(1, rate)`, one second's worth, so over any interval of `t`
   * seconds at most `burst + rate × t` calls are admitted, and never more than
   * twice `rate` in any one second. Lower it when the origin cannot take a
   * second's worth of calls at once.
   */
  burst?: number;
  /**
   * Share of the bucket, from 0 to 1, that `background` calls (a refresh while
   * stale is served, a warm-up) may not take. Default 0.5. A background call is
   * admitted only while the bucket holds at least `1 + reserve × (burst − 1)`
   * tokens, so after taking its own it leaves at least `reserve × (burst − 1)`
   * for calls of higher priority. 0 treats background like any other call; 1
   * admits it only into a full bucket, that is once nothing else has drawn on
   * it for `burst / rate` seconds.
   */
  reserve?: number;
  /** Longest a call waits for its token before it is refused, ms. Default 1000. */
  queueTimeout?: number;
  /** Most calls waiting for a token; beyond it, the lowest priority is refused. Default 1000. */
  maxQueue?: number;
  clock?: Clock;
}

/**
 * Why a {@link RateLimiter} refused a call:
 * - `busy`: no token and the caller would not wait (`wait: false`): not queued (`OverloadedError`).
 * - `full`: the queue held `maxQueue` and the call did not outrank its lowest waiter (`OverloadedError`).
 * - `displaced`: a queued call pushed out of a full queue by one of higher priority (`OverloadedError`).
 * - `timeout`: a queued call that waited `queueTimeout` for its token (`OverloadedError`).
 * - `deadline`: the call's deadline passed before it got a token, on arrival
 *   or while it waited (`DeadlineExceededError`).
 *
 * A caller's own abort is no refusal: it is counted nowhere.
 */
export type RateRefusalReason = 'busy' | 'full' | 'displaced' | 'timeout' | 'deadline';

/**
 * What a {@link RateLimiter} is doing, from {@link RateLimiter.stats}. An
 * operator reads in it whether the stated budget is what holds the origin
 * back: `refused.busy` rising is refreshes skipped while stale values are
 * served (the budget doing its job), `refused.timeout` and `refused.deadline`
 * are callers with nothing to serve who were turned away (the budget is below
 * demand), and `waited` over `admitted` is the share of calls that paid for
 * their token in latency.
 */
export interface RateLimiterStats {
  /** Calls that took a token, at once or after queueing, since the limiter was made. */
  readonly admitted: number;
  /** Of those, the ones that queued first. */
  readonly waited: number;
  /** Calls waiting for a token now. */
  readonly queued: number;
  /** Calls refused, by {@link RateRefusalReason}, since the limiter was made. */
  readonly refused: { readonly [R in RateRefusalReason]: number };
}

/** Typed events of a {@link RateLimiter}. Listeners run synchronously; what they throw is isolated. */
export interface RateLimiterEvents {
  /** A call that had queued got its token after `waitedMs` (the queueing delay; not emitted for calls admitted at once). */
  admitted: (e: QueueAdmission) => void;
  /** A call was refused, for `reason`. */
  refused: (e: QueuedCall & { readonly reason: RateRefusalReason }) => void;
}

// Float slack on token counts: 1000 / 3 ms at 3 per second accrues 0.9999999999999999 of a token.
const EPSILON = 1e-9;
const BACKGROUND = priorityRank('background');

/**
 * An origin budget stated in calls per second: a token bucket that admits at
 * most `burst + rate × t` calls over any `t` seconds, on the injected clock.
 *
 * Why, when there is already a {@link ConcurrencyLimiter}: a concurrency limit
 * bounds the load on a database only relative to its latency. At 64 in flight
 * and 5 ms per query it lets 12 800 queries a second through; it bounds
 * nothing a capacity plan can be checked against. After an outage of a shared
 * cache (Redis), every key that went stale during it wants a refresh at once
 * (the Discord 2019 herd); a bound you can state in queries per second is the
 * one that keeps the origin at the rate it was sized and tested for (docs/design.md,
 * principle 3: load on a dependency never exceeds a bound you can state). Use
 * both in a `pipeline` when the origin needs both bounds.
 *
 * - A call that finds a token takes it and runs at once: no timer, no
 *   allocation beyond the task's own. Tokens are spent when a call is admitted
 *   and never given back (a rate, not a concurrency): a failed or aborted task
 *   still counted against the origin.
 * - Otherwise a call with `wait: false` (a background refresh: the cache has a
 *   value to serve) is refused at once with `OverloadedError`; the
 *   message says when the next token accrues. Others wait in a queue ordered by
 *   priority (higher first, first in first out within one), and each is admitted
 *   when its token accrues. One timer, for the head of the queue, stands at a
 *   time; it is moved when the head changes.
 * - The queue is the one the `ConcurrencyLimiter` has too (`WaitQueue`,
 *   src/guard/wait-queue.ts): a waiter is refused with `OverloadedError`
 *   after `queueTimeout`, with `DeadlineExceededError` at its deadline if
 *   that is earlier (the earlier of `context.deadline` and one carried by its
 *   signal), and with `AbortedError` when its signal aborts; it leaves the
 *   queue at once. A full queue (`maxQueue`) makes room for an arrival by
 *   refusing the newest waiter of the lowest priority, if the arrival
 *   outranks it; otherwise the arrival is refused.
 * - A call whose deadline has passed, or whose signal has aborted, is refused
 *   before it takes a token, even with one in the bucket: a token is never
 *   given back, and one spent on a call nobody waits for is lost to the
 *   origin's budget.
 * - `background` calls (and numeric priorities at or below it) may not take
 *   the `reserve` share of the bucket, so refreshes of values the cache can
 *   still serve never starve first-time misses, which have nothing to serve.
 *
 * The bucket starts full. Memory is the bucket and the queue; the queue holds
 * a timer per waiter for its timeout, the single wake-up timer aside.
 */
export class RateLimiter implements Guard {
  readonly rate: number;
  readonly burst: number;
  readonly reserve: number;
  readonly queueTimeout: number;
  readonly maxQueue: number;
  private readonly clock: Clock;
  /** Tokens a background call needs in the bucket to be admitted. */
  private readonly backgroundNeed: number;
  private level: number;
  private refilledAt: number;

  private readonly events: Events<RateLimiterEvents>;
  private readonly queue: WaitQueue<RateRefusalReason, 'refused'>;
  /** Calls admitted without queueing; with the queue's `waited`, all admitted. */
  private atOnce = 0;
  private wake: Timer | undefined;
  private wakeAt = 0;
  /** Ends a timeout's message: the rate the waiter's token was to come at. */
  private readonly timeoutNote: string;
  private readonly onWake = (): void => {
    this.wake = undefined;
    this.drain();
  };

  constructor(rateOptions: RateLimiterOptions) {
    if (rateOptions === undefined) throw new ConfigError('RateLimiter needs options with a rate (calls per second)');
    const options = optionsObject('RateLimiter options', rateOptions);
    this.events = new Events<RateLimiterEvents>(optionalFunction('onListenerError', options.onListenerError));
    this.rate = positive('rate', options.rate);
    this.burst = between('burst', or(options.burst, Math.max(1, this.rate)), 1, Number.MAX_SAFE_INTEGER);
    this.reserve = between('reserve', or(options.reserve, 0.5), 0, 1);
    this.queueTimeout = duration('queueTimeout', or(options.queueTimeout, 1000), { timer: true });
    this.maxQueue = integer('maxQueue', or(options.maxQueue, 1000), 0);
    const clock = clockOption('clock', options.clock);
    this.clock = clock;
    this.backgroundNeed = 1 + this.reserve * (this.burst - 1);
    this.level = this.burst;
    this.refilledAt = clock.now();
    this.timeoutNote = ` (rate ${this.rate}/s)`;
    this.queue = new WaitQueue<RateRefusalReason, 'refused'>({
      clock,
      maxQueue: this.maxQueue,
      events: this.events,
      refusals: { event: 'refused', counts: { busy: 0, full: 0, displaced: 0, timeout: 0, deadline: 0 }, deadline: 'deadline' },
      awaits: 'a token',
      reached: (rank) => `rate limit reached (${this.rate}/s; next token in ${Math.max(0, Math.ceil(((this.need(rank) - this.level) * 1000) / this.rate))} ms)`,
      // A late wake-up timer may have left the newcomer's token in the bucket.
      joined: () => this.drain(),
      headLeft: () => this.schedule(),
    });
  }

  /** Tokens in the bucket now (fractional: they accrue continuously). */
  get tokens(): number {
    this.refill();
    return this.level;
  }

  /** Calls waiting for a token. */
  get queued(): number {
    return this.queue.size;
  }

  /** What the limiter has admitted and refused since it was made, and its queue now (see {@link RateLimiterStats}). */
  stats(): RateLimiterStats {
    const { waited } = this.queue;
    return { admitted: this.atOnce + waited, waited, queued: this.queue.size, refused: this.queue.refusals() };
  }

  /** Subscribes to an event; returns a function that unsubscribes. */
  on<K extends keyof RateLimiterEvents>(event: K, listener: RateLimiterEvents[K]): () => void {
    return this.events.on(event, listener);
  }

  off<K extends keyof RateLimiterEvents>(event: K, listener: RateLimiterEvents[K]): void {
    this.events.off(event, listener);
  }

  /** Runs `fn` under the rate, outside any cache. */
  execute<T>(fn: (signal: AbortSignal) => Promise<T>, options?: CallOptions): Promise<T> {
    return guarded(this, fn, options);
  }

  run<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
    if (typeof task !== 'function') return Promise.reject(notATask('RateLimiter', task));
    const { signal } = context;
    const rank = priorityRank(context.priority);
    if (!signal.aborted && (this.queue.size === 0 || this.queue.topRank! < rank)) {
      this.refill();
      if (this.level + EPSILON >= this.need(rank) && !this.expired(context)) {
        this.take();
        this.atOnce++;
        try {
          return task(signal);
        } catch (error) {
          return Promise.reject(error);
        }
      }
    }
    return this.enqueue(context, rank).then(() => task(signal));
  }

  private enqueue(context: GuardContext, rank: number): Promise<void> {
    return this.queue.turnAway(context, rank) ?? this.queue.makeRoom(context, rank) ?? this.queue.join(context, rank, this.queueTimeout, this.timeoutNote);
  }

  /** Tokens a call of this rank needs in the bucket to be admitted. */
  private need(rank: number): number {
    return rank <= BACKGROUND ? this.backgroundNeed : 1;
  }

  private expired(context: GuardContext): boolean {
    const deadline = effectiveDeadline(context);
    return deadline !== undefined && deadline <= this.clock.now();
  }

  private refill(): void {
    const now = this.clock.now();
    const elapsed = now - this.refilledAt;
    if (elapsed <= 0) return;
    this.refilledAt = now;
    this.level = Math.min(this.burst, this.level + (elapsed * this.rate) / 1000);
    assert.ok(this.level >= 0 && this.level <= this.burst, `tokens ${this.level} outside [0, ${this.burst}]`);
  }

  private take(): void {
    const left = this.level - 1;
    assert.ok(left > -2 * EPSILON && this.level <= this.burst, `took a token from ${this.level} (burst ${this.burst})`);
    this.level = left < 0 ? 0 : left;
  }

  /** Admits waiters from the head while their tokens are there, then sets the wake-up for the next. */
  private drain(): void {
    this.refill();
    for (let head = this.queue.head; head !== undefined; head = this.queue.head) {
      if (this.level + EPSILON < this.need(head.rank)) break;
      this.take();
      this.queue.admit('oldest');
    }
    this.schedule();
  }

  /** One timer, at the instant the head's token accrues; none when nobody waits. */
  private schedule(): void {
    const head = this.queue.head;
    if (head === undefined) {
      this.wake?.cancel();
      this.wake = undefined;
      return;
    }
    this.refill();
    const now = this.clock.now();
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, ((this.need(head.rank) - this.level) * 1000) / this.rate));
    const at = now + delay;
    if (this.wake !== undefined && this.wakeAt === at) return;
    this.wake?.cancel();
    this.wakeAt = at;
    this.wake = this.clock.setTimer(this.onWake, delay);
  }
}
