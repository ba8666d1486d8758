import { clockOption, duration } from '../config.js';
import { ArgumentError, describe } from '../errors.js';
import { type Clock } from '../time/clock.js';

/** One reading of a ratio's two counters. */
interface Sample {
  readonly at: number;
  readonly numerator: number;
  readonly denominator: number;
}

/** At most this many samples per window: a reader that collects every millisecond must not grow memory. */
const SAMPLES_PER_WINDOW = 64;

/**
 * A ratio of two cumulative counters over the last `windowMs` of a clock,
 * computed when it is read (at a metrics collection). A ratio since the
 * process started would be useless for alerting, so each read is
 * Δnumerator ÷ Δdenominator from the newest sample at or before the window's
 * start: a window of at least `windowMs`, longer by up to one collection
 * interval. Nothing runs between reads; a call on the hot path pays nothing.
 *
 * Exported so that counters of your own (a system damper does not wrap, or
 * the lab's naive variants) are read over the same window, by the same rule,
 * as the characteristic gauges `instrument()` exports.
 *
 * @example
 * const amplification = new RollingRatio(clock, 60_000, queries, reads);
 * // at each collection:
 * const now = amplification.read(queries, reads);
 */
export class RollingRatio {
  private readonly samples: Sample[] = [];

  /**
   * Starts the window at the counters' values now (`numerator`,
   * `denominator`, default 0: a counter that starts with its object).
   *
   * @throws ConfigError for a clock that is not one or a window that is not a positive duration.
   * @throws ArgumentError for counters that are not finite numbers.
   */
  constructor(clock: Clock, windowMs: number, numerator = 0, denominator = 0) {
    this.clock = clockOption('clock', clock);
    this.windowMs = duration('windowMs', windowMs, { positive: true });
    checkCounters(numerator, denominator);
    this.samples.push({ at: this.clock.now(), numerator, denominator });
  }

  private readonly clock: Clock;
  private readonly windowMs: number;

  /**
   * The ratio over the window ending now, given the counters now; 0 when the denominator has not moved.
   *
   * @throws ArgumentError for counters that are not finite numbers (a NaN kept would poison every later read).
   */
  read(numerator: number, denominator: number): number {
    checkCounters(numerator, denominator);
    const now = this.clock.now();
    const start = now - this.windowMs;
    // Keep the newest sample at or before the window's start: it is where the window begins.
    while (this.samples.length >= 2 && this.samples[1]!.at <= start) this.samples.shift();
    const first = this.samples[0]!;
    const last = this.samples[this.samples.length - 1]!;
    if (now - last.at >= this.windowMs / SAMPLES_PER_WINDOW) this.samples.push({ at: now, numerator, denominator });
    const moved = denominator - first.denominator;
    return moved > 0 ? (numerator - first.numerator) / moved : 0;
  }
}

function checkCounters(numerator: unknown, denominator: unknown): void {
  if (typeof numerator !== 'number' || !Number.isFinite(numerator)) throw new ArgumentError(`numerator must be a finite number, got ${describe(numerator)}`);
  if (typeof denominator !== 'number' || !Number.isFinite(denominator)) throw new ArgumentError(`denominator must be a finite number, got ${describe(denominator)}`);
}
