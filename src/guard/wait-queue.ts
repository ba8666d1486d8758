import assert from 'node:assert/strict';
import { type Clock, type Timer } from '../time/clock.js';
import { AbortedError, type DamperError, DeadlineExceededError, OverloadedError } from '../errors.js';
import { onAbort } from './abort.js';
import { effectiveDeadline } from './deadline.js';
import { type GuardContext } from './guard.js';
import { PriorityLanes } from './lanes.js';
import { type Priority } from './priority.js';

/** A call that waited in a queue of a limiter (`ConcurrencyLimiter`, `RateLimiter`), as their events tell of it. */
export interface QueuedCall {
  readonly key: string;
  readonly priority: Priority;
}

/** A queued call that got what it waited for after `waitedMs`: the queueing delay, which calls admitted at once never pay (they have no event). */
export interface QueueAdmission extends QueuedCall {
  readonly waitedMs: number;
}

/** A call waiting in a {@link WaitQueue}, as a limiter choosing whom to serve sees it. */
export interface Waiting extends QueuedCall {
  readonly rank: number;
  /** When it joined. */
  readonly since: number;
}

/** Refusals every wait queue makes, counted under these names by every limiter; a deadline's is counted under the limiter's choice. */
export type QueueRefusal = 'busy' | 'full' | 'displaced' | 'timeout';

/** What a wait queue needs of its limiter's emitter (an `Events`): `admitted`, and the refusal event `E` (`shed`, `refused`) with the reasons `R`. */
export interface QueueEvents<E extends string, R extends string> {
  has(event: 'admitted' | E): boolean;
  emit(event: 'admitted', payload: QueueAdmission): void;
  emit(event: E, payload: QueuedCall & { readonly reason: R }): void;
}

/** Options for a {@link WaitQueue}, all from the limiter that owns it. */
export interface WaitQueueOptions<R extends string, E extends string> {
  readonly clock: Clock;
  readonly maxQueue: number;
  /** The limiter's emitter: `admitted` and the refusal event are emitted on it. */
  readonly events: QueueEvents<E, R | QueueRefusal>;
  readonly refusals: {
    /** The event that tells of a refusal: `shed`, `refused`. */
    readonly event: E;
    /** Every reason the limiter counts, at zero, in the order its stats list them. */
    readonly counts: Record<R | QueueRefusal, number>;
    /** The reason a refusal by the call's deadline is counted under. */
    readonly deadline: R | QueueRefusal;
  };
  /** What a waiter waits for ("a slot", "a token"), as the refusals word it. */
  readonly awaits: string;
  /** The limit an arrival found reached, as its refusal begins ("limit reached (64 running)"). Called only to refuse. */
  reached(rank: number): string;
  /** Called right after a call joined (the RateLimiter admits it if its token is there, else moves its wake-up). */
  readonly joined?: (() => void) | undefined;
  /** Called when the waiter served next left unserved (the RateLimiter moves its wake-up to the new head). */
  readonly headLeft?: (() => void) | undefined;
}

/** A waiter and what settles it: its promise's ends, its timer, its abort subscription. */
class Waiter implements Waiting {
  timer: Timer | undefined;
  unsubscribe: (() => void) | undefined;

  constructor(
    readonly key: string,
    readonly priority: Priority,
    readonly rank: number,
    readonly since: number,
    readonly resolve: () => void,
    readonly reject: (error: DamperError) => void,
  ) {}
}

