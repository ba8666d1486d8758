import { type Clock, type Timer } from '../time/clock.js';
import { clockOption, duration, hasMethods, integer, oneOf, optionsObject, or } from '../config.js';
import { AbortedError, ConfigError, type DamperError, OverloadedError } from '../errors.js';
import { onAbort } from './abort.js';
import { type CallOptions, type Guard, type GuardContext, guarded, notATask } from './guard.js';
import { type LimitAlgorithm } from './limit-algorithms.js';
import { PriorityLanes } from './lanes.js';
import { priorityRank } from './priority.js';

/** Queueing delay (ms) beyond which arrivals of a priority are shed at once. */
export interface ShedDelays {
  normal?: number;
  low?: number;
  background?: number;
}

/** Options for {@link ConcurrencyLimiter}. */
export interface ConcurrencyLimiterOptions {
  /** Most tasks running at once: a number, or an adaptive {@link LimitAlgorithm}. Default 64. */
  limit?: number | LimitAlgorithm;
  /** Most tasks waiting for a slot; beyond it, the lowest priority is refused. Default 1024. */
  maxQueue?: number;
  /** Longest a task waits for a slot before it is refused, ms. Default 1000. */
  queueTimeout?: number;
  /**
   * Order within one priority: `fifo`, or `adaptive-lifo` (default): first in,
   * first out while the queue drains, newest first once it stands (CoDel's
   * test, below). Under overload the oldest waiters are the ones about to time
   * out anyway; serving the newest keeps latency bounded for most callers
   * instead of every caller timing out (Facebook, "Fail at Scale").
   */
  order?: 'fifo' | 'adaptive-lifo';
  /**
   * Controlled delay (CoDel, as in "Fail at Scale"): when the queue has not
   * been empty for `interval` ms it is standing, and newly queued tasks may
   * wait only `target` ms instead of `queueTimeout`. Default { target: 5, interval: 100 }; false disables.
   */
  codel?: { target: number; interval: number } | false;
  /**
   * Priority shedding, keyed on queueing delay (not on response time, which
   * punishes the dependency's slowness twice): an arrival is refused at once
   * when the oldest queued task has waited longer than its priority allows.
   * Defaults: normal 500 ms, low 50 ms, background 5 ms; critical is never
   * shed by delay.
   */
  shedDelay?: ShedDelays;
  clock?: Clock;
}

interface Waiter {
  readonly rank: number;
  readonly since: number;
  grant(): void;
  refuse(error: DamperError): void;
}

/**
 * A concurrency limit with a bounded, time-limited, priority-ordered queue:
 * the cache's default origin budget, and a guard for any dependency. Beyond
 * the limit, tasks wait; beyond `maxQueue`, `queueTimeout` or their priority's
 * queueing delay they are refused with {@link OverloadedError} instead of piling
 * up until every caller times out (the Discord 2019 herd, where nothing bounded
 * what reached the database).
 *
 * Slots go to the highest priority waiting, so critical calls keep their
 * latency while background ones are shed first. The limit is a number or an
 * adaptive algorithm (`AimdLimit`, `GradientLimit`) fed by observed latency.
 */
export class ConcurrencyLimiter implements Guard {
  readonly maxQueue: number;
  readonly queueTimeout: number;
  private readonly algorithm: LimitAlgorithm | undefined;
  private readonly fixed: number;
  private readonly order: 'fifo' | 'adaptive-lifo';
  private readonly codel: { target: number; interval: number } | undefined;
  private readonly shed: Readonly<Record<number, number>>;
  private readonly clock: Clock;
  private running = 0;
  private readonly queue = new PriorityLanes<Waiter>();
  /** When the queue was last empty: CoDel's "standing queue" test. */
  private emptySince = 0;

  constructor(limiterOptions?: ConcurrencyLimiterOptions) {
    const options = optionsObject('ConcurrencyLimiter options', limiterOptions);
    const limit = or(options.limit, 64);
    if (typeof limit === 'number') {
      this.fixed = integer('limit', limit, 1);
      this.algorithm = undefined;
    } else {
      if (!hasMethods(limit, ['sample'])) throw new ConfigError('limit must be a number or a LimitAlgorithm (an object with sample() and current)');
      this.fixed = 0;
      this.algorithm = limit;
    }
    this.maxQueue = integer('maxQueue', or(options.maxQueue, 1024), 0);
    this.queueTimeout = duration('queueTimeout', or(options.queueTimeout, 1000), { timer: true });
    this.order = oneOf('order', or(options.order, 'adaptive-lifo'), ['fifo', 'adaptive-lifo']);
    const codel = options.codel === false ? false : optionsObject('codel', options.codel);
    this.codel = codel === false ? undefined : { target: duration('codel.target', or(codel.target, 5), { timer: true }), interval: duration('codel.interval', or(codel.interval, 100), { positive: true }) };
    const shed = optionsObject('shedDelay', options.shedDelay);
    this.shed = {
      [priorityRank('normal')]: duration('shedDelay.normal', or(shed.normal, 500)),
      [priorityRank('low')]: duration('shedDelay.low', or(shed.low, 50)),
      [priorityRank('background')]: duration('shedDelay.background', or(shed.background, 5)),
    };
    this.clock = clockOption('clock', options.clock);
    this.emptySince = this.clock.now();
  }

