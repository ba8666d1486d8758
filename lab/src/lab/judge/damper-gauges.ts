import { type Attributes } from '@opentelemetry/api';
import { type VirtualClock } from 'damper';
import { instrument, type Instrumentable, RATIO_WINDOW_MS } from 'damper/otel';
import { CHARACTERISTIC_GAUGES, type CharacteristicGauge, type CharacteristicRecorder, type CharacteristicSeries, padded, put, SAMPLE_MS, seriesName } from './characteristic.js';
import { VirtualMeterProvider } from './virtual-meter.js';

/**
 * The characteristic metrics of a damper variant, read through damper/otel's
 * own instruments: each object of the world that has one of the four gauges
 * (a `Cache`, a `Retry`, a `ConcurrencyLimiter`) is instrumented on a
 * virtual meter provider with the run's clock, and each sample collects it.
 * So the lab shows what a dashboard on the shipped instruments would have.
 */

/** Instruments `target` (a `Cache`, a `Retry`, a `ConcurrencyLimiter`), its series named by `attributes`; returns what detaches it (a restarted process's objects are replaced). */
export type Watch = <V>(target: Instrumentable<V>, attributes: Attributes) => () => void;

const GAUGES = new Set<string>(CHARACTERISTIC_GAUGES.map((g) => g.gauge));

export class DamperGauges implements CharacteristicRecorder {
  private readonly meterProvider = new VirtualMeterProvider();
  private readonly out: Partial<Record<CharacteristicGauge, Record<string, (number | null)[]>>> = {};
  private samples = 0;

  constructor(private readonly clock: VirtualClock) {}

  readonly watch: Watch = (target, attributes) => instrument(target, { meterProvider: this.meterProvider, clock: this.clock, ratioWindow: RATIO_WINDOW_MS, attributes });

  sample(t: number): void {
    const index = Math.round(t / SAMPLE_MS);
    this.samples = index + 1;
    // damper/otel observes its counters too; only the four ratios are kept.
    for (const o of this.meterProvider.collect()) if (GAUGES.has(o.instrument)) put(this.out, o.instrument as CharacteristicGauge, seriesName(o.attributes), index, o.value);
  }

  series(): CharacteristicSeries {
    return padded(this.out, this.samples);
  }
}
