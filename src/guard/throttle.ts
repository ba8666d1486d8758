import assert from 'node:assert/strict';
import { type Clock } from '../time/clock.js';
import { between, clockOption, duration, integer, optionalFunction, optionsObject, or } from '../config.js';
import { ConfigError, OverloadedError } from '../errors.js';
import { Events, type ListenerErrorOption } from '../events.js';
import { causeOf, classify, classifyCall, isLocalRefusal } from './classify.js';
import { type CallOptions, GATE, type Gate, type GuardContext, guarded, NEVER_ABORTS, NOT_NOW, notATask, startTask } from './guard.js';
import { RollingWindow } from './window.js';

/** Options for {@link AdaptiveThrottle}. */
export interface AdaptiveThrottleOptions extends ListenerErrorOption {
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
   * Whether a failure means the backend did not take the request (refused it:
   * overload, breaker open, unavailable; or never answered it in time) rather
   * than accepted and answered it. Default: what `classify` calls `shed`,
   * `breaker-open`, `overloaded` (code `OVERLOADED`, `BREAKER_OPEN`,
   * `UNAVAILABLE` or `RESOURCE_EXHAUSTED`, or a numeric `status`/`statusCode`
   * of 429 or 503) or `timeout` (code `LOAD_TIMEOUT` of phase `load`), thrown
   * or the reason the call's signal aborted. Any other error (a 404, a bug) counts as accepted. Slow is
   * not refused (principle 5): a call that answers late but within its
   * timeout is accepted, and it is the limiter's job to answer slowness; a
   * call that timed out got no answer, and counting it is what lets the
   * throttle engage against a backend that stops answering at all.
   */
  isRejection?: (error: unknown) => boolean;
  clock?: Clock;
}

/** Typed events of an {@link AdaptiveThrottle}. */
export interface AdaptiveThrottleEvents {
  /** A call was rejected locally, with the probability in force. */
  throttled: (event: { key: string; probability: number }) => void;
}

/**
 * What an {@link AdaptiveThrottle} is doing, from {@link AdaptiveThrottle.stats}.
 * An operator reads in it why calls are being turned away locally: the
 * window's `requests` against `k × accepts` is the whole of the decision, so
 * a `rejectionProbability` above 0 with `accepts` near `requests / k` is the
 * backend refusing work, not the throttle misfiring; `rejected` over `calls`
 * is the share of traffic the backend was spared.
 */
export interface AdaptiveThrottleStats {
  /** Calls counted in the window (local rejections only while a refusal is in it and the backend has not been seen healthy lately): the formula's `requests`. */
  readonly requests: number;
  /** Calls the backend accepted in the window: the formula's `accepts`. */
  readonly accepts: number;
  /** The probability the next call is rejected locally. */
  readonly rejectionProbability: number;
  /** Calls into `run`, since the throttle was made. */
  readonly calls: number;
  /** Calls rejected locally (never sent to the backend), since the throttle was made. */
  readonly rejected: number;
}