/**
 * The queue in front of a limit (`ConcurrencyLimiter`'s slots, `RateLimiter`'s
 * tokens): bounded, time-limited, ordered by priority (over
 * {@link PriorityLanes}), and the one place where a limiter's refusals are
 * counted by reason and told by event. The limiter decides when a waiter is
 * served (a slot freed, a token accrued) and which (oldest or newest of the
 * highest rank); the queue owns how calls wait and how they are refused:
 *
 * - An arrival that may not wait is refused at once ({@link WaitQueue.turnAway}): one
 *   whose signal has aborted (`AbortedError`, counted nowhere), one whose
 *   deadline leaves it no time to wait (`DeadlineExceededError`), one with
 *   `wait: false` (`busy`, `OverloadedError`: a value can be served meanwhile).
 * - A full queue (`maxQueue`) makes room for an arrival by refusing its newest
 *   waiter of the lowest rank, if the arrival outranks it (`displaced`), else
 *   refuses the arrival (`full`) ({@link WaitQueue.makeRoom}).
 * - A waiter waits until the earlier of its deadline (the earlier of
 *   `context.deadline` and one carried by its signal) and the limiter's
 *   timeout for it: refused with `DeadlineExceededError` at the first, with
 *   `OverloadedError` (`timeout`) at the second; a tie goes to the deadline.
 *   Its signal's abort takes it out at once with `AbortedError`, counted
 *   nowhere: the caller left, the limit refused nothing.
 *
 * Deadlines are honoured the same way for both limiters because this is the
 * only code that makes a call wait. A call admitted at once never meets the
 * queue: its path is the limiter's, with no allocation, timer or listener.
 */
export class WaitQueue<R extends string, E extends string> {
  private readonly clock: Clock;
  private readonly counts: Record<R | QueueRefusal, number>;
  private readonly deadlineReason: R | QueueRefusal;
  private readonly lanes = new PriorityLanes<Waiter>();
  private admittedAfterWaiting = 0;
  private nonEmptySince = 0;

  constructor(private readonly options: WaitQueueOptions<R, E>) {
    this.clock = options.clock;
    this.counts = { ...options.refusals.counts };
    this.deadlineReason = options.refusals.deadline;
    assert.ok(this.deadlineReason in this.counts, `a deadline's refusal is counted under "${this.deadlineReason}", which is not counted`);
  }

  /** Calls waiting now. */
  get size(): number {
    return this.lanes.size;
  }

  /** Calls that waited and were admitted, since the queue was made. */
  get waited(): number {
    return this.admittedAfterWaiting;
  }

  /** Refusals by reason since the queue was made: a copy, for a limiter's `stats()`. */
  refusals(): Record<R | QueueRefusal, number> {
    return { ...this.counts };
  }

  /** The rank served next, or undefined when nobody waits. */
  get topRank(): number | undefined {
    return this.lanes.topRank;
  }

  /** The oldest waiter of the highest rank: the one served next in FIFO order. */
  get head(): Waiting | undefined {
    return this.lanes.first();
  }

  /** Since when someone has been waiting without the queue emptying in between (CoDel's standing-queue test); meaningful while it is not empty. */
  get waitingSince(): number {
    return this.nonEmptySince;
  }

  /** When the oldest waiter of any rank joined, or `now` when nobody waits: `now` minus it is the queueing delay an arrival would see. */
  oldestSince(now: number): number {
    let oldest = now;
    for (const first of this.lanes.oldestOfEachRank()) if (first.since < oldest) oldest = first.since;
    return oldest;
  }

  /**
   * Refuses at once an arrival that may not wait, or returns undefined: its
   * signal aborted; its deadline has passed (no time is left to wait); or it
   * has `wait: false`.
   */
  turnAway(context: GuardContext, rank: number): Promise<never> | undefined {
    const { key, signal } = context;
    if (signal.aborted) return Promise.reject(new AbortedError(`call for "${key}" aborted before it was admitted`, signal.reason));
    const deadline = effectiveDeadline(context);
    if (deadline !== undefined && deadline <= this.clock.now()) return this.refuse(this.deadlineReason, key, context.priority, new DeadlineExceededError(`deadline for "${key}" passed before it was admitted`, 'admission'));
    if (!context.wait) return this.refuse('busy', key, context.priority, new OverloadedError(`${this.options.reached(rank)}; "${key}" not queued because a value can be served meanwhile`));
    return undefined;
  }

