import { type VirtualClock } from 'damper';
import { type RetryCounts } from '../judge/lab-counters.js';
import { retryDelayMs } from '../engine/retry-delay.js';
import { type Backoff } from '../schema/common.js';

/**
 * A call for `key` down a stack of client tiers: `onDone` is called once
 * with how it ended. The key is an argument, not captured, so a stack is
 * built once and serves every call (a stack of closures per call was a
 * third of what a naive run allocated).
 */
export type Call<R> = (key: string, onDone: (result: R) => void) => void;

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
 * With `patienceMs` (the users' own client, which lives in their process),
 * no retry starts once that long has passed since the call began: the
 * user's abort ends the retry loop there, as it ends undici's.
 */
export function naiveTiers<R>(clock: VirtualClock, shape: NaiveTiersShape, jitter: () => number, attempt: Call<R>, ok: (result: R) => boolean, counts?: readonly RetryCounts[], patienceMs?: number): Call<R> {
  const tier = (depth: number, key: string, onDone: (result: R) => void): void => {
    let tries = 0;
    const counted = counts?.[depth];
    const started = clock.now();
    // The caller gave up (the users' own client, in their process: their abort ends its retries, as undici's does).
    const gaveUp = (): boolean => patienceMs !== undefined && depth === 0 && clock.now() - started >= patienceMs;
    let last: R;
    const once = (): void => {
      if (tries > 0 && gaveUp()) return onDone(last);
      tries++;
      if (counted !== undefined) {
        if (tries === 1) counted.firstAttempts++;
        else counted.retries++;
      }
      const next = (result: R): void => {
        if (ok(result) || tries > shape.retries || gaveUp()) return onDone(result);
        last = result;
        const delay = retryDelayMs(shape.backoff, tries, jitter);
        if (delay > 0) clock.setTimer(once, delay);
        else once();
      };
      if (depth === shape.layers - 1) attempt(key, next);
      else tier(depth + 1, key, next);
    };
    once();
  };
  return (key, onDone) => tier(0, key, onDone);
}
