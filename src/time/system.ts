import { randomInt } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { type Clock, MAX_TIMER_MS, type Timer } from './clock.js';
import { seededRandom } from './random.js';

/**
 * Creates a clock on the machine's real time. `now()` is monotonic
 * (`performance.now()` shifted to the epoch), so a wall-clock step from NTP can
 * neither expire a whole cache at once nor make a value look fresh for hours.
 * Pass a `seed` to make jitter reproducible; by default it comes from the OS.
 */
export function createSystemClock(seed: number = randomInt(2 ** 32)): Clock {
  const origin = performance.timeOrigin;
  const random = seededRandom(seed);
  return {
    now: () => origin + performance.now(),
    setTimer(fn, ms) {
      const handle = setTimeout(fn, Math.min(Math.max(0, ms), MAX_TIMER_MS));
      handle.unref();
      return { cancel: () => clearTimeout(handle) } satisfies Timer;
    },
    random,
  };
}

/** The default clock: real time, OS-seeded randomness. */
export const systemClock: Clock = createSystemClock();
