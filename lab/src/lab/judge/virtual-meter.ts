import { type Attributes, type BatchObservableCallback, type BatchObservableResult, type Counter, type Gauge, type Histogram, type Meter, type MeterProvider, type MetricOptions, type Observable, type ObservableCounter, type ObservableGauge, type ObservableUpDownCounter, type UpDownCounter } from '@opentelemetry/api';

/**
 * An OpenTelemetry `MeterProvider` on virtual time, for damper/otel's
 * instruments inside a simulation. The SDK's provider stamps every
 * collection with `Date.now()`, which the lab forbids during a run (and
 * which would tie a run to the wall clock); here a collection is a call the
 * lab makes at its own sample ticks: it runs the batch callbacks, then and
 * there, and returns what they observed. Nothing is timestamped: the caller
 * knows the virtual time it collected at.
 *
 * It implements what damper/otel uses: observable gauges, counters and
 * up-down counters fed by batch callbacks (synchronous ones), and
 * histograms, whose records it drops (the lab reads no histogram). The
 * synchronous instruments damper does not use throw, so a change that
 * starts using one shows here instead of losing data.
 */

/** One observation of a collection: the instrument's name, the value, its attributes. */
export interface Observation {
  readonly instrument: string;
  readonly value: number;
  readonly attributes: Attributes;
}

/** An observable instrument: it only carries its name (callbacks are registered on the meter, in batches). */
class VirtualObservable implements ObservableGauge, ObservableCounter, ObservableUpDownCounter {
  constructor(readonly name: string) {}

  addCallback(): void {
    throw new Error(`virtual meter: ${this.name}.addCallback is not supported; use meter.addBatchObservableCallback`);
  }

  removeCallback(): void {
    throw new Error(`virtual meter: ${this.name}.removeCallback is not supported; use meter.removeBatchObservableCallback`);
  }
}

/** A histogram whose records go nowhere. */
const DROPPED: Histogram = { record: () => {} };

interface Batch {
  readonly callback: BatchObservableCallback;
  readonly observables: readonly Observable[];
}

class VirtualMeter implements Meter {
  readonly batches: Batch[] = [];

  constructor(readonly name: string) {}

  createObservableGauge(name: string, _options?: MetricOptions): ObservableGauge {
    return new VirtualObservable(name);
  }

  createObservableCounter(name: string, _options?: MetricOptions): ObservableCounter {
    return new VirtualObservable(name);
  }

  createObservableUpDownCounter(name: string, _options?: MetricOptions): ObservableUpDownCounter {
    return new VirtualObservable(name);
  }

  createHistogram(_name: string, _options?: MetricOptions): Histogram {
    return DROPPED;
  }

  createGauge(name: string): Gauge {
    return unsupported(`createGauge(${name})`);
  }

  createCounter(name: string): Counter {
    return unsupported(`createCounter(${name})`);
  }

  createUpDownCounter(name: string): UpDownCounter {
    return unsupported(`createUpDownCounter(${name})`);
  }

  addBatchObservableCallback(callback: BatchObservableCallback, observables: Observable[]): void {
    this.batches.push({ callback, observables: [...observables] });
  }

  removeBatchObservableCallback(callback: BatchObservableCallback, observables: Observable[]): void {
    // The pair (callback, observables) identifies a registration, as in the SDK.
    const i = this.batches.findIndex((b) => b.callback === callback && b.observables.length === observables.length && b.observables.every((o, k) => o === observables[k]));
    if (i >= 0) this.batches.splice(i, 1);
  }
}

function unsupported(what: string): never {
  throw new Error(`virtual meter: ${what} is not supported (damper/otel uses observable instruments and histograms only)`);
}

export class VirtualMeterProvider implements MeterProvider {
  private readonly meters = new Map<string, VirtualMeter>();

  getMeter(name: string, version?: string): Meter {
    const id = `${name}@${version ?? ''}`;
    let meter = this.meters.get(id);
    if (meter === undefined) this.meters.set(id, (meter = new VirtualMeter(name)));
    return meter;
  }

  /** Callbacks registered on every meter, for the tests: a detached instrument leaves none behind. */
  get callbacks(): number {
    let n = 0;
    for (const m of this.meters.values()) n += m.batches.length;
    return n;
  }

  /**
   * Runs every batch callback now and returns what they observed, in
   * registration order. An observation of an instrument the callback was not
   * registered for is an error, as the SDK reports it; a callback that
   * returns a promise is one too: a collection happens within one instant
   * of virtual time.
   */
  collect(): Observation[] {
    const out: Observation[] = [];
    for (const meter of this.meters.values()) {
      for (const batch of [...meter.batches]) {
        const result: BatchObservableResult = {
          observe(observable, value, attributes = {}) {
            if (!batch.observables.includes(observable)) throw new Error(`virtual meter: a callback observed ${(observable as VirtualObservable).name}, which it was not registered for`);
            out.push({ instrument: (observable as VirtualObservable).name, value, attributes });
          },
        };
        const returned: unknown = batch.callback(result);
        if (returned instanceof Promise) throw new Error(`virtual meter: a batch callback of meter ${meter.name} returned a promise; collections are synchronous`);
      }
    }
    return out;
  }
}
