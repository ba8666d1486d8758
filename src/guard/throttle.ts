import { type Clock } from '../time/clock.js';
import { systemClock } from '../time/system.js';
import { between, duration, integer, optionalFunction, or } from '../config.js';
import { ConfigError, OverloadedError } from '../errors.js';
import { Events } from '../events.js';
import { isAbort, isOverloadSignal } from './classify.js';
import { callContext, type CallOptions, type Guard, type GuardContext } from './guard.js';
import { RollingWindow } from './window.js';

/** Options for {@link AdaptiveThrottle}. */
export interface AdaptiveThrottleOptions {
  /**
   * How many requests the client may send per request the backend accepts,
   * before it starts rejecting locally. Default 2 (Google SRE's value); must
   * be ≥ 1. Lower is more aggressive: 1 sends nothing beyond what is accepted,
   * which leaves no room to notice recovery.
   */
  k?: number;
  /**
   * Length of the sliding window the counts are kept over, ms. Default 30 000:
   * long enough to hold hundreds of requests at modest rates, so the
   * probability is not noise; short enough that the throttle lets go within
   * half a minute of the backend's last refusal. (SRE uses two minutes.)
   */
  window?: number;
  /** Buckets the window is kept in. Default 10. */
  buckets?: number;
  /**
   * Whether a failure means the backend refused the request (overload, breaker
   * open, unavailable) rather than accepted and answered it. Default:
   * `OverloadedError`, `BreakerOpenError`, an error whose `code` is
   * `OVERLOADED`, `BREAKER_OPEN`, `UNAVAILABLE` or `RESOURCE_EXHAUSTED`, or
   * whose numeric `status`/`statusCode` is 429 or 503. Any other error (a 404,
   * a bug, a timeout) counts as accepted: slow is not refused (principle 5),
   * and it is the limiter's job to answer slowness.
   */
  isRejection?: (error: unknown) => boolean;
  clock?: Clock;
}

/** Typed events of an {@link AdaptiveThrottle}. */
export interface AdaptiveThrottleEvents {
  /** A call was rejected locally, with the probability in force. */
  throttled: (event: { key: string; probability: number }) => void;
}

const REQUESTS = 0;
const ACCEPTS = 1;
const LOCAL = 2;
const REJECTED = 3;

/**
 * Client-side adaptive throttling (Google SRE book, "Handling Overload"): when
 * the backend refuses work, reject a share of calls locally, before they cost
 * it anything, with probability
 *
 *     max(0, (requests − k · accepts) / (requests + 1))
 *
 * over a sliding window, where `requests` counts every call the throttle saw
 * (the ones it rejected included) and `accepts` those the backend accepted.
 * Under sustained overload the backend receives about `k` times what it
 * accepts, however hard the application pushes: a bound you can state
 * (DESIGN.md, principle 3), where Discord 2019's herd had none, and rejection
 * costs the backend nothing (principle 4: fail fast, serve stale).
 *
 * One departure from the book, for principle 3: calls the throttle rejected
 * itself count as requests only while the window still holds a refusal from
 * the backend. In the book's formula, after a total outage those local
 * rejections keep the probability near 1 after the backend heals, and only
 * the trickle of calls let through can earn it back: several windows of
 * self-inflicted failure after the trigger is gone. Here, once the backend has
 * refused nothing for one window, the throttle lets everything through.
 *
 * A call the caller aborted counts for nothing: it says nothing about the
 * backend. Randomness is drawn from the clock (principle 8).
 */
export class AdaptiveThrottle implements Guard {
  readonly k: number;
  readonly window: number;
  readonly buckets: number;
  private readonly isRejection: (error: unknown) => boolean;
  private readonly clock: Clock;
  private readonly counts: RollingWindow;
  private readonly events = new Events<AdaptiveThrottleEvents>();

  constructor(options: AdaptiveThrottleOptions = {}) {
    this.k = between('k', or(options.k, 2), 1, Number.MAX_VALUE);
    this.window = duration('window', or(options.window, 30_000), { positive: true });
    this.buckets = integer('buckets', or(options.buckets, 10), 1);
    if (this.buckets > 1000) throw new ConfigError(`buckets must be at most 1000, got ${this.buckets}`);
    optionalFunction('isRejection', options.isRejection);
    this.isRejection = options.isRejection ?? isOverloadSignal;
    this.clock = options.clock ?? systemClock;
    this.counts = new RollingWindow(this.clock, this.window / this.buckets, this.buckets, 4);
  }

  /** Subscribes to an event; returns a function that unsubscribes. */
  on<K extends keyof AdaptiveThrottleEvents>(event: K, listener: AdaptiveThrottleEvents[K]): () => void {
    return this.events.on(event, listener);
  }

  off<K extends keyof AdaptiveThrottleEvents>(event: K, listener: AdaptiveThrottleEvents[K]): void {
    this.events.off(event, listener);
  }

  /** Calls counted in the window (local rejections only while the backend refused something in it). */
  get requests(): number {
    const all = this.counts.sum(REQUESTS);
    return this.counts.sum(REJECTED) > 0 ? all : all - this.counts.sum(LOCAL);
  }

  /** Calls the backend accepted in the window. */
  get accepts(): number {
    return this.counts.sum(ACCEPTS);
  }

  /** The probability the next call is rejected locally. */
  get probability(): number {
    const requests = this.requests;
    return Math.max(0, (requests - this.k * this.accepts) / (requests + 1));
  }

  /** Runs `fn` under the throttle, outside any cache. */
  execute<T>(fn: (signal: AbortSignal) => Promise<T>, options?: CallOptions): Promise<T> {
    return this.run(fn, callContext(options));
  }

  async run<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
    const p = this.probability;
    const epoch = this.counts.add(REQUESTS);
    if (p > 0 && this.clock.random() < p) {
      this.counts.add(LOCAL);
      if (this.events.has('throttled')) this.events.emit('throttled', { key: context.key, probability: p });
      throw new OverloadedError(`adaptive throttle rejected key "${context.key}" locally (p = ${p.toFixed(3)}): the backend is refusing work`);
    }
    let value: T;
    try {
      value = await task(context.signal);
    } catch (error) {
      if (context.signal.aborted || isAbort(error)) this.counts.addAt(epoch, REQUESTS, -1);
      else if (this.safeIsRejection(error)) this.counts.add(REJECTED);
      else this.counts.add(ACCEPTS);
      throw error;
    }
    this.counts.add(ACCEPTS);
    return value;
  }

  private safeIsRejection(error: unknown): boolean {
    try {
      return this.isRejection(error) === true;
    } catch {
      return true;
    }
  }
}
