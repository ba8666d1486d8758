import { performance } from 'node:perf_hooks';
import { clearInterval, clearTimeout, setInterval as realInterval, setTimeout as realTimeout } from 'node:timers';

/**
 * The real run's one clock, and its timers. A real run is measured in real
 * time, every process of it on the same scale: ms since the epoch, read as
 * `performance.timeOrigin + performance.now()`, monotonic within a process
 * and agreeing across processes to well under the second a host sample
 * covers.
 *
 * Bound at load: the runner simulates the same scenario in this process,
 * and a simulation forbids real time for its length (`forbidRealTime`
 * patches `performance.now` and the global timers); a group's timer firing
 * between two steps of it must still read the real clock.
 */
const now = performance.now.bind(performance);
const origin = performance.timeOrigin;

/** Now, in ms since the epoch. */
export function wallNowMs(): number {
  return origin + now();
}

/**
 * Calls `fn` after `ms` without holding the process open (a meter or a
 * deadline must not keep a finished child or runner alive); returns the
 * cancel.
 */
export function after(ms: number, fn: () => void): () => void {
  const timer = realTimeout(fn, Math.max(0, ms));
  timer.unref();
  return () => clearTimeout(timer);
}

/** Calls `fn` every `ms`, as {@link after} does once; returns the cancel. */
export function every(ms: number, fn: () => void): () => void {
  const timer = realInterval(fn, ms);
  timer.unref();
  return () => clearInterval(timer);
}