  /** Makes room for an arrival of `rank` in a full queue by refusing the newest of the lowest-ranked waiters, if it outranks them; else refuses the arrival. Undefined when it may join. */
  makeRoom(context: GuardContext, rank: number): Promise<never> | undefined {
    if (this.lanes.size < this.options.maxQueue) return undefined;
    const lowest = this.lanes.lowest();
    if (lowest === undefined || lowest.rank >= rank) return this.refuse('full', context.key, context.priority, new OverloadedError(`${this.options.reached(rank)}, ${this.options.maxQueue} queued; "${context.key}" refused`));
    this.count('displaced', lowest.key, lowest.priority);
    this.leave(lowest, new OverloadedError('shed: a higher-priority call needed the queue slot'));
    return undefined;
  }

  /**
   * Queues a call until the limiter admits it ({@link WaitQueue.admit}) or it is
   * refused: at its deadline, after `timeout` ms if that comes first (its
   * refusal's message ends with `note`), or when its signal aborts. Call
   * {@link WaitQueue.turnAway} and {@link WaitQueue.makeRoom} first.
   */
  join(context: GuardContext, rank: number, timeout: number, note = ''): Promise<void> {
    const { key, signal } = context;
    const priority = context.priority ?? 'normal';
    const now = this.clock.now();
    const deadline = effectiveDeadline(context);
    const byDeadline = deadline !== undefined && deadline - now <= timeout;
    const ms = byDeadline ? deadline - now : timeout;
    return new Promise<void>((resolve, reject) => {
      const waiter = new Waiter(key, priority, rank, now, resolve, reject);
      waiter.timer = this.clock.setTimer(() => {
        if (byDeadline) this.refuseWaiter(waiter, this.deadlineReason, new DeadlineExceededError(`deadline for "${key}" passed while it waited for ${this.options.awaits}`, 'admission'));
        else this.refuseWaiter(waiter, 'timeout', new OverloadedError(`"${key}" waited ${ms} ms for ${this.options.awaits}${note}`));
      }, ms);
      // One listener per signal however many calls share it (a server's shutdown signal, say).
      waiter.unsubscribe = onAbort(signal, () => this.leave(waiter, new AbortedError(`call for "${key}" aborted while waiting for ${this.options.awaits}`, signal.reason)));
      if (this.lanes.size === 0) this.nonEmptySince = now;
      this.lanes.add(waiter);
      this.options.joined?.();
    });
  }

  /** Admits the oldest (FIFO) or the newest (LIFO) waiter of the highest rank; the limiter has given it its slot or token. */
  admit(which: 'oldest' | 'newest'): void {
    const waiter = which === 'oldest' ? this.lanes.first() : this.lanes.last();
    assert.ok(waiter !== undefined, 'admitted a waiter from an empty queue');
    this.remove(waiter);
    this.admittedAfterWaiting++;
    if (this.options.events.has('admitted')) this.options.events.emit('admitted', { key: waiter.key, priority: waiter.priority, waitedMs: this.clock.now() - waiter.since });
    waiter.resolve();
  }

  /** Refuses an arrival: counted, told, and rejected with `error`. */
  refuse(reason: R | QueueRefusal, key: string, priority: Priority | undefined, error: DamperError): Promise<never> {
    this.count(reason, key, priority ?? 'normal');
    return Promise.reject(error);
  }

  private count(reason: R | QueueRefusal, key: string, priority: Priority): void {
    this.counts[reason]++;
    const { events, refusals } = this.options;
    if (events.has(refusals.event)) events.emit(refusals.event, { key, priority, reason });
  }

  private refuseWaiter(waiter: Waiter, reason: R | QueueRefusal, error: DamperError): void {
    this.count(reason, waiter.key, waiter.priority);
    this.leave(waiter, error);
  }

  /** A waiter leaves unserved (refused or aborted). */
  private leave(waiter: Waiter, error: DamperError): void {
    if (this.remove(waiter)) this.options.headLeft?.();
    waiter.reject(error);
  }

  /** Takes `waiter` out with its timer and subscription; says whether it was the one served next. */
  private remove(waiter: Waiter): boolean {
    waiter.timer?.cancel();
    waiter.unsubscribe?.();
    return this.lanes.remove(waiter);
  }
}
