/**
 * An alert on one of the characteristic metrics: the signal that showed each
 * outage in docs/design.md forming before it was an outage (Bronson et al.,
 * HotOS'21). The repository's `observability/prometheus-rules.yml` holds the
 * same rules in PromQL, and the lab evaluates these on its replays, so a
 * reader sees when each would have fired.
 */
export interface CharacteristicAlert {
  /** The alert's name, as in the Prometheus rules. */
  readonly alert: string;
  /** The gauge it watches (an instrument of `instrument()`). */
  readonly metric: 'damper.cache.origin_amplification' | 'damper.cache.stale_ratio' | 'damper.retry.ratio' | 'damper.limiter.shed_ratio';
  /** It fires when the gauge stays above this ... */
  readonly above: number;
  /** ... for this long, ms (Prometheus `for:`). */
  readonly forMs: number;
  /** What it means, for the page an operator gets. */
  readonly summary: string;
}

/** The window the characteristic ratios are measured over, ms: `instrument()`'s default and the rules' `[1m]`. */
export const RATIO_WINDOW_MS = 60_000;

/**
 * The shipped alerts. Thresholds are starting points for a service whose
 * cache absorbs most reads (docs/observability.md says how to set your own:
 * about three times the value in a normal week).
 */
export const characteristicAlerts: readonly CharacteristicAlert[] = Object.freeze([
  {
    alert: 'DamperOriginAmplificationHigh',
    metric: 'damper.cache.origin_amplification',
    above: 0.5,
    forMs: 30_000,
    summary: 'More than half of the reads reach the origin: the cache has stopped absorbing load (Facebook 2010: every read became a query).',
  },
  {
    alert: 'DamperStaleServedHigh',
    metric: 'damper.cache.stale_ratio',
    above: 0.1,
    forMs: 30_000,
    summary: 'More than one read in ten is served stale: the origin is failing or slow, and the cache is covering for it.',
  },
  {
    alert: 'DamperRetryRatioHigh',
    metric: 'damper.retry.ratio',
    above: 0.1,
    forMs: 30_000,
    summary: 'Retries exceed a tenth of first attempts: a dependency is failing, and retries are adding load to it (the sustaining effect of most metastable failures).',
  },
  {
    alert: 'DamperShedRatioHigh',
    metric: 'damper.limiter.shed_ratio',
    above: 0.01,
    forMs: 30_000,
    summary: 'More than 1% of calls are shed: demand exceeds what the limiter admits, and callers are being refused.',
  },
] as const satisfies readonly CharacteristicAlert[]);
