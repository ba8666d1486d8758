import { type Clock } from '../time/clock.js';
import { clockOption, duration, hasMethods, integer, oneOf, optionsObject, or, optionalFunction } from '../config.js';
import { ConfigError, OverloadedError } from '../errors.js';
import { classify } from './classify.js';
import { Events, type ListenerErrorOption } from '../events.js';
import { type CallOptions, GATE, type Gate, type GuardContext, guarded, NOT_NOW, notATask, startTask } from './guard.js';
import { type LimitAlgorithm } from './limit-algorithms.js';
import { priorityRank } from './priority.js';
import { type QueueAdmission, type QueuedCall, WaitQueue } from './wait-queue.js';

/** Queueing delay (ms) beyond which arrivals of a priority are shed at once. */
export interface ShedDelays {
  normal?: number;
  low?: number;
  background?: number;
}

/** Options for {@link ConcurrencyLimiter}. */
export interface ConcurrencyLimiterOptions extends ListenerErrorOption {
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

/**
 * Why a {@link ConcurrencyLimiter} refused a call (with `OverloadedError`,
 * or `DeadlineExceededError` when the call's deadline ended its wait):
 * - `busy`: no slot free and the caller would not wait (`wait: false`, a
 *   refresh while a stale value is served): not queued.
 * - `delay`: the queueing delay (the oldest waiter's age) was above the
 *   call's priority's `shedDelay`: refused on arrival.
 * - `full`: the queue held `maxQueue` and the call did not outrank its lowest waiter.
 * - `displaced`: a queued call pushed out of a full queue by one of higher priority.
 * - `timeout`: the call's time to wait ran out: it waited `queueTimeout`, or
 *   CoDel's shorter `target` when it joined a standing queue, or its deadline
 *   came first (`DeadlineExceededError`; on arrival, when it had passed
 *   already). To an operator a deadline met in the queue is the same news as
 *   a timeout, so it has no reason of its own here (the `RateLimiter`, whose
 *   queue is the same, counts it as `deadline`).
 *
 * A caller's own abort is no shed: it is counted nowhere.
 */
export type ShedReason = 'busy' | 'delay' | 'full' | 'displaced' | 'timeout';

/**
 * What a {@link ConcurrencyLimiter} is doing, from {@link ConcurrencyLimiter.stats}.
 * An operator reads in it where the overload goes: `inFlight` pinned at
 * `limit` with `queued` rising is a dependency slower than its traffic;
 * `shed.delay` and `shed.timeout` say callers were refused rather than left
 * waiting until they gave up (the Discord 2019 herd had no such bound);
 * `waited` over `admitted` is the share of calls that paid a queueing delay.
 */
export interface ConcurrencyLimiterStats {
  /** The limit in force now (an adaptive one moves). */
  readonly limit: number;
  /** Tasks holding a slot now. */
  readonly inFlight: number;
  /** Tasks waiting for a slot now. */
  readonly queued: number;
  /** Calls that got a slot, at once or after queueing, since the limiter was made. */
  readonly admitted: number;
  /** Of those, the ones that queued first. */
  readonly waited: number;
  /** Calls refused, by {@link ShedReason}, since the limiter was made. */
  readonly shed: { readonly [R in ShedReason]: number };
}

/** Typed events of a {@link ConcurrencyLimiter}. Listeners run synchronously; what they throw is isolated. */
export interface ConcurrencyLimiterEvents {
  /** A call that had queued got its slot after `waitedMs` (the queueing delay; not emitted for calls admitted at once). */
  admitted: (e: QueueAdmission) => void;
  /** A call was refused, for `reason`. */
  shed: (e: QueuedCall & { readonly reason: ShedReason }) => void;
}

/**
 * A concurrency limit with a bounded, time-limited, priority-ordered queue:
 * the cache's default origin budget, and a guard for any dependency. Beyond
 * the limit, tasks wait; beyond `maxQueue`, `queueTimeout`, their deadline or
 * their priority's queueing delay they are refused with {@link OverloadedError}
 * (`DeadlineExceededError` for the deadline) instead of piling up until every
 * caller times out (the Discord 2019 herd, where nothing bounded what reached
 * the database).
 *
 * Slots go to the highest priority waiting, so critical calls keep their
 * latency while background ones are shed first. The limit is a number or an
 * adaptive algorithm (`AimdLimit`, `GradientLimit`) fed by observed latency.
 *
 * A call that finds a slot free and nobody waiting runs at once: no timer,
 * no allocation, no deadline read (the guard pipeline's hot path). Its
 * deadline is then its task's to honour, through its signal; unlike a
 * `RateLimiter`'s token, which is never given back, the slot returns as soon
 * as the task ends. A call that must wait does so in the `WaitQueue` both
 * limiters share (src/guard/wait-queue.ts): refused before it queues when its
 * deadline has passed, and at its deadline while it waits if that comes
 * before its timeout. This limiter's own policy, on top of that queue:
 * shedding by queueing delay, and CoDel's shorter timeout and newest-first
 * order while the queue stands.
 */
export class ConcurrencyLimiter implements Gate {
  /** @internal */
  readonly [GATE] = true as const;
  readonly maxQueue: number;
  readonly queueTimeout: number;
  private readonly algorithm: LimitAlgorithm | undefined;
  private readonly fixed: number;
  private readonly order: 'fifo' | 'adaptive-lifo';
  private readonly codel: { target: number; interval: number } | undefined;
  private readonly shed: Readonly<Record<number, number>>;
  private readonly clock: Clock;
  private readonly events: Events<ConcurrencyLimiterEvents>;
  private readonly queue: WaitQueue<ShedReason, 'shed'>;
  private running = 0;
  /** Calls admitted without queueing; with the queue's `waited`, all admitted. */
  private atOnce = 0;

