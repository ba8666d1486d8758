import { type Clock, type Timer } from '../time/clock.js';
import { systemClock } from '../time/system.js';
import { duration, integer, or } from '../config.js';
import { AbortedError, OverloadedError } from '../errors.js';
import { type Guard, type GuardContext } from './guard.js';

/** Options for {@link ConcurrencyLimiter}. */
export interface ConcurrencyLimiterOptions {
  /** Most tasks running at once. Default 64. */
  limit?: number;
  /** Most tasks waiting for a slot; beyond it, refuse at once. Default 1024. */
  maxQueue?: number;
  /** Longest a task waits for a slot before it is refused, ms. Default 1000. */
  queueTimeout?: number;
  clock?: Clock;
}

interface Waiter {
  grant(): void;
}

/**
 * A fixed concurrency limit with a bounded, time-limited queue: the cache's
 * default origin budget. Beyond `limit` running and `maxQueue` waiting, or
 * after `queueTimeout`, work is refused with {@link OverloadedError} instead of
 * piling up until every caller times out (the Discord 2019 herd, where nothing
 * bounded what reached the database).
 *
 * Permits are handed directly from a finishing task to the oldest waiter, so a
 * burst of new arrivals cannot overtake the queue.
 */
export class ConcurrencyLimiter implements Guard {
  readonly limit: number;
  readonly maxQueue: number;
  readonly queueTimeout: number;
  private readonly clock: Clock;
  private running = 0;
  // A Set keeps insertion order (FIFO) and deletes an abandoned waiter in O(1).
  private readonly waiting = new Set<Waiter>();

  constructor(options: ConcurrencyLimiterOptions = {}) {
    this.limit = integer('limit', or(options.limit, 64), 1);
    this.maxQueue = integer('maxQueue', or(options.maxQueue, 1024), 0);
    this.queueTimeout = duration('queueTimeout', or(options.queueTimeout, 1000), { timer: true });
    this.clock = options.clock ?? systemClock;
  }

  /** Tasks currently holding a slot. */
  get inFlight(): number {
    return this.running;
  }

  /** Tasks waiting for a slot. */
  get queued(): number {
    return this.waiting.size;
  }

  async run<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
    if (this.running < this.limit) {
      this.running++;
    } else {
      if (!context.wait) throw new OverloadedError(`origin budget full (${this.limit} loads running); key "${context.key}" not queued because a value can be served meanwhile`);
      if (this.waiting.size >= this.maxQueue) throw new OverloadedError(`origin budget full (${this.limit} running, ${this.maxQueue} queued); key "${context.key}" refused`);
      await this.enqueue(context);
    }
    try {
      return await task(context.signal);
    } finally {
      this.release();
    }
  }

  private enqueue(context: GuardContext): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const { signal } = context;
      if (signal.aborted) {
        reject(new AbortedError(`load of key "${context.key}" aborted while queued`, signal.reason));
        return;
      }
      const leave = (): void => {
        this.waiting.delete(waiter);
        timer.cancel();
        signal.removeEventListener('abort', onAbort);
      };
      const waiter: Waiter = {
        grant: () => {
          leave();
          resolve();
        },
      };
      const onAbort = (): void => {
        leave();
        reject(new AbortedError(`load of key "${context.key}" aborted while queued`, signal.reason));
      };
      const timer: Timer = this.clock.setTimer(() => {
        leave();
        reject(new OverloadedError(`origin budget full: key "${context.key}" waited ${this.queueTimeout} ms for a slot`));
      }, this.queueTimeout);
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.add(waiter);
    });
  }

  private release(): void {
    const next = this.waiting.values().next();
    if (next.done === true) {
      this.running--;
      return;
    }
    // Hand the slot over: `running` stays the same.
    next.value.grant();
  }
}
