import { ArgumentError, describe } from '../errors.js';

/**
 * The only door through which damper reads time, schedules work and draws
 * randomness (docs/design.md, principle 8). Every component takes a `Clock`, so the
 * incident lab can run the real library in virtual time and reproduce a run
 * from its seed, and unit tests never sleep.
 */
export interface Clock {
  /** Milliseconds on a monotonic scale. Only differences are meaningful. */
  now(): number;
  /**
   * Run `fn` once after `ms` milliseconds. The timer never keeps the process
   * alive (the library must not hold a CLI or a test runner open): it is the
   * caller's pending promise, not damper's timer, that should do that.
   */
  setTimer(fn: () => void, ms: number): Timer;
  /** A uniformly distributed number in [0, 1) from a seeded source. */
  random(): number;
  /**
   * `now()` without reuse, on the same scale: for durations shorter than a
   * millisecond (a 0.36 ms PostgreSQL load). Optional: a clock whose `now()`
   * is exact (the virtual one) needs none, and {@link preciseNow} falls back
   * to `now()`. The system clock's `now()` reuses readings (it is on the hit
   * path); this is read twice per load, never on a hit.
   */
  precise?(): number;
}

/** The clock's precise reading when it has one, else `now()`: what a duration is measured with. */
export function preciseNow(clock: Clock): number {
  return clock.precise === undefined ? clock.now() : clock.precise();
}

/** A scheduled callback. `cancel` is idempotent and safe after it fired. */
export interface Timer {
  cancel(): void;
}

/** Largest delay a Node timer honours (2^31 − 1 ms, about 24.8 days). */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Resolves after `ms` on `clock`, or rejects with the signal's reason when
 * `signal` aborts first. The timer is cancelled on abort so a long sleep does
 * not linger in the clock's queue.
 */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  if (!isClockLike(clock)) return Promise.reject(new ArgumentError('sleep: clock must be a Clock'));
  if (typeof ms !== 'number' || Number.isNaN(ms)) return Promise.reject(new ArgumentError(`sleep: ms must be a number, got ${describe(ms)}`));
  if (signal !== undefined && !(signal instanceof AbortSignal)) return Promise.reject(new ArgumentError('sleep: signal must be an AbortSignal'));
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      timer.cancel();
      reject(signal?.reason);
    };
    const timer = clock.setTimer(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function isClockLike(clock: unknown): clock is Clock {
  try {
    return typeof clock === 'object' && clock !== null && typeof (clock as Clock).setTimer === 'function';
  } catch {
    return false; // a revoked Proxy
  }
}
