import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, Dependency, type PickedUpstream, RetryBudget, VirtualClock } from '../src/index.js';
import { settleOn } from './helpers.js';

// Hedged requests in a Dependency, in virtual time: what a hedge buys (the
// slow upstream's tail), what bounds it (the retry budget), and what it costs
// without that bound (a storm of its own).


describe('hedging is spent from the retry budget (principle 3): a hedge is a retry sent early', () => {
  /** Upstreams a (slow: 500 ms) and b (fast: 10 ms); which one a call starts on is the balancer's. */
  function slowAndFast() {
    const clock = new VirtualClock({ seed: 3 });
    const log: string[] = [];
    const cancelled: string[] = [];
    const attempt = (u: PickedUpstream<string>, signal: AbortSignal): Promise<string> => {
      log.push(u.id);
      return new Promise((resolve, reject) => {
        const timer = clock.setTimer(() => resolve(u.id), u.id === 'a' ? 500 : 10);
        signal.addEventListener(
          'abort',
          () => {
            timer.cancel();
            cancelled.push(u.id);
            reject(signal.reason);
          },
          { once: true },
        );
      });
    };
    return { clock, log, cancelled, attempt };
  }

  test('after the delay, one more attempt to the other upstream; the first answer wins and the slower is cancelled', async () => {
    const { clock, log, cancelled, attempt } = slowAndFast();
    const d = new Dependency<string>({ upstreams: [{ id: 'a', target: 'a' }, { id: 'b', target: 'b' }], clock, breaker: false, throttle: false, hedge: { after: 50 }, budget: new RetryBudget({ clock, ratio: 1, minPerSecond: 1_000 }) });
    const durations: number[] = [];
    for (let i = 0; i < 40; i++) {
      const t0 = clock.now();
      const out = await settleOn(clock, d.call(attempt));
      assert.equal(out.error, undefined);
      durations.push(clock.now() - t0);
    }
    // A call that started on a: hedged to b at 50 ms, answered at 60 ms; never 500.
    assert.ok(Math.max(...durations) <= 60, `the slowest call took ${Math.max(...durations)} ms`);
    const { sent, won } = d.stats().hedges!;
    assert.ok(sent > 0 && won === sent, `every hedge went to b and won: ${sent} sent, ${won} won`);
    assert.equal(cancelled.filter((id) => id === 'a').length, sent, 'each slow first attempt was cancelled');
    assert.ok(!log.some((id, i) => id === 'a' && log[i + 1] === 'a'), 'a hedge never goes to the upstream already trying');
  });

  test('no budget left, no hedge: the calls wait for the slow upstream', async () => {
    const { clock, attempt } = slowAndFast();
    const budget = new RetryBudget({ clock, ratio: 0.0001, minPerSecond: 0.0001 });
    const d = new Dependency<string>({ upstreams: [{ id: 'a', target: 'a' }, { id: 'b', target: 'b' }], clock, breaker: false, throttle: false, hedge: { after: 50 }, budget });
    for (let i = 0; i < 20; i++) await settleOn(clock, d.call(attempt));
    const h = d.stats().hedges!;
    assert.equal(h.sent, 0);
    assert.ok(h.budgetRefusals > 0, 'hedges were due and refused by the budget');
  });

  test('a call that may not be repeated is never hedged; one upstream alone is never hedged to itself', async () => {
    const { clock, log, attempt } = slowAndFast();
    const d = new Dependency<string>({ upstreams: [{ id: 'a', target: 'a' }, { id: 'b', target: 'b' }], clock, breaker: false, throttle: false, hedge: { after: 50 }, budget: new RetryBudget({ clock, ratio: 1, minPerSecond: 1_000 }) });
    for (let i = 0; i < 20; i++) await settleOn(clock, d.call(attempt, { idempotent: false }));
    assert.equal(d.stats().hedges!.sent, 0);
    assert.equal(log.length, 20);
    const alone = new Dependency<string>({ upstreams: [{ id: 'a', target: 'a' }], clock, breaker: false, throttle: false, hedge: { after: 50 } });
    await settleOn(clock, alone.call(attempt));
    assert.deepEqual(alone.stats().hedges, { sent: 0, won: 0, budgetRefusals: 0, noUpstream: 1 });
  });

  test('a percentile delay: no hedge until the window is full, then at that percentile of recent attempts', async () => {
    const { clock, attempt } = slowAndFast();
    const d = new Dependency<string>({ upstreams: [{ id: 'a', target: 'a' }, { id: 'b', target: 'b' }], clock, breaker: false, throttle: false, hedge: { percentile: 0.5, samples: 10 }, budget: new RetryBudget({ clock, ratio: 1, minPerSecond: 1_000 }) });
    for (let i = 0; i < 10; i++) await settleOn(clock, d.call(attempt));
    assert.equal(d.stats().hedges!.sent, 0, 'the first ten calls only measure');
    for (let i = 0; i < 30; i++) await settleOn(clock, d.call(attempt));
    assert.ok(d.stats().hedges!.sent > 0);
  });

  test('bad hedge options are ConfigErrors', () => {
    const clock = new VirtualClock();
    const make = (hedge: unknown) => new Dependency({ upstreams: [{ id: 'a', target: 1 }], clock, hedge: hedge as { after: number } });
    assert.throws(() => make({}), ConfigError);
    assert.throws(() => make({ after: 10, percentile: 0.9 }), ConfigError);
    assert.throws(() => make({ percentile: 2 }), ConfigError);
    assert.throws(() => make({ after: -1 }), ConfigError);
  });
});

