import { between, duration, integer, optionsObject, or, ordered } from '../config.js';

/**
 * Passive outlier detection: what the balancer learns from the outcomes of the
 * calls it routes, without sending anything of its own.
 *
 * Only *errors* count. Latency is never an ejection signal: the Columbia
 * Missourian's balancer (March 2010) judged health by response time, ejected
 * the hung web server, then ejected the surviving one because it had become
 * slow under twice the load, and the site was gone (docs/design.md, principle 5).
 * A slow upstream gets less traffic through least-loaded picking instead, and
 * its `maxOutstanding` bounds what it is asked to carry.
 */
export interface OutlierOptions {
  /** Consecutive failed calls that eject an upstream. Default 5; 0 disables the rule. */
  consecutiveErrors?: number;
  /**
   * Success-rate ejection (Envoy's): every `interval` ms, among upstreams with
   * at least `minRequests` calls in the interval (and only when at least
   * `minUpstreams` of them qualify), eject those whose success rate is below
   * mean − `stdevFactor` × stdev of the others'. Compared with the other
   * upstreams, not with a fixed bar, so a failing *dependency* shared by all
   * (their database) ejects nobody. `false` disables the rule.
   */
  successRate?: { interval?: number; minRequests?: number; minUpstreams?: number; stdevFactor?: number } | false;
  /** First ejection time, ms. Each repeated ejection lasts `n` × this (n = ejections so far), up to `maxEjectionMs`. Default 30 000. */
  baseEjectionMs?: number;
  /** Cap on one ejection's length, ms. Default 300 000. */
  maxEjectionMs?: number;
  /**
   * Largest share of upstreams that may be out at once (ejected or failing
   * active checks), strictly enforced (Envoy's `max_ejection_percent` was
   * not, until 2023), and never all of them. Default 0.5.
   */
  maxEjectionShare?: number;
}

/** {@link OutlierOptions} checked and with defaults filled. */
export interface OutlierConfig {
  readonly consecutiveErrors: number;
  readonly successRate: { readonly interval: number; readonly minRequests: number; readonly minUpstreams: number; readonly stdevFactor: number } | undefined;
  readonly baseEjectionMs: number;
  readonly maxEjectionMs: number;
  readonly maxEjectionShare: number;
}

/** Checks `options` once, at construction: a bad value is a {@link ConfigError} naming it. */
export function outlierConfig(outlierOptions?: OutlierOptions): OutlierConfig {
  const options = optionsObject('outliers', outlierOptions);
  const sr = options.successRate === false ? false : optionsObject('outliers.successRate', options.successRate);
  const baseEjectionMs = duration('outliers.baseEjectionMs', or(options.baseEjectionMs, 30_000), { timer: true, positive: true });
  const maxEjectionMs = duration('outliers.maxEjectionMs', or(options.maxEjectionMs, Math.max(300_000, baseEjectionMs)), { timer: true, positive: true });
  ordered('outliers.baseEjectionMs', baseEjectionMs, 'outliers.maxEjectionMs', maxEjectionMs);
  return {
    consecutiveErrors: integer('outliers.consecutiveErrors', or(options.consecutiveErrors, 5), 0),
    successRate:
      sr === false
        ? undefined
        : {
            interval: duration('outliers.successRate.interval', or(sr.interval, 10_000), { positive: true }),
            minRequests: integer('outliers.successRate.minRequests', or(sr.minRequests, 100), 1),
            minUpstreams: integer('outliers.successRate.minUpstreams', or(sr.minUpstreams, 3), 2),
            stdevFactor: between('outliers.successRate.stdevFactor', or(sr.stdevFactor, 1.9), 0, 100),
          },
    baseEjectionMs,
    maxEjectionMs,
    maxEjectionShare: between('outliers.maxEjectionShare', or(options.maxEjectionShare, 0.5), 0, 1),
  };
}

/**
 * Whether one more upstream may be taken out when `out` of `total` already
 * are. Strict: `out + 1` must stay within `floor(share × total)` and below
 * `total`, so the last upstream is never ejected whatever the share says.
 * With two upstreams and the default 0.5, one may go, never both: the
 * Missourian's second server stays in.
 */
export function mayEject(out: number, total: number, maxShare: number): boolean {
  return out + 1 <= Math.floor(maxShare * total + 1e-9) && out + 1 < total;
}

/**
 * How long the `n`-th ejection (n ≥ 1) lasts: `n × base`, capped. Growing,
 * so an upstream that keeps failing as soon as it returns is probed less and
 * less often instead of flapping at a fixed rate.
 */
export function ejectionMs(n: number, config: Pick<OutlierConfig, 'baseEjectionMs' | 'maxEjectionMs'>): number {
  return Math.min(config.baseEjectionMs * Math.max(1, n), config.maxEjectionMs);
}

/**
 * Envoy's success-rate rule over one interval's counts: returns the indices
 * of `rates` below mean − factor × stdev, where only entries with
 * `volume[i] ≥ minRequests` take part, and none is returned when fewer than
 * `minUpstreams` do. When every upstream fails alike, stdev is 0 and the bar
 * equals the mean: nobody is below it, nobody is ejected.
 */
export function successRateOutliers(successes: readonly number[], volumes: readonly number[], config: NonNullable<OutlierConfig['successRate']>): number[] {
  let n = 0;
  let sum = 0;
  let sumSq = 0;
  for (let i = 0; i < volumes.length; i++) {
    if (volumes[i]! < config.minRequests) continue;
    const rate = successes[i]! / volumes[i]!;
    n++;
    sum += rate;
    sumSq += rate * rate;
  }
  if (n < config.minUpstreams) return [];
  const mean = sum / n;
  const stdev = Math.sqrt(Math.max(0, sumSq / n - mean * mean));
  const bar = mean - config.stdevFactor * stdev;
  const out: number[] = [];
  for (let i = 0; i < volumes.length; i++) {
    if (volumes[i]! >= config.minRequests && successes[i]! / volumes[i]! < bar - 1e-12) out.push(i);
  }
  return out;
}
