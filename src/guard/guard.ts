/**
 * What the cache knows about a load when it asks a guard to run it.
 */
export interface GuardContext {
  /** The cache key being loaded. Guards may key their state on it (per shard, per tenant). */
  readonly key: string;
  /** Aborts when the load is abandoned (hard timeout, cache cleared). A guard must honour it. */
  readonly signal: AbortSignal;
  /**
   * False when a caller already has a value to serve (a background refresh):
   * the guard should refuse at once rather than queue, because waiting buys
   * nothing and holds a slot that a caller with nothing to serve needs.
   */
  readonly wait: boolean;
}

/**
 * The seam between the cache and the protection of its origin. Every load the
 * cache makes goes through one `Guard`, so a single bound holds across all keys:
 * per-key coalescing alone does not protect a database from a cold cache over
 * many keys. The default guard is a {@link ConcurrencyLimiter}; the overload
 * controls (breaker, retry budget, throttling, adaptive limits) plug in here.
 *
 * A guard refuses work by rejecting with a `DamperError` (typically
 * `OverloadedError`); the cache treats that as a failed load: stale is served,
 * the key backs off, nothing is evicted.
 */
export interface Guard {
  run<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T>;
}
