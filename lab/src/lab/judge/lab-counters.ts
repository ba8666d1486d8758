import assert from 'node:assert/strict';
import { type Clock } from 'damper';
import { RollingRatio } from 'damper/otel';
import { type CharacteristicGauge, type CharacteristicRecorder, type CharacteristicSeries, padded, put, RATIO_WINDOW_MS, SAMPLE_MS } from './characteristic.js';

/**
 * The characteristic metrics of a naive variant, which has no damper class
 * to instrument: the lab counts the same events in the naive code (a read
 * of its cache, a query to the origin, a retry, a refusal) and divides them
 * as damper/otel divides its own counters, Δnumerator ÷ Δdenominator over
 * the last {@link RATIO_WINDOW_MS} of virtual time, read at the same sample
 * ticks. Counts are cumulative and read at the tick, as the instruments'
 * are, so both variants see an event at the tick's instant the same way.
 *
 * A world registers what its naive system has (a cache, a retrying client,
 * a limiter) and only those gauges exist for it: a world without retries
 * has no retry ratio, rather than one of zero.
 */

/** What a naive cache counts: reads of it, origin queries made for them, stale values served. */
export interface CacheCounts {
  requests: number;
  loads: number;
  stale: number;
}

/** What a naive retrying client counts: first attempts and retries. */
export interface RetryCounts {
  firstAttempts: number;
  retries: number;
}

/** What a naive limiter counts: requests admitted and shed. */
export interface LimiterCounts {
  admitted: number;
  shed: number;
}

/** One ratio of one counted object: where its numerator and denominator come from, read over damper/otel's own window. */
interface Ratio {
  readonly gauge: CharacteristicGauge;
  readonly name: string;
  readonly numerator: () => number;
  readonly denominator: () => number;
  readonly window: RollingRatio;
}

export class LabCounters implements CharacteristicRecorder {
  private readonly ratios: Ratio[] = [];
  private readonly out: Partial<Record<CharacteristicGauge, Record<string, (number | null)[]>>> = {};
  private samples = 0;

  /** `clock`: the run's, which the ratios' window is measured on (as `instrument()`'s is for the damper variant). */
  constructor(private readonly clock: Clock) {}

  /** A cache of the naive system, named `name` ('' when it is the only one): origin amplification and stale ratio. */
  cache(name: string): CacheCounts {
    const c: CacheCounts = { requests: 0, loads: 0, stale: 0 };
    this.ratio('damper.cache.origin_amplification', name, () => c.loads, () => c.requests);
    this.ratio('damper.cache.stale_ratio', name, () => c.stale, () => c.requests);
    return c;
  }

  /** A retrying client of the naive system: retry ratio. */
  retry(name: string): RetryCounts {
    const c: RetryCounts = { firstAttempts: 0, retries: 0 };
    this.ratio('damper.retry.ratio', name, () => c.retries, () => c.firstAttempts);
    return c;
  }

  /** A limiter of the naive system: shed ratio. */
  limiter(name: string): LimiterCounts {
    const c: LimiterCounts = { admitted: 0, shed: 0 };
    this.ratio('damper.limiter.shed_ratio', name, () => c.shed, () => c.admitted + c.shed);
    return c;
  }

  sample(t: number): void {
    assert.equal(this.clock.now(), t, 'a sample is read at its own instant of the run');
    const index = Math.round(t / SAMPLE_MS);
    this.samples = index + 1;
    for (const r of this.ratios) put(this.out, r.gauge, r.name, index, r.window.read(r.numerator(), r.denominator()));
  }

  series(): CharacteristicSeries {
    return padded(this.out, this.samples);
  }

  private ratio(gauge: CharacteristicGauge, name: string, numerator: () => number, denominator: () => number): void {
    this.ratios.push({ gauge, name, numerator, denominator, window: new RollingRatio(this.clock, RATIO_WINDOW_MS) });
  }
}
