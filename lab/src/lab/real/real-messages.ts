import { type Clock, createSystemClock, type Timer } from 'damper';

/**
 * What the runner and the processes of a real run say to each other over
 * IPC. Time is wall-clock milliseconds (`wallNow`), the one scale every
 * process on the host shares; figures are counted from the run's time zero,
 * which the runner announces a little ahead so every process has it before
 * it comes.
 */

/**
 * The clock every process of a real run reads and schedules on: the
 * library's system clock, so real time enters through one door here too
 * (principle 8). Its timers never keep a process alive: a server's socket
 * or the runner's IPC channel does.
 */
export const realClock: Clock = createSystemClock();

/**
 * Wall-clock ms with sub-ms precision (the system clock's precise reading:
 * the epoch plus a monotonic offset), the one scale every process on the
 * host shares: their readings of one instant agree to well under a ms.
 */
export function wallNow(): number {
  return realClock.precise!();
}

/** Runs `fn` at wall time `at` (at once if it has passed). */
export function at(when: number, fn: () => void): Timer {
  return realClock.setTimer(fn, Math.max(0, when - wallNow()));
}

/** From the runner to a process. */
export type ToProcess =
  /** Time zero of the run, wall ms; faults scheduled from it, figures counted from it. */
  | { readonly type: 'zero'; readonly at: number }
  /** Users: send unmeasured traffic at the first second's load for `seconds`, then wait for it to end, and say `warmed`. */
  | { readonly type: 'warm'; readonly seconds: number }
  /** Send what you counted (`report`). */
  | { readonly type: 'collect' };

/** From a process to the runner. */
export type FromProcess =
  | { readonly type: 'listening'; readonly port: number }
  /** Users: the warm-up's calls, and how many were good: a world that is not healthy before time zero cannot be judged. */
  | { readonly type: 'warmed'; readonly calls: number; readonly good: number }
  /** Users: the horizon has passed and every call sent has ended. */
  | { readonly type: 'finished' }
  | { readonly type: 'report'; readonly report: ProcessReport };

/** What a process counted over the run. */
export interface ProcessReport {
  /** Servers: requests that reached the server, by second from time zero (before its admission: the load it was sent). */
  readonly arrivals?: readonly number[];
  /** Users: every call as [sent ms, ended ms, 1 good | 0 bad], flat, ms from time zero. */
  readonly calls?: readonly number[];
  /** The process's guards' stats at the end (damper), for the record. */
  readonly stats?: unknown;
}
