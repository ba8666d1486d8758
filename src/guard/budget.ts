import { type Clock } from '../time/clock.js';
import { between, clockOption, duration, integer, optionsObject, or } from '../config.js';
import { ConfigError } from '../errors.js';
import { RollingWindow } from './window.js';

/** Options for {@link RetryBudget}. */
export interface RetryBudgetOptions {
  /** Length of the sliding window the budget is kept over, ms. Default 10 000. */
  window?: number;
  /**
   * Retries allowed per request in the window, from 0 to 1. Default 0.2: at
   * most one call in five may be retried, so retries can add at most 20 % to
   * the load on the dependency, however many calls fail.
   */
  ratio?: number;
  /**
   * Retries per second allowed regardless of traffic, so a client with few
   * requests can still retry a rare failure. Default 10. It is a floor, not a
   * rate: `minPerSecond × window / 1000` retries may be spent at any moment of
   * the window.
   */
  minPerSecond?: number;
  /** Buckets the window is kept in; more buckets, a smoother slide. Default 10. */
  buckets?: number;
  clock?: Clock;
}

/**
 * What a {@link RetryBudget} holds now, from {@link RetryBudget.stats}. An
 * operator reads in it how close the callers of one dependency are to the
 * bound: `available` at 0 means every further retryable failure fails at
 * once (the budget is what stops the storm); `retries` against `requests` is
 * the extra load retries put on the dependency in the window.
 */
export interface RetryBudgetStats {
  /** Requests counted in the window (its whole buckets). */
  readonly requests: number;
  /** Retries spent in the window (and the bucket before it). */
  readonly retries: number;
  /** Whole retries that may be spent now. */
  readonly available: number;
}

const REQUESTS = 0;
const RETRIES = 1;
// Float slack for ratio × requests (0.29 × 100 is 28.999999999999996).
const EPSILON = 1e-9;

/**
 * A retry budget shared by every call to one dependency (Finagle's
 * `RetryBudget`): over a sliding window, retries may be at most `ratio` of the
 * requests plus a floor of `minPerSecond`. Share one instance across every
 * {@link Retry} guard in front of the same dependency; a budget per caller
 * bounds nothing.
 *
 * Why (docs/design.md, principle 3: no loop whose rate grows with failure): a retry
 * policy of "3 attempts" turns a dependency that fails every call into one that
 * receives three times its normal load, exactly when it is weakest. That is
 * how the Facebook 2010 clients kept the database cluster down and how
 * Discord 2019's herd reached MongoDB. Under a budget, the load a client puts
 * on a dependency is at most `(1 + ratio) × requests + minPerSecond × window`
 * per window, whatever fails and however long.
 *
 * The guarantee is exact, not approximate: a retry is granted at instant `t`
 * only if the retries in `(t − window, t]` (this one included) are at most
 * `ratio ×` the requests in `(t − window, t]` plus `minPerSecond × window /
 * 1000`. To keep it exact with a ring of buckets, retries are counted over one
 * bucket more than the window (a superset of it) and requests over the
 * window's whole buckets only (a subset), so a retry is forgotten
 * `window + window / buckets` at most after it was spent.
 *
 * Memory is a fixed ring of `buckets + 1` pairs of counters; nothing is kept per call.
 */
export class RetryBudget {
  readonly window: number;
  readonly ratio: number;
  readonly minPerSecond: number;
  readonly buckets: number;
  private readonly floor: number;
  private readonly counts: RollingWindow;

  constructor(budgetOptions?: RetryBudgetOptions) {
    const options = optionsObject('RetryBudget options', budgetOptions);
    this.window = duration('window', or(options.window, 10_000), { positive: true });
    this.ratio = between('ratio', or(options.ratio, 0.2), 0, 1);
    this.minPerSecond = between('minPerSecond', or(options.minPerSecond, 10), 0, 1e9);
    this.buckets = integer('buckets', or(options.buckets, 10), 1);
    if (this.buckets > 1000) throw new ConfigError(`buckets must be at most 1000, got ${this.buckets}`);
    this.floor = (this.minPerSecond * this.window) / 1000;
    this.counts = new RollingWindow(clockOption('clock', options.clock), this.window / this.buckets, this.buckets + 1, 2);
  }

  /** Counts one call to the dependency (its first attempt, not its retries): each one earns `ratio` of a retry. */
  recordRequest(): void {
    this.counts.add(REQUESTS);
  }

  /**
   * Withdraws one retry if the budget allows it, and says whether it did. A
   * caller that gets `false` must not retry: it fails with the error it has.
   */
  tryRetry(): boolean {
    if (this.counts.sum(RETRIES) + 1 > this.allowance() + EPSILON) return false;
    this.counts.add(RETRIES);
    return true;
  }

  /** The window's counts and what may be spent now (see {@link RetryBudgetStats}). */
  stats(): RetryBudgetStats {
    return { requests: this.requests, retries: this.retries, available: this.available };
  }

  /** Whole retries that {@link tryRetry} would grant now. */
  get available(): number {
    return Math.max(0, Math.floor(this.allowance() - this.counts.sum(RETRIES) + EPSILON));
  }

  /** Requests counted in the window (its whole buckets). */
  get requests(): number {
    return this.counts.sum(REQUESTS, this.buckets);
  }

  /** Retries counted in the window (and the bucket before it). */
  get retries(): number {
    return this.counts.sum(RETRIES);
  }

  private allowance(): number {
    return this.ratio * this.counts.sum(REQUESTS, this.buckets) + this.floor;
  }
}