  /** The limit in force now. */
  get limit(): number {
    return this.algorithm === undefined ? this.fixed : Math.max(1, Math.floor(this.algorithm.current));
  }

  /** Tasks currently holding a slot. */
  get inFlight(): number {
    return this.running;
  }

  /** Tasks waiting for a slot. */
  get queued(): number {
    return this.queue.size;
  }

  /** Runs `fn` under the limit, outside any cache. */
  execute<T>(fn: (signal: AbortSignal) => Promise<T>, options?: CallOptions): Promise<T> {
    return guarded(this, fn, options);
  }

  async run<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
    if (typeof task !== 'function') throw notATask('ConcurrencyLimiter', task);
    if (this.running < this.limit && this.queue.size === 0) this.running++;
    else await this.enqueue(context);
    if (this.algorithm === undefined) {
      try {
        return await task(context.signal);
      } finally {
        this.release();
      }
    }
    // Adaptive: time the call and tell the algorithm.
    const started = this.clock.now();
    const inFlight = this.running;
    let overloaded = false;
    try {
      return await task(context.signal);
    } catch (error) {
      overloaded = error instanceof OverloadedError;
      throw error;
    } finally {
      this.algorithm.sample(this.clock.now() - started, inFlight, overloaded);
      this.release();
    }
  }

  private enqueue(context: GuardContext): Promise<void> {
    const rank = priorityRank(context.priority);
    const now = this.clock.now();
    const { key, signal } = context;
    if (signal.aborted) return Promise.reject(new AbortedError(`call for "${key}" aborted before it was queued`, signal.reason));
    if (!context.wait) return Promise.reject(new OverloadedError(`limit reached (${this.limit} running); "${key}" not queued because a value can be served meanwhile`));
    // Shed by queueing delay: the oldest waiter's age is the delay this call would see.
    const delay = now - this.oldestSince(now);
    const allowed = this.shed[rank];
    if (allowed !== undefined && delay > allowed) return Promise.reject(new OverloadedError(`shed: queueing delay ${Math.round(delay)} ms exceeds ${allowed} ms for this priority ("${key}")`));
    if (this.queue.size >= this.maxQueue) {
      // Full: make room by refusing the lowest-ranked waiter, if this call outranks it.
      const lowest = this.queue.lowest();
      if (lowest === undefined || lowest.rank >= rank) return Promise.reject(new OverloadedError(`limit reached (${this.limit} running, ${this.maxQueue} queued); "${key}" refused`));
      lowest.refuse(new OverloadedError('shed: a higher-priority call needed the queue slot'));
    }
    const standing = this.codel !== undefined && this.queue.size > 0 && now - this.emptySince > this.codel.interval;
    const timeout = standing ? Math.min(this.codel!.target, this.queueTimeout) : this.queueTimeout;
    return new Promise<void>((resolve, reject) => {
      const leave = (): void => {
        this.remove(waiter);
        timer.cancel();
        unsubscribe();
      };
      const waiter: Waiter = {
        rank,
        since: now,
        grant: () => {
          leave();
          resolve();
        },
        refuse: (error) => {
          leave();
          reject(error);
        },
      };
      const timer: Timer = this.clock.setTimer(() => waiter.refuse(new OverloadedError(`"${key}" waited ${timeout} ms for a slot${standing ? ' (standing queue)' : ''}`)), timeout);
      // One listener per signal however many calls share it (a server's shutdown signal, say).
      const unsubscribe = onAbort(signal, () => waiter.refuse(new AbortedError(`call for "${key}" aborted while queued`, signal.reason)));
      this.add(waiter);
    });
  }

  private release(): void {
    this.running--;
    // Fill every free slot (an adaptive limit may have grown).
    while (this.running < this.limit && this.queue.size > 0) {
      const next = this.next();
      this.running++;
      next.grant();
    }
  }

  /** The waiter to serve next: highest priority; within it oldest first, or newest once the queue stands. */
  private next(): Waiter {
    const now = this.clock.now();
    const lifo = this.order === 'adaptive-lifo' && this.codel !== undefined && now - this.emptySince > this.codel.interval;
    return (lifo ? this.queue.last() : this.queue.first())!;
  }

  private oldestSince(now: number): number {
    let oldest = now;
    for (const first of this.queue.oldestOfEachRank()) if (first.since < oldest) oldest = first.since;
    return oldest;
  }

  private add(w: Waiter): void {
    if (this.queue.size === 0) this.emptySince = this.clock.now();
    this.queue.add(w);
  }

  private remove(w: Waiter): void {
    const before = this.queue.size;
    this.queue.remove(w);
    if (this.queue.size < before && this.queue.size === 0) this.emptySince = this.clock.now();
  }

}
