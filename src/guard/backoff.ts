import { between, duration, optionsObject, or, ordered } from '../config.js';

/** Shape of a capped, jittered exponential backoff. */
export interface BackoffOptions {
  /** Delay after the first failure, ms. Default 100. */
  base?: number;
  /** Cap on any delay, ms. Default 30 000. */
  max?: number;
  /** Growth per consecutive failure. Default 2. */
  factor?: number;
  /**
   * Spread of each delay: the delay is multiplied by a uniform draw from
   * [1 − jitter, 1 + jitter], then capped. Default 0.2. Jitter is what keeps a
   * fleet that failed together from retrying together.
   */
  jitter?: number;
}

/**
 * Capped exponential backoff with bounded jitter (principle 3: no loop whose
 * rate grows with failure). The Facebook 2010 loop re-queried the database on
 * every request that found a bad key; with this, a key that keeps failing costs
 * its origin one attempt per delay, and the delay grows until it reaches `max`.
 *
 * Jitter is symmetric and bounded rather than "full" (uniform in [0, d]): full
 * jitter can draw a near-zero delay, so a key that always fails would be
 * retried several times within its first `base` ms. Bounded jitter keeps the
 * schedule's lower bound at `(1 − jitter) · d`, which is what lets the cache
 * promise at most 5 loader calls for 200 requests in one second.
 */
export class Backoff {
  readonly base: number;
  readonly max: number;
  readonly factor: number;
  readonly jitter: number;

  constructor(backoff?: BackoffOptions) {
    const options = optionsObject('backoff', backoff);
    this.base = duration('backoff.base', or(options.base, 100), { positive: true });
    this.max = duration('backoff.max', or(options.max, 30_000), { positive: true });
    this.factor = between('backoff.factor', or(options.factor, 2), 1, 100);
    this.jitter = between('backoff.jitter', or(options.jitter, 0.2), 0, 1);
    ordered('backoff.base', this.base, 'backoff.max', this.max);
  }

  /** The delay before attempt `failures + 1`, given `failures` ≥ 1 consecutive failures. */
  delay(failures: number, random: () => number): number {
    // Compute the exponent without overflow: past the cap, growth is moot.
    const exp = Math.min(this.max, this.base * this.factor ** Math.min(failures - 1, 1024));
    const spread = 1 - this.jitter + 2 * this.jitter * random();
    return Math.min(this.max, exp * spread);
  }

  /** The smallest delay {@link delay} can return for `failures`: the schedule's lower bound. */
  minDelay(failures: number): number {
    return Math.min(this.max, this.base * this.factor ** Math.min(failures - 1, 1024)) * (1 - this.jitter);
  }
}
