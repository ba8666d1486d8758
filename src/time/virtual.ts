import { optionsObject } from '../config.js';
import { setImmediate as nextMacrotask } from 'node:timers/promises';
import { ArgumentError, ConfigError, describe } from '../errors.js';
import { type Clock, MAX_TIMER_MS, type Timer } from './clock.js';
import { seededRandom } from './random.js';
import { QueuedTimer, TimerQueue } from './timer-queue.js';

/** Options for {@link VirtualClock}. */
export interface VirtualClockOptions {
  /** Virtual time at creation, in ms. Default 0. */
  start?: number;
  /** Seed of the random source; the same seed replays the same jitter. Default 1. */
  seed?: number;
}

/**
 * A clock whose time moves only when told to. Tests and the incident lab run
 * the library's real code on it: `advance` fires due timers in time order and,
 * between timestamps, lets every pending promise continuation run, so async
 * code behaves as it would on a real clock, only without waiting.
 *
 * Timers that share a timestamp fire together, in the order they were set,
 * and continuations are drained once after the batch: one macrotask per batch
 * rather than per timer, which is what keeps long lab runs fast.
 */
export class VirtualClock implements Clock {
  private time: number;
  private seq = 0;
  private readonly queue = new TimerQueue();
  readonly random: () => number;

  constructor(options: VirtualClockOptions = {}) {
    // A NaN start would make every comparison false: no timer ever due, every entry forever fresh.
    const { start = 0, seed = 1 } = optionsObject('VirtualClock options', options);
    if (typeof start !== 'number' || !Number.isFinite(start)) throw new ConfigError(`start must be a finite number of ms, got ${describe(start)}`);
    if (typeof seed !== 'number' || !Number.isSafeInteger(seed)) throw new ConfigError(`seed must be an integer, got ${describe(seed)}`);
    this.time = start;
    this.random = seededRandom(seed);
  }

  now(): number {
    return this.time;
  }

  setTimer(fn: () => void, ms: number): Timer {
    // As the system clock: a negative delay fires at once, a huge one is capped. A NaN would put a timer in the queue that orders before and after nothing.
    if (typeof fn !== 'function') throw new ArgumentError(`setTimer: fn must be a function, got ${typeof fn}`);
    if (typeof ms !== 'number' || Number.isNaN(ms)) throw new ArgumentError(`setTimer: ms must be a number, got ${describe(ms)}`);
    const t = new QueuedTimer(this.queue, this.time + Math.min(Math.max(0, ms), MAX_TIMER_MS), this.seq++, fn);
    this.queue.push(t);
    return t;
  }

  /** Number of timers still scheduled and not cancelled. */
  get pendingTimers(): number {
    return this.queue.live;
  }

  /**
   * Lets all queued promise continuations run without moving time.
   *
   * A `process.nextTick` callback queued from inside a microtask runs only
   * once the microtask queue is empty, including the microtasks queued while
   * draining it. So one hop into a microtask, then one tick, drains every
   * continuation without a trip through the event loop: a setImmediate per
   * step cost a libuv iteration (an epoll call) and was a third of a lab run.
   * {@link yieldToEventLoop} is there for the I/O that does need the loop.
   */
  async settle(): Promise<void> {
    await undefined;
    await this.drain();
  }

  /**
   * {@link settle} for code that already runs inside a microtask (any code
   * after an `await` does): skips the hop into one. From a macrotask, use settle.
   */
  drain(): Promise<void> {
    return new Promise<void>((resolve) => process.nextTick(resolve));
  }

  /** Lets the event loop run (I/O, real timers) once; long simulations call it now and then. */
  async yieldToEventLoop(): Promise<void> {
    await nextMacrotask();
  }

  /**
   * Moves time forward by `ms`, firing every timer due on the way in order and
   * settling continuations after each timestamp. Ends exactly at `now() + ms`.
   */
  async advance(ms: number): Promise<void> {
    if (typeof ms !== 'number' || !(ms >= 0) || !Number.isFinite(ms)) throw new ArgumentError(`advance(ms): ms must be a finite number ≥ 0, got ${describe(ms)}`);
    await this.runUntil(this.time + ms);
  }

  /** Moves time to the absolute instant `t` (no-op if already past it). */
  async advanceTo(t: number): Promise<void> {
    await this.runUntil(Math.max(instant('advanceTo', t), this.time));
  }

  /**
   * Fires timers until none is left, or throws once `limitMs` of virtual time
   * has passed (a periodic timer would otherwise spin forever).
   */
  async runUntilIdle(limitMs = 3_600_000): Promise<void> {
    if (typeof limitMs !== 'number' || !(limitMs >= 0) || !Number.isFinite(limitMs)) throw new ArgumentError(`runUntilIdle(limitMs): limitMs must be a finite number ≥ 0, got ${describe(limitMs)}`);
    const limit = this.time + limitMs;
    await this.settle();
    for (let next = this.queue.peek(); next !== undefined; next = this.queue.peek()) {
      if (next.due > limit) throw new Error(`VirtualClock.runUntilIdle: timers still pending after ${limitMs} ms of virtual time`);
      await this.runUntil(next.due);
    }
  }

  /** When the earliest pending timer is due, or undefined when none is pending. */
  nextTimerAt(): number | undefined {
    return this.queue.peek()?.due;
  }

  /**
   * Moves time to `t` synchronously when no timer is due before it: the lab's
   * engine uses it for the many steps where nothing is scheduled, sparing an
   * await. Throws if a timer would be skipped.
   */
  skipTo(t: number): void {
    instant('skipTo', t);
    const next = this.queue.peek();
    if (next !== undefined && next.due <= t) throw new Error(`VirtualClock.skipTo(${t}): a timer is due at ${next.due}`);
    if (t > this.time) this.time = t;
  }

  /**
   * Like {@link advanceTo}, for a caller that has just settled continuations
   * itself (the lab's engine): skips the settle before the first timer, one
   * macrotask per step saved on the hot loop of a long simulation.
   */
  async runTimersUntil(target: number): Promise<void> {
    instant('runTimersUntil', target);
    for (let next = this.queue.peek(); next !== undefined && next.due <= target; next = this.queue.peek()) {
      const due = next.due;
      this.time = due;
      // Fire the whole batch due at this instant, then settle once.
      while (next !== undefined && next.due === due) {
        this.queue.take()!.fn();
        next = this.queue.peek();
      }
      await this.drain();
    }
    this.time = Math.max(this.time, target);
  }

  private async runUntil(target: number): Promise<void> {
    await this.settle();
    await this.runTimersUntil(target);
  }
}

/** An instant to move to: a finite number of ms, or time would become NaN or infinite. */
function instant(method: string, t: unknown): number {
  if (typeof t !== 'number' || !Number.isFinite(t)) throw new ArgumentError(`${method}(t): t must be a finite number of ms, got ${describe(t)}`);
  return t;
}