  constructor(limiterOptions?: ConcurrencyLimiterOptions) {
    const options = optionsObject('ConcurrencyLimiter options', limiterOptions);
    this.events = new Events<ConcurrencyLimiterEvents>(optionalFunction('onListenerError', options.onListenerError));
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
    this.queue = new WaitQueue<ShedReason, 'shed'>({
      clock: this.clock,
      maxQueue: this.maxQueue,
      events: this.events,
      // No reason of its own for a deadline: it bounded the time to wait, as a timeout does.
      refusals: { event: 'shed', counts: { busy: 0, delay: 0, full: 0, displaced: 0, timeout: 0 }, deadline: 'timeout' },
      awaits: 'a slot',
      reached: () => `limit reached (${this.limit} running)`,
    });
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

  /** What the limiter holds now and what it has admitted and shed since it was made (see {@link ConcurrencyLimiterStats}). */
  stats(): ConcurrencyLimiterStats {
    const { waited } = this.queue;
    return { limit: this.limit, inFlight: this.running, queued: this.queue.size, admitted: this.atOnce + waited, waited, shed: this.queue.refusals() };
  }

  /** Subscribes to an event; returns a function that unsubscribes. */
  on<K extends keyof ConcurrencyLimiterEvents>(event: K, listener: ConcurrencyLimiterEvents[K]): () => void {
    return this.events.on(event, listener);
  }

  off<K extends keyof ConcurrencyLimiterEvents>(event: K, listener: ConcurrencyLimiterEvents[K]): void {
    this.events.off(event, listener);
  }

  /** Runs `fn` under the limit, outside any cache. */
  execute<T>(fn: (signal: AbortSignal) => Promise<T>, options?: CallOptions): Promise<T> {
    return guarded(this, fn, options);
  }

  run<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
    if (typeof task !== 'function') return Promise.reject(notATask('ConcurrencyLimiter', task));
    if (this.admitAtOnce()) return this.started(task, context);
    return this.enqueue(context).then(() => this.started(task, context));
  }

  /** Takes a slot if one is free and nobody queues for it (a queue is served first). */
  private admitAtOnce(): boolean {
    if (this.running >= this.limit || this.queue.size > 0) return false;
    this.running++;
    this.atOnce++;
    return true;
  }

  /**
   * Takes a free slot at once (`pipeline` uses this; see `Gate`). An adaptive
   * limit must time the call: not a token's worth, so the call takes `run`.
   *
   * @internal
   */
  enter(_context: GuardContext): number {
    return this.algorithm === undefined && this.admitAtOnce() ? 0 : NOT_NOW;
  }

  /** @internal */
  leave(_token: number, _context: GuardContext, _ok: boolean, _error: unknown): void {
    this.release();
  }

  /**
   * Runs a task that holds a slot; the slot is released by a reaction on the
   * task's own promise, registered before the caller's, so it is free again
   * when the caller resumes, with no async frame on the caller's path.
   */
  private started<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
    const pending = startTask(task, context.signal);
    const algorithm = this.algorithm;
    if (algorithm === undefined) {
      pending.then(this.released, this.released);
      return pending;
    }
    // Adaptive: time the call and tell the algorithm.
    const started = this.clock.now();
    const inFlight = this.running;
    const sample = (overloaded: boolean): void => {
      algorithm.sample(this.clock.now() - started, inFlight, overloaded);
      this.release();
    };
    pending.then(
      () => sample(false),
      (error: unknown) => sample(classify(error) === 'shed'),
    );
    return pending;
  }

  private readonly released = (): void => this.release();

  private enqueue(context: GuardContext): Promise<void> {
    const rank = priorityRank(context.priority);
    // CoDel reads the queue once room is made: a displacement may have emptied it.
    return this.queue.turnAway(context, rank) ?? this.shedByDelay(context, rank) ?? this.queue.makeRoom(context, rank) ?? this.wait(context, rank);
  }

  /** Refuses an arrival when the queueing delay it would see (the oldest waiter's age) exceeds what its priority allows. */
  private shedByDelay(context: GuardContext, rank: number): Promise<never> | undefined {
    const allowed = this.shed[rank];
    if (allowed === undefined) return undefined;
    const now = this.clock.now();
    const delay = now - this.queue.oldestSince(now);
    if (delay <= allowed) return undefined;
    return this.queue.refuse('delay', context.key, context.priority, new OverloadedError(`shed: queueing delay ${Math.round(delay)} ms exceeds ${allowed} ms for this priority ("${context.key}")`));
  }

  /** Joins the queue, for CoDel's `target` instead of `queueTimeout` when it stands. */
  private wait(context: GuardContext, rank: number): Promise<void> {
    const { codel } = this;
    if (codel !== undefined && this.queue.size > 0 && this.standing(codel)) return this.queue.join(context, rank, Math.min(codel.target, this.queueTimeout), ' (standing queue)');
    return this.queue.join(context, rank, this.queueTimeout);
  }

  private release(): void {
    this.running--;
    const lifo = this.order === 'adaptive-lifo' ? this.codel : undefined;
    // Fill every free slot (an adaptive limit may have grown); newest first once the queue stands.
    while (this.running < this.limit && this.queue.size > 0) {
      this.running++;
      this.queue.admit(lifo !== undefined && this.standing(lifo) ? 'newest' : 'oldest');
    }
  }

  /** CoDel's test: someone has been waiting, without the queue emptying, for longer than `interval`. */
  private standing(codel: { readonly interval: number }): boolean {
    return this.clock.now() - this.queue.waitingSince > codel.interval;
  }
}
