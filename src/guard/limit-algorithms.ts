import { between, duration, integer, optionsObject, or, ordered } from '../config.js';

/**
 * How a {@link ConcurrencyLimiter} decides its limit. A fixed number is the
 * simple answer; an adaptive algorithm finds the concurrency a dependency
 * can take from the latency it shows, so the limit falls as the dependency
 * slows, before queues build (the Discord 2019 herd reached MongoDB through
 * code that had no such bound).
 */
export interface LimitAlgorithm {
  /** The current limit, ≥ 1. */
  readonly current: number;
  /** One finished call: its latency, the in-flight count when it started, and whether it failed as a sign of overload. */
  sample(latencyMs: number, inFlight: number, overloaded: boolean): void;
}

/** The range every adaptive limit moves in: min ≤ initial ≤ max, all whole (defaults 1, 20, 1000). */
function bounds(name: string, o: { initial?: number; min?: number; max?: number }): { min: number; max: number; initial: number } {
  const min = integer(`${name}.min`, or(o.min, 1), 1);
  const max = integer(`${name}.max`, or(o.max, 1000), min);
  const initial = integer(`${name}.initial`, or(o.initial, 20), min);
  ordered(`${name}.initial`, initial, `${name}.max`, max);
  return { min, max, initial };
}

export interface AimdOptions {
  initial?: number;
  min?: number;
  max?: number;
  /** A call slower than this is a sign of overload. Default 1000 ms. */
  latencyThresholdMs?: number;
  /** Multiplier applied on overload, in (0, 1). Default 0.9. */
  backoffRatio?: number;
}

/**
 * Additive increase, multiplicative decrease (as TCP, and Netflix
 * concurrency-limits' AIMDLimit): +1 after a full limit's worth of good calls
 * made while the limit was in use, ×`backoffRatio` after a call that was slow
 * or failed with an overload signal.
 */
export class AimdLimit implements LimitAlgorithm {
  private limit: number;
  private readonly min: number;
  private readonly max: number;
  private readonly threshold: number;
  private readonly ratio: number;
  private credit = 0;

  constructor(aimdOptions?: AimdOptions) {
    const options = optionsObject('AimdLimit options', aimdOptions);
    ({ min: this.min, max: this.max, initial: this.limit } = bounds('aimd', options));
    this.threshold = duration('aimd.latencyThresholdMs', or(options.latencyThresholdMs, 1000), { positive: true });
    this.ratio = between('aimd.backoffRatio', or(options.backoffRatio, 0.9), 0.01, 0.99);
  }

  get current(): number {
    return this.limit;
  }

  sample(latencyMs: number, inFlight: number, overloaded: boolean): void {
    if (overloaded || latencyMs > this.threshold) {
      this.limit = Math.max(this.min, Math.floor(this.limit * this.ratio));
      this.credit = 0;
      return;
    }
    // Grow only when the limit was actually the constraint: an idle limiter
    // that never fills must not drift up to `max` and stop protecting anything.
    if (inFlight * 2 < this.limit) return;
    if (++this.credit >= this.limit) {
      this.credit = 0;
      this.limit = Math.min(this.max, this.limit + 1);
    }
  }
}

export interface GradientOptions {
  initial?: number;
  min?: number;
  max?: number;
  /** Tolerated ratio of current to no-load latency before the limit shrinks. Default 2. */
  tolerance?: number;
  /** Calls averaged into the short-term latency. Default 20. */
  smoothing?: number;
}

/**
 * A gradient limit in the spirit of Netflix concurrency-limits' Gradient2 and
 * Envoy's adaptive concurrency: it tracks a long-term (no-load) latency and a
 * short-term one, and sets `limit ← limit · gradient + √limit`, where
 * `gradient = clamp(tolerance · long / short, 0.5, 1)`. When calls slow down
 * the gradient falls below 1 and the limit shrinks proportionally; the √limit
 * headroom lets it probe upward while latency stays flat.
 */
export class GradientLimit implements LimitAlgorithm {
  private limit: number;
  private readonly min: number;
  private readonly max: number;
  private readonly tolerance: number;
  private readonly alphaShort: number;
  private readonly alphaLong: number;
  private short = 0;
  private long = 0;

  constructor(gradientOptions?: GradientOptions) {
    const options = optionsObject('GradientLimit options', gradientOptions);
    ({ min: this.min, max: this.max, initial: this.limit } = bounds('gradient', options));
    this.tolerance = between('gradient.tolerance', or(options.tolerance, 2), 1, 100);
    const smoothing = integer('gradient.smoothing', or(options.smoothing, 20), 1);
    this.alphaShort = 2 / (smoothing + 1);
    this.alphaLong = 2 / (smoothing * 30 + 1);
  }

  get current(): number {
    return Math.round(this.limit);
  }

  sample(latencyMs: number, inFlight: number, overloaded: boolean): void {
    const rtt = Math.max(latencyMs, 0.001);
    if (this.short === 0) {
      this.short = rtt;
      this.long = rtt;
    }
    this.short += this.alphaShort * (rtt - this.short);
    this.long += this.alphaLong * (rtt - this.long);
    // The long-term average drifts up under sustained load; let it recover
    // quickly when latency improves, as Gradient2 does.
    if (this.long > this.short * 2) this.long = this.short * 2;
    if (inFlight * 2 < this.limit && !overloaded) return;
    const gradient = overloaded ? 0.5 : Math.max(0.5, Math.min(1, (this.tolerance * this.long) / this.short));
    const next = this.limit * gradient + Math.sqrt(this.limit);
    // Move smoothly: a fifth of the way per sample.
    this.limit = Math.max(this.min, Math.min(this.max, this.limit * 0.8 + next * 0.2));
  }
}
