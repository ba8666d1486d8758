import { between, duration, integer, optionsObject, or } from '../config.js';
import { AbortedError, ConfigError } from '../errors.js';
import { abortOwned, onAbort, ownedSignal } from '../guard/abort.js';
import { type RetryBudget } from '../guard/budget.js';
import { deadlineOf } from '../guard/deadline.js';
import { type Clock, type Timer } from '../time/clock.js';

/**
 * Options of a {@link Dependency}'s hedging: after a delay with no answer, one
 * more attempt to another upstream; the first good answer wins and the other
 * is cancelled. Give `after` (a fixed delay, ms) or `percentile` (the delay
 * is that percentile of the dependency's recent successful attempts), not both.
 */
export interface HedgeOptions {
  /** Fixed delay, ms, before the hedge is sent. */
  after?: number;
  /**
   * The delay is this percentile (0.5–0.999) of the last `samples` successful
   * attempts' durations. No hedge is sent until `samples` have been seen: a
   * guess at the tail sends hedges at a healthy median.
   */
  percentile?: number;
  /** How many recent successful attempts the percentile is read from. Default 200. */
  samples?: number;
  /** Shortest delay, ms, whatever the percentile says. Default 1. A hedge sent at once is a second request, not a hedge. */
  minAfter?: number;
}

/** What hedging has done, in {@link DependencyStats}. */
export interface HedgeStats {
  /** Hedges sent: each spent one retry from the budget. */
  readonly sent: number;
  /** Calls whose answer came from the hedge, not the first attempt. */
  readonly won: number;
  /** Hedges due but not sent because the budget was spent (the bound at work). */
  readonly budgetRefusals: number;
  /** Hedges due but not sent because no other upstream could take one. */
  readonly noUpstream: number;
}

/** One race's two runners: start one on a signal, and say how it ended. */
export interface Runner<T> {
  /** Starts the first attempt on `signal`. */
  first(signal: AbortSignal): Promise<T>;
  /** Starts the hedge on `signal`, or says it cannot go (no other upstream, no budget): undefined. */
  second(signal: AbortSignal): Promise<T> | undefined;
}

/**
 * Hedged requests under the retry budget (Dean and Barroso, "The Tail at
 * Scale", 2013; Polly's hedging strategy, failsafe-go's hedge policy). A
 * hedge is load added in the name of latency: unbudgeted, a slowdown that
 * pushes every call past the delay doubles the load on a dependency already
 * too slow, which is a retry storm by another name. So each hedge is drawn
 * from the same `RetryBudget` as retries (failsafe-go caps them together),
 * is sent only for a call that may be repeated, only to an upstream the call
 * is not already waiting on, and at most one per attempt.
 *
 * @internal
 */
export class Hedging {
  private readonly after: number | undefined;
  private readonly percentile: number | undefined;
  private readonly minAfter: number;
  /** Recent successful attempts' durations, a ring: the percentile's sample. */
  private readonly window: Float64Array | undefined;
  private filled = 0;
  private next = 0;
  /** The delay read from the window, and how many samples ago: a sort per call would cost more than the hedge saves. */
  private cached: number | undefined;
  private sinceCached = 0;
  private readonly counts = { sent: 0, won: 0, budgetRefusals: 0, noUpstream: 0 };

  constructor(
    hedgeOptions: HedgeOptions,
    private readonly budget: RetryBudget,
    private readonly clock: Clock,
  ) {
    const options = optionsObject('hedge', hedgeOptions);
    if ((options.after === undefined) === (options.percentile === undefined)) throw new ConfigError('hedge needs exactly one of `after` (ms) and `percentile` (0.5–0.999)');
    this.after = options.after === undefined ? undefined : duration('hedge.after', options.after, { positive: true, timer: true });
    this.percentile = options.percentile === undefined ? undefined : between('hedge.percentile', options.percentile, 0.5, 0.999);
    this.minAfter = duration('hedge.minAfter', or(options.minAfter, 1), { positive: true, timer: true });
    this.window = this.percentile === undefined ? undefined : new Float64Array(integer('hedge.samples', or(options.samples, 200), 10));
  }

  stats(): HedgeStats {
    return { ...this.counts };
  }

  /** A successful attempt took `ms`: a sample of the latency the percentile is read from. */
  record(ms: number): void {
    const w = this.window;
    if (w === undefined) return;
    w[this.next] = ms;
    this.next = (this.next + 1) % w.length;
    if (this.filled < w.length) this.filled++;
    this.sinceCached++;
  }

  /** The delay before a hedge now, ms; undefined while the percentile has too few samples. */
  delay(): number | undefined {
    if (this.after !== undefined) return this.after;
    const w = this.window!;
    if (this.filled < w.length) return undefined;
    // Read again once a tenth of the window is new: the tail moves with load, not with every call.
    if (this.cached === undefined || this.sinceCached >= w.length / 10) {
      const sorted = Float64Array.from(w).sort();
      this.cached = Math.max(this.minAfter, sorted[Math.min(sorted.length - 1, Math.floor(this.percentile! * sorted.length))]!);
      this.sinceCached = 0;
    }
    return this.cached;
  }

  /**
   * Runs one attempt as a race: the first runner at once, the second after
   * the delay if the first has not settled and the budget grants a retry.
   * Resolves with the first success and aborts the other; rejects with the
   * last failure when both fail (or the first, when no hedge was sent).
   */
  race<T>(signal: AbortSignal, runner: Runner<T>): Promise<T> {
    const delay = this.delay();
    if (delay === undefined) return runner.first(signal);
    return new Promise<T>((resolve, reject) => {
      const lanes = [new AbortController(), new AbortController()] as const;
      let running = 1;
      let over = false;
      let timer: Timer | undefined;
      // The attempt's own signal (its timeout, the deadline, the caller) ends both lanes.
      const unhook = onAbort(signal, () => lanes.forEach((lane) => abortOwned(lane, signal.reason)));
      const end = (): void => {
        over = true;
        timer?.cancel();
        unhook();
      };
      const settle = (lane: 0 | 1, p: Promise<T>): void => {
        p.then(
          (value) => {
            if (over) return;
            end();
            if (lane === 1) this.counts.won++;
            abortOwned(lanes[1 - lane]!, LOST);
            resolve(value);
          },
          (error: unknown) => {
            if (over) return;
            if (--running > 0) return;
            end();
            reject(error);
          },
        );
      };
      // Each lane's signal stands for the attempt's deadline too: a transport sends it on (deadlineOf).
      const at = deadlineOf(signal);
      settle(0, runner.first(ownedSignal(lanes[0], at)));
      timer = this.clock.setTimer(() => {
        timer = undefined;
        if (over) return;
        if (!this.budget.tryRetry()) {
          this.counts.budgetRefusals++;
          return;
        }
        const hedge = runner.second(ownedSignal(lanes[1], at));
        if (hedge === undefined) {
          this.counts.noUpstream++;
          return;
        }
        this.counts.sent++;
        running++;
        settle(1, hedge);
      }, delay);
    });
  }
}

/** Why the slower of a hedged pair is cancelled: the caller has its answer. One instance: nobody reads its stack. */
const LOST = new AbortedError('the other attempt of a hedged pair answered first', undefined);