describe('hedging without a budget is a retry storm of its own', () => {
  /**
   * Three servers of one worker each (10 ms a request, three times slower
   * from 1 s to 3 s), FIFO queues, and no way to learn that a caller gave up
   * (a database's queue, a server behind a proxy that does not pass the
   * cancellation on): a hedge, once sent, is served. Users call every 6 ms
   * (167/s, 56 % of the 300/s the servers serve), with a 1 s deadline,
   * hedged after 20 ms. Returns the median time of the calls of the last
   * second, 12 s after the slowdown ended. (The budgeted fleet needs about
   * 10 of them: the budget saved in the quiet first second is spent at once
   * when the slowdown begins, and the work of the calls that then pass their
   * deadline is served all the same.)
   */
  async function run(budget: (clock: VirtualClock) => RetryBudget): Promise<{ median: number; sent: number }> {
    const clock = new VirtualClock({ seed: 1 });
    const busyUntil = [0, 0, 0];
    const serve = (u: PickedUpstream<number>, signal: AbortSignal): Promise<number> =>
      new Promise((resolve, reject) => {
        const now = clock.now();
        const ms = now >= 1_000 && now < 3_000 ? 30 : 10;
        const done = Math.max(now, busyUntil[u.target]!) + ms;
        busyUntil[u.target] = done;
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
        clock.setTimer(() => resolve(u.target), done - now);
      });
    // Only the hedging under test: no breaker, throttle or ejection (which would take a server out of a fleet that is only busy).
    const d = new Dependency<number>({ upstreams: [0, 1, 2].map((i) => ({ id: `s${i}`, target: i })), clock, breaker: false, throttle: false, balancer: { outliers: { consecutiveErrors: 0, successRate: false } }, retry: { maxAttempts: 1 }, hedge: { after: 20 }, budget: budget(clock) });
    const last: number[] = [];
    for (let t = 0; t < 16_000; t += 6) {
      clock.setTimer(() => {
        const t0 = clock.now();
        d.call((u, s) => serve(u, s), { deadline: t0 + 1_000 }).then(
          () => t0 >= 15_000 && last.push(clock.now() - t0),
          () => t0 >= 15_000 && last.push(1_000),
        );
      }, t);
    }
    await clock.runUntilIdle();
    last.sort((a, b) => a - b);
    return { median: last[Math.floor(last.length / 2)]!, sent: d.stats().hedges!.sent };
  }

  test('unbudgeted, every call past the delay doubles its work and the servers stay slow after the slowdown; from the retry budget, they recover', async () => {
    const unbudgeted = await run((clock) => new RetryBudget({ clock, ratio: 1, minPerSecond: 1e9 }));
    const budgeted = await run((clock) => new RetryBudget({ clock }));
    assert.ok(unbudgeted.median >= 500, `unbudgeted: the last second's median call took ${unbudgeted.median} ms, 12 s after the slowdown`);
    assert.ok(budgeted.median <= 20, `budgeted: the last second's median call took ${budgeted.median} ms`);
    assert.ok(unbudgeted.sent > 3 * budgeted.sent, `hedges sent: ${unbudgeted.sent} unbudgeted, ${budgeted.sent} budgeted`);
  });
});