// Every call is counted once, when its outcome is known, in exactly one field:
// the window's requests are their sum, so they are not stored.
const ACCEPTS = 0;
const LOCAL = 1;
const REJECTED = 2;
/** "Lately": the current bucket and the one before it, so a bucket boundary forgets nothing. */
const RECENT_BUCKETS = 2;

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
 * (docs/design.md, principle 3), where Discord 2019's herd had none, and rejection
 * costs the backend nothing (principle 4: fail fast, serve stale).
 *
 * **Calls in flight are not refusals: a call is counted when it settles**,
 * not when it starts. Counted at its start, a call weighed on `requests` for
 * its whole latency before its accept could arrive, so a healthy backend that
 * is merely slow looked like one refusing work: at 1.7 s latency about 80
 * calls were rejected locally in the first 4 s of a cold start, before the
 * backend had refused anything (issue 11). Counted at settlement, a call's
 * request and its outcome land in the same bucket, together. (Subtracting the
 * calls in flight from `requests` instead would need a count kept beside the
 * window, which drifts from it when a call outlives the bucket its request
 * was counted in.) Against a backend that stops answering entirely nothing is
 * lost: its calls end at their timeout (a `Retry`'s `attemptTimeout`, the
 * cache's hard timeout, a driver's own), a timeout counts as not accepted
 * (see `isRejection`), and the throttle engages one timeout later.
 *
 * One departure from the book, for principle 3: calls the throttle rejected
 * itself count as requests only while the window holds a refusal (or a
 * timeout) and the backend has not been seen healthy lately (the two most
 * recent buckets, 6 s by default, holding accepts and no refusal). In the book's formula, after a total outage those local
 * rejections keep the probability near 1 after the backend heals, and only
 * the trickle of calls let through can earn it back: several windows of
 * self-inflicted failure after the trigger is gone. Counting them while any
 * refusal was left in the window was not enough either: four refusals and
 * then a healthy backend kept about 75 % of calls rejected for the whole 30 s
 * window, since the local rejections themselves held the probability up (the
 * retry-storm test of issue 17 found it holding a whole tier down). Under
 * sustained overload the backend refuses in every bucket, and in a total
 * outage it accepts nothing, so nothing changes there (the probability stays
 * near 1); once it has accepted and refused nothing for two buckets, the
 * probability falls to what its refusals and accepts alone say, and a
 * backend accepting everything it is sent is let through within seconds.
 *
 * A call the caller aborted counts for nothing, whenever it settles: it says
 * nothing about the backend. Randomness is drawn from the clock (principle 8).
 */
export class AdaptiveThrottle implements Gate {
  /** @internal */
  readonly [GATE] = true as const;
  readonly k: number;
  readonly window: number;
  readonly buckets: number;
  private readonly isRejection: (error: unknown) => boolean;
  private readonly clock: Clock;
  private readonly counts: RollingWindow;
  private readonly events: Events<AdaptiveThrottleEvents>;
  private calls = 0;
  private rejected = 0;

  constructor(throttleOptions?: AdaptiveThrottleOptions) {
    const options = optionsObject('AdaptiveThrottle options', throttleOptions);
    this.events = new Events<AdaptiveThrottleEvents>(optionalFunction('onListenerError', options.onListenerError));
    this.k = between('k', or(options.k, 2), 1, Number.MAX_VALUE);
    this.window = duration('window', or(options.window, 30_000), { positive: true });
    this.buckets = integer('buckets', or(options.buckets, 10), 1);
    if (this.buckets > 1000) throw new ConfigError(`buckets must be at most 1000, got ${this.buckets}`);
    optionalFunction('isRejection', options.isRejection);
    this.isRejection = options.isRejection ?? defaultIsRejection;
    this.clock = clockOption('clock', options.clock);
    this.counts = new RollingWindow(this.clock, this.window / this.buckets, this.buckets, 3);
  }

  /** Subscribes to an event; returns a function that unsubscribes. */
  on<K extends keyof AdaptiveThrottleEvents>(event: K, listener: AdaptiveThrottleEvents[K]): () => void {
    return this.events.on(event, listener);
  }

  off<K extends keyof AdaptiveThrottleEvents>(event: K, listener: AdaptiveThrottleEvents[K]): void {
    this.events.off(event, listener);
  }

  /** Calls that settled in the window (local rejections only while a refusal is in it and the backend has not been seen healthy lately: see {@link AdaptiveThrottle}). */
  get requests(): number {
    const refused = this.counts.sum(REJECTED);
    return this.counts.sum(ACCEPTS) + refused + (refused > 0 && !this.healthyNow() ? this.counts.sum(LOCAL) : 0);
  }

  /** The backend has been seen healthy lately: the most recent buckets hold accepts and no refusal. */
  private healthyNow(): boolean {
    return this.counts.sum(REJECTED, RECENT_BUCKETS) === 0 && this.counts.sum(ACCEPTS, RECENT_BUCKETS) > 0;
  }

  /** Calls the backend accepted in the window. */
  get accepts(): number {
    return this.counts.sum(ACCEPTS);
  }

