import assert from 'node:assert/strict';
import { duration, integer, or } from '../config.js';
import { ConfigError } from '../errors.js';
import { type Clock } from '../time/clock.js';
import { RollingWindow } from './window.js';

/** Options of a rate rule's window: {@link FailureRateRule}, {@link SlowCallRateRule}. */
export interface SampledCallsOptions {
  /**
   * Length of the sliding time window, ms. Default 10 000. Counts are kept in
   * `windowBuckets` fixed buckets, so memory does not grow with traffic (no
   * per-call records), and a bucket older than the window is dropped as time
   * moves on.
   */
  window?: number;
  /** Buckets in the window; `window / windowBuckets` must be a whole number of ms. Default 10. */
  windowBuckets?: number;
  /**
   * Calls the window must hold before the rate may trip. Default 20. One
   * failure out of one call is a 100 % failure rate (opossum #217): without a
   * floor, a quiet service trips on its first error.
   */
  minimumCalls?: number;
}

// Fields of the window.
export const CALLS = 0;
export const FAILURES = 1;
export const SLOW = 2;
export type Field = typeof CALLS | typeof FAILURES | typeof SLOW;

/**
 * The calls of the last `window` ms, with their failures and slow calls: what
 * a rate rule divides (cockatiel's `SamplingBreaker` samples the same way).
 * Made with the rule; its window exists once the breaker gives it a clock.
 *
 * @internal
 */
export class SampledCalls {
  readonly window: number;
  readonly windowBuckets: number;
  readonly minimumCalls: number;
  private counts: RollingWindow | undefined;

  constructor(options: SampledCallsOptions) {
    this.window = duration('window', or(options.window, 10_000), { positive: true });
    this.windowBuckets = integer('windowBuckets', or(options.windowBuckets, 10), 1);
    // A window of three counts per bucket is allocated: a typo of 1e9 must be an error, not 24 GB.
    if (this.windowBuckets > 1000) throw new ConfigError(`windowBuckets must be at most 1000, got ${this.windowBuckets}`);
    const bucketMs = this.window / this.windowBuckets;
    if (!Number.isInteger(bucketMs) || bucketMs < 1) {
      throw new ConfigError(`window (${this.window} ms) must split into windowBuckets (${this.windowBuckets}) buckets of a whole number of ms, at least 1`);
    }
    this.minimumCalls = integer('minimumCalls', or(options.minimumCalls, 20), 1);
  }

  attach(clock: Clock): void {
    assert.equal(this.counts, undefined, 'a rule is attached to one breaker, once');
    this.counts = new RollingWindow(clock, this.window / this.windowBuckets, this.windowBuckets, 3);
  }

  /** Adds one to `field` in the current bucket. */
  add(field: Field): void {
    // Attached by the breaker that took the rule (takeRules), before any call.
    this.counts!.add(field);
  }

  /**
   * Whether `field` over the calls exceeds `threshold`, once the window holds
   * `minimumCalls`. Reads the totals as of the last `add`: checked right
   * after it, at the same instant, a second clock read would buy nothing.
   */
  rateAbove(field: Field, threshold: number): boolean {
    const counts = this.counts!;
    const hits = counts.total(field);
    // Only a failure or a slow call can push a rate over; a success can still bring the count up to minimumCalls.
    if (hits === 0) return false;
    const calls = counts.total(CALLS);
    return calls >= this.minimumCalls && hits > threshold * calls;
  }

  /** `field` over the window now. */
  sum(field: Field): number {
    return this.counts!.sum(field);
  }

  clear(): void {
    this.counts!.clear();
  }
}
