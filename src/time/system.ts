import { randomInt } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { type Clock, MAX_TIMER_MS, type Timer } from './clock.js';
import { seededRandom } from './random.js';

/**
 * Reads of the OS clock that `now()` may answer from its last reading. See
 * {@link createSystemClock}.
 */
const READS_PER_TICK = 16;

/**
 * Creates a clock on the machine's real time. `now()` is monotonic
 * (`performance.now()` shifted to the epoch), so a wall-clock step from NTP can
 * neither expire a whole cache at once nor make a value look fresh for hours.
 * Pass a `seed` to make jitter reproducible; by default it comes from the OS.
 *
 * Reading the OS clock costs about 70 ns on Node 20, a third of a whole cache
 * hit, so `now()` reuses its last reading (as lru-cache's `ttlResolution`
 * does) until either a 1 ms unref'd timer clears it or 16 reads have used it.
 * The timer bounds the staleness of a reading across idle time; the read count
 * bounds it inside a long run of awaits that never yields to the event loop
 * (where the timer cannot fire). Every damper duration is in milliseconds, so
 * sub-millisecond lag changes no decision that matters.
 */
export function createSystemClock(seed: number = randomInt(2 ** 32)): Clock {
  const origin = performance.timeOrigin;
  const random = seededRandom(seed);
  let reading = 0;
  let uses = 0;
  let armed = false;
  const expire = (): void => {
    reading = 0;
    armed = false;
  };
  return {
    now: () => {
      if (reading !== 0 && ++uses < READS_PER_TICK) return reading;
      reading = origin + performance.now();
      uses = 0;
      if (!armed) {
        armed = true;
        setTimeout(expire, 1).unref();
      }
      return reading;
    },
    precise: () => origin + performance.now(),
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
