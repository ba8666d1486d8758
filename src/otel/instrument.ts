import type * as OtelApi from '@opentelemetry/api';
import type { Attributes, BatchObservableCallback, Histogram, Meter, MeterProvider, Observable } from '@opentelemetry/api';
import { clockOption, duration, optionsObject, or } from '../config.js';
import { ArgumentError, ConfigError, describe } from '../errors.js';
import { type Balancer } from '../balance/balancer.js';
import { type Cache } from '../cache/cache.js';
import { type CircuitBreaker } from '../guard/breaker.js';
import { type RetryBudget } from '../guard/budget.js';
import { type DeadlineGuard } from '../guard/deadline-guard.js';
import { type ConcurrencyLimiter } from '../guard/limiter.js';
import { type RateLimiter } from '../guard/rate.js';
import { type Retry } from '../guard/retry.js';
import { type AdaptiveThrottle } from '../guard/throttle.js';
import { type Clock } from '../time/clock.js';
import { RATIO_WINDOW_MS } from './alerts.js';
import { TARGETS, type TargetSpec } from './catalogue.js';
import { RollingRatio } from './rolling-ratio.js';
import { requirePeer } from '../peer.js';

// Loaded here, not imported: without @opentelemetry/api installed (an optional peer), importing damper/otel says so in one line.
const otel = requirePeer<typeof OtelApi>('damper/otel', '@opentelemetry/api');

/** Options of {@link instrument}. */
export interface InstrumentOptions {
  /** Where the instruments are made. Default: the global one (`metrics.getMeterProvider()`), a no-op until an SDK is registered. */
  meterProvider?: MeterProvider;
  /**
   * Added to every point, to tell this target from others of its kind:
   * `{ 'damper.name': 'users' }`. Two targets of one kind on one meter
   * provider need different attributes, or their points add up.
   */
  attributes?: Attributes;
  /**
   * The clock the characteristic ratios' window is measured on. Default the
   * system clock; the lab passes its virtual clock (principle 8).
   */
  clock?: Clock;
  /** The window of the characteristic ratios, ms. Default 60 000, the shipped rules' `[1m]`. */
  ratioWindow?: number;
}

/** What {@link instrument} accepts: a cache, a guard, a retry budget or a balancer. */
export type Instrumentable<V = unknown, U = unknown> = Cache<V> | CircuitBreaker | ConcurrencyLimiter | RateLimiter | Retry | AdaptiveThrottle | DeadlineGuard | RetryBudget | Balancer<U>;

/** The meter's name: the instrumentation scope every damper instrument is made in. */
const SCOPE = 'damper';

/**
 * Exports what `target` does as OpenTelemetry metrics, and returns the
 * function that detaches them. `target` is a `Cache`, any guard
 * (`CircuitBreaker`, `ConcurrencyLimiter`, `RateLimiter`, `Retry`,
 * `AdaptiveThrottle`, `DeadlineGuard`), a `RetryBudget` or a `Balancer`.
 *
 * Counters, levels and the characteristic ratios are observable instruments:
 * one batch callback reads the target's `stats()` when a reader collects, so
 * a call through the target pays nothing for being observed. Histograms
 * (load duration, queueing delay) are recorded from the target's events, only
 * for calls that load or queue, never on a cache hit or a breaker's success.
 * docs/observability.md lists every instrument and what a rising value means.
 *
 * @throws ArgumentError when `target` is none of these.
 * @throws ConfigError for bad options.
 */
export function instrument<V, U>(target: Instrumentable<V, U>, options?: InstrumentOptions): () => void {
  const o = optionsObject('instrument options', options);
  const spec = TARGETS.find((t) => t.matches(target));
  if (spec === undefined) throw new ArgumentError(`instrument() takes a Cache, a guard, a RetryBudget or a Balancer, got ${describe(target)}`);
  const provider = o.meterProvider === undefined ? otel.metrics.getMeterProvider() : o.meterProvider;
  if (typeof provider !== 'object' || provider === null || typeof provider.getMeter !== 'function') throw new ConfigError(`meterProvider must be an OpenTelemetry MeterProvider, got ${describe(provider)}`);
  const base = attributesOption(o.attributes);
  const clock = clockOption('clock', o.clock);
  const window = duration('ratioWindow', or(o.ratioWindow, RATIO_WINDOW_MS), { positive: true });
  const meter = provider.getMeter(SCOPE);
  return spec.open(target, (s, t) => attach(s, t, meter, base, clock, window));
}

function attach<T, S>(spec: TargetSpec<T, S>, target: T, meter: Meter, base: Attributes, clock: Clock, window: number): () => void {
  const observed = spec.observed.map((s) => ({ spec: s, instrument: observable(meter, s.kind, s.name, s.unit, s.description) }));
  const first = spec.stats(target);
  const ratios = spec.ratios.map((r) => ({
    instrument: meter.createObservableGauge(r.name, { unit: '1', description: r.description }),
    ratio: new RollingRatio(clock, window, r.numerator(first), r.denominator(first)),
    spec: r,
  }));
  const callback: BatchObservableCallback = (result) => {
    const stats = spec.stats(target);
    for (const { spec: s, instrument } of observed) {
      const read = s.read(stats);
      if (typeof read === 'number') result.observe(instrument, read, base);
      else for (const [value, attributes] of read) result.observe(instrument, value, attributes === undefined ? base : { ...base, ...attributes });
    }
    for (const { instrument, ratio, spec: r } of ratios) result.observe(instrument, ratio.read(r.numerator(stats), r.denominator(stats)), base);
  };
  const observables: Observable[] = [...observed.map((x) => x.instrument), ...ratios.map((x) => x.instrument)];
  meter.addBatchObservableCallback(callback, observables);
  const unsubscribes = spec.histograms.map((h) => {
    const histogram: Histogram = meter.createHistogram(h.name, { unit: h.unit, description: h.description, advice: { explicitBucketBoundaries: [...h.boundaries] } });
    return h.subscribe(target, (seconds, attributes) => histogram.record(seconds, { ...base, ...attributes }));
  });
  let attached = true;
  return () => {
    if (!attached) return;
    attached = false;
    meter.removeBatchObservableCallback(callback, observables);
    for (const off of unsubscribes) off();
  };
}

function observable(meter: Meter, kind: 'counter' | 'updown' | 'gauge', name: string, unit: string, description: string): Observable {
  const options = { unit, description };
  switch (kind) {
    case 'counter':
      return meter.createObservableCounter(name, options);
    case 'updown':
      return meter.createObservableUpDownCounter(name, options);
    case 'gauge':
      return meter.createObservableGauge(name, options);
  }
}

/** The base attributes, copied: strings, numbers and booleans only (what every exporter can carry). */
function attributesOption(value: Attributes | undefined): Attributes {
  const copy: Attributes = {};
  for (const [k, v] of Object.entries(optionsObject('attributes', value) as Record<string, unknown>)) {
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') throw new ConfigError(`attributes.${k} must be a string, a number or a boolean, got ${describe(v)}`);
    copy[k] = v;
  }
  return copy;
}
