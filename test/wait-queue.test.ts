import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConcurrencyLimiter, DeadlineExceededError, OverloadedError, RateLimiter, VirtualClock } from '../src/index.js';
import { track } from './helpers.js';

/**
 * The wait queue is one mechanism in front of both limiters (src/guard/wait-queue.ts),
 * so what it promises is checked on both: a limiter that made a caller wait
 * past the caller's deadline would spend its queue, and then its dependency's
 * capacity, on work nobody waits for (docs/design.md, principle 3).
 */
interface Subject<L extends ConcurrencyLimiter | RateLimiter> {
  readonly name: string;
  /** A limiter with nothing free: the next call must queue. */
  full(clock: VirtualClock, queueTimeout: number): Promise<L>;
  /** The reason its stats count a refusal by deadline under. */
  readonly deadlineReason: string;
  /** Its refusals by reason, from `stats()`. */
  refusals(limiter: L): Readonly<Record<string, number>>;
  /** The reasons of the refusals it tells from now on, by its event. */
  told(limiter: L): string[];
}

const concurrency: Subject<ConcurrencyLimiter> = {
  name: 'ConcurrencyLimiter',
  async full(clock, queueTimeout) {
    const limiter = new ConcurrencyLimiter({ limit: 1, queueTimeout, codel: false, shedDelay: { normal: 60_000 }, clock });
    void limiter.execute(() => new Promise<void>((r) => clock.setTimer(r, 60_000)));
    return limiter;
  },
  deadlineReason: 'timeout',
  refusals: (limiter) => limiter.stats().shed,
  told(limiter) {
    const reasons: string[] = [];
    limiter.on('shed', (e) => reasons.push(e.reason));
    return reasons;
  },
};

const rate: Subject<RateLimiter> = {
  name: 'RateLimiter',
  async full(clock, queueTimeout) {
    const limiter = new RateLimiter({ rate: 1 / 60, burst: 1, queueTimeout, clock });
    await limiter.execute(async () => 0);
    return limiter;
  },
  deadlineReason: 'deadline',
  refusals: (limiter) => limiter.stats().refused,
  told(limiter) {
    const reasons: string[] = [];
    limiter.on('refused', (e) => reasons.push(e.reason));
    return reasons;
  },
};

function aDeadlineBoundsTheWait<L extends ConcurrencyLimiter | RateLimiter>(s: Subject<L>): void {
  describe(`${s.name}: a deadline bounds the wait`, () => {
    test('a queued call is refused with DeadlineExceededError at its deadline, when it comes before the queue timeout', async () => {
      const clock = new VirtualClock();
      const limiter = await s.full(clock, 1000);
      const reasons = s.told(limiter);
      const timers = clock.pendingTimers;
      let ran = false;
      const waiting = track(limiter.execute(async () => (ran = true), { key: 'k', deadline: 200 }));
      await clock.advance(199);
      assert.equal(waiting.settled, false);
      assert.equal(limiter.queued, 1);
      await clock.advance(1);
      assert.ok(waiting.error instanceof DeadlineExceededError, `got ${String(waiting.error)}`);
      assert.match(waiting.error.message, /deadline for "k" passed while it waited/);
      assert.equal(limiter.queued, 0);
      assert.ok(clock.pendingTimers <= timers, 'the waiter left no timer behind');
      assert.deepEqual(reasons, [s.deadlineReason]);
      assert.equal(s.refusals(limiter)[s.deadlineReason], 1);
      assert.equal(ran, false);
    });

    test('a call whose deadline leaves no time to wait is refused before it queues', async () => {
      const clock = new VirtualClock();
      const limiter = await s.full(clock, 1000);
      await clock.advance(100);
      const timers = clock.pendingTimers;
      const late = track(limiter.execute(async () => 1, { key: 'late', deadline: 100 }));
      assert.equal(limiter.queued, 0, 'never queued');
      assert.equal(clock.pendingTimers, timers, 'no timer set for it');
      await clock.settle();
      assert.ok(late.error instanceof DeadlineExceededError);
      assert.match(late.error.message, /deadline for "late" passed before it was admitted/);
      assert.equal(s.refusals(limiter)[s.deadlineReason], 1);
    });

    test('the queue timeout still bounds a wait whose deadline is later', async () => {
      const clock = new VirtualClock();
      const limiter = await s.full(clock, 300);
      const waiting = track(limiter.execute(async () => 1, { deadline: 5000 }));
      await clock.advance(300);
      assert.ok(waiting.error instanceof OverloadedError && /waited 300 ms/.test(waiting.error.message));
      assert.equal(s.refusals(limiter).timeout, 1);
      assert.equal(limiter.queued, 0);
    });

    test('a deadline at the very instant of the queue timeout is the deadline', async () => {
      const clock = new VirtualClock();
      const limiter = await s.full(clock, 300);
      const waiting = track(limiter.execute(async () => 1, { deadline: 300 }));
      await clock.advance(300);
      assert.ok(waiting.error instanceof DeadlineExceededError);
    });
  });
}

aDeadlineBoundsTheWait(concurrency);
aDeadlineBoundsTheWait(rate);