  /** The probability the next call is rejected locally. */
  get probability(): number {
    const requests = this.requests;
    const p = Math.max(0, (requests - this.k * this.accepts) / (requests + 1));
    // Below 1 however bad the window: some calls always reach the backend, so recovery can be seen.
    assert(p >= 0 && p < 1, 'a throttle never rejects every call');
    return p;
  }

  /** The window's counts, the probability in force and the calls seen and rejected since it was made (see {@link AdaptiveThrottleStats}). */
  stats(): AdaptiveThrottleStats {
    return { requests: this.requests, accepts: this.accepts, rejectionProbability: this.probability, calls: this.calls, rejected: this.rejected };
  }

  /** Runs `fn` under the throttle, outside any cache. */
  execute<T>(fn: (signal: AbortSignal) => Promise<T>, options?: CallOptions): Promise<T> {
    return guarded(this, fn, options);
  }

  run<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
    if (typeof task !== 'function') return Promise.reject(notATask('AdaptiveThrottle', task));
    if (this.enter(context) === NOT_NOW) {
      // Something was refused in the window: the probability decides.
      this.calls++;
      const p = this.probability;
      if (p > 0 && this.clock.random() < p) {
        this.counts.add(LOCAL);
        this.rejected++;
        if (this.events.has('throttled')) this.events.emit('throttled', { key: context.key, probability: p });
        return Promise.reject(new OverloadedError(`adaptive throttle rejected key "${context.key}" locally (p = ${p.toFixed(3)}): the backend is refusing work`));
      }
    }
    const pending = startTask(task, context.signal);
    // The outcome is counted by a reaction registered before the caller's, on
    // the task's own promise (as the breaker does): no async frame, no extra
    // promise or tick on the caller's path. A call that cannot be abandoned
    // shares one pair of handlers.
    const { signal } = context;
    if (signal === NEVER_ABORTS) pending.then(this.accepted, this.failed);
    else pending.then(
      () => this.answered(signal),
      (error: unknown) => this.settled(signal, error),
    );
    return pending;
  }

  /**
   * Admits a call at once when nothing was refused in the window (the
   * probability is then 0: accepts are all the requests, and k ≥ 1), known
   * without a clock read or a sum; a refusal since expired only sends the
   * call through the full formula in `run` (`pipeline` uses this; see `Gate`).
   *
   * @internal
   */
  enter(_context: GuardContext): number {
    if (this.counts.total(REJECTED) !== 0) return NOT_NOW;
    this.calls++;
    return 0;
  }

  /** @internal */
  leave(_token: number, context: GuardContext, ok: boolean, error: unknown): void {
    if (ok) this.answered(context.signal);
    else this.settled(context.signal, error);
  }

  /** The backend answered; after a load timeout aborted the call, too late for its caller. */
  private answered(signal: AbortSignal): void {
    if (signal.aborted) this.settled(signal, undefined);
    else this.counts.add(ACCEPTS);
  }

  private readonly accepted = (): void => {
    this.answered(NEVER_ABORTS);
  };

  private readonly failed = (error: unknown): void => {
    this.settled(NEVER_ABORTS, error);
  };

  /**
   * Counts a call that reached the backend and did not simply succeed.
   * Past a load timeout, whatever the task made of it, the cause is the
   * timeout; any other abort is the caller's and says nothing about the
   * backend, so it counts for nothing.
   */
  private settled(signal: AbortSignal, error: unknown): void {
    if (classifyCall(error, signal) === 'aborted') return;
    // An answer after a load timeout aborted the call came too late for its caller: the timeout is the cause.
    this.counts.add(this.safeIsRejection(causeOf(error, signal)) ? REJECTED : ACCEPTS);
  }

  private safeIsRejection(error: unknown): boolean {
    try {
      return this.isRejection(error) === true;
    } catch {
      return true;
    }
  }
}

/** The default `isRejection`: a refusal for overload, here or by the backend, or a load that got no answer in time. */
function defaultIsRejection(error: unknown): boolean {
  const outcome = classify(error);
  return outcome === 'overloaded' || outcome === 'timeout' || isLocalRefusal(outcome);
}
