import { type Backoff } from '../schema/common.js';

/**
 * How long a naive client waits before its retry number `retry` (1 for the
 * first), whole ms, per the scenario's `backoff`. Hand-written rather than
 * the library's `Backoff`: this is the clients' own policy, as the outage's
 * code had it (the library's jitter is bounded, never "full"). `jitter` is
 * drawn only for `full-jitter`, so a scenario without it draws nothing.
 */
export function retryDelayMs(backoff: Backoff, retry: number, jitter: () => number): number {
  switch (backoff.kind) {
    case 'none':
      return 0;
    case 'fixed':
      return backoff.delayMs;
    case 'exponential':
      return Math.ceil(capped(backoff, retry));
    case 'full-jitter':
      return Math.floor(jitter() * capped(backoff, retry));
  }
}

/** `min(maxMs, baseMs · 2^(retry−1))`, without overflow for any retry count. */
function capped(backoff: { readonly baseMs: number; readonly maxMs: number }, retry: number): number {
  return Math.min(backoff.maxMs, backoff.baseMs * 2 ** Math.min(retry - 1, 1024));
}
