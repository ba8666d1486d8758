/**
 * The characteristic metrics (Bronson et al., "Metastable failures in
 * distributed systems", HotOS'21): the ratios in which a feedback loop shows
 * before it takes a system down. damper/otel exports them as gauges; the lab
 * samples them once a simulated second, for both variants: the damper
 * variant through damper/otel's own instruments (damper-gauges.ts), the naive
 * one from the lab's counters with the same definitions (lab-counters.ts).
 */

/**
 * The gauges, by their OpenTelemetry names, what each divides, and whether
 * it is a share (at most 1) or may pass 1: retries per first attempt, or
 * read-driven loads per read (a restarted server's first reads: 2.5 in
 * missourian-2010's damper).
 */
export const CHARACTERISTIC_GAUGES = [
  { gauge: 'damper.cache.origin_amplification', title: 'Origin amplification', ratio: 'read-driven loads ÷ requests', of: 'cache', share: false },
  { gauge: 'damper.cache.stale_ratio', title: 'Stale ratio', ratio: 'stale served on error, backoff or timeout ÷ requests', of: 'cache', share: true },
  { gauge: 'damper.retry.ratio', title: 'Retry ratio', ratio: 'retries ÷ first attempts', of: 'retrying client', share: false },
  { gauge: 'damper.limiter.shed_ratio', title: 'Shed ratio', ratio: 'shed ÷ (admitted + shed)', of: 'concurrency limiter', share: true },
] as const;

export type CharacteristicGauge = (typeof CHARACTERISTIC_GAUGES)[number]['gauge'];

/**
 * Each ratio is Δnumerator ÷ Δdenominator over damper/otel's `RATIO_WINDOW_MS`
 * (its default `ratioWindow`, the shipped rules' `[1m]`) of virtual time
 * before the sample, 0 when the denominator did not move. The lab passes it
 * to `instrument()` explicitly and uses it for the naive counters, so both
 * variants are read over the same window.
 */
export { RATIO_WINDOW_MS } from 'damper/otel';

/** The lab reads the gauges once a simulated second, at its start: sample `i` is the value at `i` s. */
export const SAMPLE_MS = 1000;

/**
 * One gauge's samples per series (one instrumented object, named by its
 * attributes, `process=0`; '' when the variant has one): value `i` is the
 * gauge at `i` s, null where that series did not exist (a process not yet
 * started, or since restarted).
 */
export type GaugeSeries = Readonly<Record<string, readonly (number | null)[]>>;

/** A variant's characteristic metrics: only the gauges it has (a world without retries has no retry ratio). */
export type CharacteristicSeries = Readonly<Partial<Record<CharacteristicGauge, GaugeSeries>>>;

/** What records a variant's characteristic metrics during a run. */
export interface CharacteristicRecorder {
  /** Reads every gauge at virtual time `t` (a multiple of {@link SAMPLE_MS}). */
  sample(t: number): void;
  /** What was sampled, once the run is over. */
  series(): CharacteristicSeries;
}

/** A series' name: its attributes as `k=v` pairs in key order ('' for none). */
export function seriesName(attributes: Readonly<Record<string, unknown>>): string {
  return Object.keys(attributes)
    .sort()
    .map((k) => `${k}=${String(attributes[k])}`)
    .join(',');
}

/**
 * Puts `value` at sample `index` of the series `name` of `gauge` in `into`,
 * the seconds before it null (a series that appears mid-run).
 */
export function put(into: Partial<Record<CharacteristicGauge, Record<string, (number | null)[]>>>, gauge: CharacteristicGauge, name: string, index: number, value: number): void {
  const byName = (into[gauge] ??= {});
  const values = (byName[name] ??= []);
  while (values.length < index) values.push(null);
  values[index] = value;
}

/** The series padded with null to `n` samples (a series that ended before the run did). */
export function padded(series: Partial<Record<CharacteristicGauge, Record<string, (number | null)[]>>>, n: number): CharacteristicSeries {
  for (const byName of Object.values(series)) for (const values of Object.values(byName)) while (values.length < n) values.push(null);
  return series;
}
