import { AdaptiveThrottle, type Guard, pipeline, Retry, RetryBudget, type VirtualClock } from 'damper';
import { type Watch } from '../damper-gauges.js';
import { type RetryCounts } from '../lab-counters.js';
import { retryDelayMs } from '../retry-delay.js';
import { type Backoff } from '../scenario.js';

/** A call down a stack of client tiers: `onDone` is called once with how it ended. */
export type Call<R> = (onDone: (result: R) => void) => void;

/** A naive stack's shape: its tiers, and each tier's retries and the wait before each. */
export interface NaiveTiersShape {
  readonly layers: number;
  readonly retries: number;
  readonly backoff: Backoff;
}

/**
 * Naive client tiers (a front end calling a mid tier calling the server…):
 * each tier makes up to `1 + retries` attempts at the tier below on any
 * failure, with no budget, at once or after `backoff` (its full jitter drawn
 * from `jitter`); the innermost tier's attempt is `attempt`. Retries at every
 * tier multiply: up to `(1 + retries)^layers` attempts per call. Nobody tells
 * the tiers below that the caller left. Callbacks, not promises: in a storm
 * this runs thousands of times per simulated second. `counts`, when given,
 * counts each tier's first attempts and retries (the tier's index in it).
 */
export function naiveTiers<R>(clock: VirtualClock, shape: NaiveTiersShape, jitter: () => number, attempt: Call<R>, ok: (result: R) => boolean, counts?: readonly RetryCounts[]): Call<R> {
  const tier = (depth: number, onDone: (result: R) => void): void => {
    let tries = 0;
    const counted = counts?.[depth];
    const once = (): void => {
      tries++;
      if (counted !== undefined) {
        if (tries === 1) counted.firstAttempts++;
        else counted.retries++;
      }
      const next = (result: R): void => {
        if (ok(result) || tries > shape.retries) return onDone(result);
        const delay = retryDelayMs(shape.backoff, tries, jitter);
        if (delay > 0) clock.setTimer(once, delay);
        else once();
      };
      if (depth === shape.layers - 1) attempt(next);
      else tier(depth + 1, next);
    };
    once();
  };
  return (onDone) => tier(0, onDone);
}

/** The lab's own damper client tiers' shape: how many, attempts per tier, and the innermost's attempt timeout. */
export interface DamperTiersShape {
  readonly layers: number;
  readonly maxAttempts: number;
  readonly attemptTimeoutMs: number;
}

/**
 * The lab's own guard for damper's client tier `depth` (0: the outermost),
 * where a configuration module gives no `client(tier)`: a real `Retry` with
 * a `RetryBudget` of its own tier; the innermost gives each attempt the
 * attempt timeout and sits behind an `AdaptiveThrottle`, which then sees
 * every attempt that reaches the servers. Its `Retry` is instrumented
 * through `watch`, when given, as `tier=depth`.
 */
export function damperTier(clock: VirtualClock, shape: DamperTiersShape, depth: number, watch?: Watch): Guard {
  const innermost = depth === shape.layers - 1;
  const retry = new Retry({
    maxAttempts: shape.maxAttempts,
    budget: new RetryBudget({ clock }),
    ...(innermost ? { attemptTimeout: shape.attemptTimeoutMs } : {}),
    clock,
  });
  watch?.(retry, { tier: depth });
  return innermost ? pipeline(retry, new AdaptiveThrottle({ clock })) : retry;
}
