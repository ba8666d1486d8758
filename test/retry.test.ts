import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { describe, test } from 'node:test';
import { AbortedError, BreakerOpenError, ConfigError, DeadlineExceededError, LoadTimeoutError, OverloadedError, ValidationError } from '../src/errors.js';
import { RetryBudget } from '../src/guard/budget.js';
import { DeadlineGuard } from '../src/guard/deadline-guard.js';
import { deadlineSignal, scopedSignal } from '../src/guard/deadline.js';
import { callContext, guarded, pipeline } from '../src/guard/guard.js';
import { Retry } from '../src/guard/retry.js';
import { type Clock } from '../src/time/clock.js';
import { VirtualClock } from '../src/time/virtual.js';
import { track } from './helpers.js';

/** A virtual clock whose random() the test sets. */
function riggedClock(start = 0): { clock: VirtualClock; rig: Clock; set(r: number): void } {
  const clock = new VirtualClock({ start });
  let r = 0.5;
  const rig: Clock = { now: () => clock.now(), setTimer: (fn, ms) => clock.setTimer(fn, ms), random: () => r };
  return { clock, rig, set: (v) => void (r = v) };
}

/** A task that fails `failures` times with `error()`, then returns 'ok'; logs the clock time of each call. */
function flaky(clock: Clock, failures: number, error: () => unknown = () => new Error('boom')) {
  const calls: number[] = [];
  const fn = async (): Promise<string> => {
    calls.push(clock.now());
    if (calls.length <= failures) throw error();
    return 'ok';
  };
  return { fn, calls };
}

/** The two abandonment counts of a Retry's stats, for tests about abandoned attempts. */
function abandonment(retry: Retry): { abandoned: number; abandonedRunning: number } {
  const { abandoned, abandonedRunning } = retry.stats();
  return { abandoned, abandonedRunning };
}

const aborted = (() => {
  const ac = new AbortController();
  ac.abort(new Error('gone'));
  return new AbortedError('aborted', ac.signal.reason);
})();

describe('Retry', () => {
  test('retries a plain failure, up to maxAttempts in all', async () => {
    const clock = new VirtualClock();
    const retry = new Retry({ clock, maxAttempts: 3 });
    const ok = flaky(clock, 2);
    const p = retry.execute(ok.fn);
    await clock.runUntilIdle();
    assert.equal(await p, 'ok');
    assert.equal(ok.calls.length, 3);

    const bad = flaky(clock, 100);
    const q = track(retry.execute(bad.fn));
    await clock.runUntilIdle();
    assert.equal((q.error as Error).message, 'boom');
    assert.equal(bad.calls.length, 3);

    const once = new Retry({ clock, maxAttempts: 1 });
    const one = flaky(clock, 100);
    await assert.rejects(once.execute(one.fn), /boom/);
    assert.equal(one.calls.length, 1);
  });

  const never: [string, () => unknown][] = [
    ['BreakerOpenError', () => new BreakerOpenError('open', 10)],
    ['OverloadedError', () => new OverloadedError('full')],
    ['ValidationError', () => new ValidationError('k', 'bad')],
    ['DeadlineExceededError', () => new DeadlineExceededError('late')],
    ['AbortedError', () => aborted],
    ['DOM AbortError', () => new DOMException('aborted', 'AbortError')],
    ['code OVERLOADED', () => Object.assign(new Error('x'), { code: 'OVERLOADED' })],
    ['code BREAKER_OPEN', () => Object.assign(new Error('x'), { code: 'BREAKER_OPEN' })],
  ];
  for (const [name, make] of never) {
    test(`never retries ${name}`, async () => {
      const clock = new VirtualClock();
      const retry = new Retry({ clock, maxAttempts: 5, retryOn: () => true });
      const t = flaky(clock, 100, make);
      const p = track(retry.execute(t.fn));
      await clock.runUntilIdle();
      assert.ok(p.settled && p.error !== undefined);
      assert.equal(t.calls.length, 1);
    });
  }

  test('never retries once the caller has aborted, whatever the task threw', async () => {
    const clock = new VirtualClock();
    const retry = new Retry({ clock, maxAttempts: 5 });
    const ac = new AbortController();
    let calls = 0;
    const p = track(
      retry.execute(async () => {
        calls++;
        ac.abort();
        throw new Error('boom');
      }, { signal: ac.signal }),
    );
    await clock.runUntilIdle();
    assert.equal((p.error as Error).message, 'boom');
    assert.equal(calls, 1);
  });

  test('retryOn narrows which errors are retried; a throwing retryOn means no', async () => {
    const clock = new VirtualClock();
    const a = flaky(clock, 100);
    const p = track(new Retry({ clock, retryOn: () => false }).execute(a.fn));
    const b = flaky(clock, 100);
    const q = track(
      new Retry({
        clock,
        retryOn: () => {
          throw new Error('bug');
        },
      }).execute(b.fn),
    );
    await clock.runUntilIdle();
    assert.ok(p.error instanceof Error && q.error instanceof Error);
    assert.equal(a.calls.length, 1);
    assert.equal(b.calls.length, 1);
  });

  test("retryOn is given the call's context: a rule about the call, not the error", async () => {
    const clock = new VirtualClock();
    const settled = new AbortController();
    const seen: string[] = [];
    const retry = new Retry({
      clock,
      retryOn: (_error, context) => {
        seen.push(context.key);
        return context.signal !== settled.signal;
      },
    });
    const a = flaky(clock, 100);
    const p = track(retry.execute(a.fn, { key: 'free' }));
    const b = flaky(clock, 100);
    const q = track(retry.execute(b.fn, { key: 'answered', signal: settled.signal }));
    await clock.runUntilIdle();
    assert.ok(p.error instanceof Error && q.error instanceof Error);
    assert.equal(a.calls.length, 3, 'the call the rule allows is retried');
    assert.equal(b.calls.length, 1, 'the call the rule refuses is not');
    assert.ok(seen.includes('free') && seen.includes('answered'));
  });

  test('full jitter: each delay is uniform in [0, min(maxDelay, baseDelay · 2^(n−1)))', async () => {
    const { clock, rig, set } = riggedClock();
    const retry = new Retry({ clock: rig, baseDelay: 100, maxDelay: 1000 });
    set(0);
    for (let n = 1; n <= 12; n++) assert.equal(retry.delay(n), 0, 'full jitter reaches 0');
    set(0.999_999);
    for (let n = 1; n <= 12; n++) {
      const ceiling = Math.min(1000, 100 * 2 ** (n - 1));
      const d = retry.delay(n);
      assert.ok(d < ceiling && d > ceiling * 0.999, `delay(${n}) = ${d}`);
    }
    assert.ok(retry.delay(5000) < 1000);

    // Seen from outside: each retry starts `delay` after the failure, the delay within its bound.
    const seeded = new VirtualClock({ seed: 7 });
    const r = new Retry({ clock: seeded, baseDelay: 100, maxDelay: 250, maxAttempts: 6, budget: new RetryBudget({ clock: seeded, minPerSecond: 100 }) });
    const events: { attempt: number; delay: number }[] = [];
    r.on('retry', (e) => events.push(e));
    const t = flaky(seeded, 100);
    const p = track(r.execute(t.fn));
    await seeded.runUntilIdle();
    assert.ok(p.error instanceof Error);
    assert.equal(t.calls.length, 6);
    assert.deepEqual(
      events.map((e) => e.attempt),
      [2, 3, 4, 5, 6],
    );
    events.forEach((e, i) => {
      assert.ok(e.delay >= 0 && e.delay < Math.min(250, 100 * 2 ** i), `retry ${i + 1}: ${e.delay}`);
      assert.equal(t.calls[i + 1]! - t.calls[i]!, e.delay);
    });
    void clock;
  });

  test('a shared budget caps retries across calls; budgetExhausted is emitted', async () => {
    const clock = new VirtualClock();
    const budget = new RetryBudget({ clock, ratio: 0.1, minPerSecond: 0 });
    const a = new Retry({ clock, budget, baseDelay: 0, maxAttempts: 3 });
    const b = new Retry({ clock, budget, baseDelay: 0, maxAttempts: 3 });
    let exhausted = 0;
    a.on('budgetExhausted', () => exhausted++);
    b.on('budgetExhausted', () => exhausted++);
    let calls = 0;
    const fail = async (): Promise<never> => {
      calls++;
      throw new Error('down');
    };
    const runs = Array.from({ length: 100 }, (_, i) => track((i % 2 === 0 ? a : b).execute(fail)));
    await clock.runUntilIdle();
    assert.ok(runs.every((r) => r.error instanceof Error));
    // 100 first attempts, and retries ≤ 10 % of 100 requests (without a budget: 200).
    assert.ok(calls - 100 <= 10, `retries: ${calls - 100}`);
    assert.ok(calls - 100 >= 1);
    assert.ok(exhausted > 0);
  });

  test('no retry starts after the deadline: the call fails with its last error', async () => {
    const { clock, rig, set } = riggedClock();
    set(0.5);
    const retry = new Retry({ clock: rig, baseDelay: 1000, maxDelay: 1000 });
    const t = flaky(rig, 100);
    // The retry would start at 500 ms; the deadline is at 400.
    const p = track(retry.execute(t.fn, { deadline: 400 }));
    await clock.settle();
    assert.equal((p.error as Error).message, 'boom');
    assert.equal(t.calls.length, 1);
    assert.equal(clock.pendingTimers, 0);

    // With room for it, the same retry happens.
    const u = flaky(rig, 1);
    const q = retry.execute(u.fn, { deadline: 600 });
    await clock.runUntilIdle();
    assert.equal(await q, 'ok');
    assert.equal(u.calls.length, 2);
  });

  test('no retry starts whose attemptTimeout (or expectedDuration) would cross the deadline', async () => {
    const { clock, rig, set } = riggedClock();
    set(0);
    const t = flaky(rig, 100);
    const p = track(new Retry({ clock: rig, attemptTimeout: 500 }).execute(t.fn, { deadline: 400 }));
    await clock.runUntilIdle();
    assert.equal((p.error as Error).message, 'boom');
    assert.equal(t.calls.length, 1, 'the first attempt runs, the retry would not fit');

    const u = flaky(rig, 100);
    set(0.5);
    // The retry would start 100 ms in and is expected to take 300: past the deadline at 350.
    const q = track(new Retry({ clock: rig, baseDelay: 200, expectedDuration: 300 }).execute(u.fn, { deadline: clock.now() + 350 }));
    await clock.runUntilIdle();
    assert.equal((q.error as Error).message, 'boom');
    assert.equal(u.calls.length, 1);
    // Without the expectation, it would have been retried.
    const w = flaky(rig, 100);
    const s = track(new Retry({ clock: rig, baseDelay: 200 }).execute(w.fn, { deadline: clock.now() + 350 }));
    await clock.runUntilIdle();
    assert.ok(s.error instanceof Error);
    assert.ok(w.calls.length >= 2);

    const v = flaky(rig, 100);
    const r = track(new Retry({ clock: rig, expectedDuration: 300 }).execute(v.fn, { deadline: clock.now() + 200 }));
    await clock.runUntilIdle();
    assert.ok(r.error instanceof DeadlineExceededError, 'no first attempt that cannot finish');
    assert.equal(v.calls.length, 0);
  });

  test('a passed deadline fails with DeadlineExceededError and calls nothing; an attempt is aborted at the deadline', async () => {
    const clock = new VirtualClock({ start: 1000 });
    let calls = 0;
    await assert.rejects(
      new Retry({ clock }).execute(async () => ++calls, { deadline: 1000 }),
      DeadlineExceededError,
    );
    assert.equal(calls, 0);

    const seen: AbortSignal[] = [];
    const p = track(
      new Retry({ clock }).execute(
        (signal) =>
          new Promise((_, reject) => {
            seen.push(signal);
            signal.addEventListener('abort', () => reject(new Error('aborted by signal')));
          }),
        { deadline: 1300 },
      ),
    );
    await clock.advance(299);
    assert.equal(p.settled, false);
    await clock.advance(1);
    assert.ok(p.error instanceof DeadlineExceededError);
    assert.equal(seen.length, 1);
    assert.equal(clock.pendingTimers, 0);
  });

  test('a deadline set by an outer DeadlineGuard reaches the retry through the pipeline', async () => {
    const { clock, rig, set } = riggedClock();
    set(0.99);
    const guard = pipeline(new DeadlineGuard({ timeout: 150, clock: rig }), new Retry({ clock: rig, baseDelay: 200, maxDelay: 200 }));
    const t = flaky(rig, 100);
    const p = track(guarded(guard, t.fn));
    await clock.runUntilIdle();
    assert.equal((p.error as Error).message, 'boom', 'gave up at once: the backoff (198 ms) would pass the deadline');
    assert.equal(t.calls.length, 1);
    assert.equal(clock.pendingTimers, 0);
  });

  test('attemptTimeout aborts a hung attempt with LoadTimeoutError, which is retried; a task that honours its signal never overlaps its retry', async () => {
    const clock = new VirtualClock();
    const retry = new Retry({ clock, attemptTimeout: 100, baseDelay: 10, maxAttempts: 3 });
    let running = 0;
    let peak = 0;
    let calls = 0;
    const p = track(
      retry.execute(
        (signal) =>
          new Promise((_, reject) => {
            calls++;
            peak = Math.max(peak, ++running);
            signal.addEventListener('abort', () => {
              running--;
              reject(new Error('cancelled'));
            });
          }),
      ),
    );
    await clock.runUntilIdle();
    assert.ok(p.error instanceof LoadTimeoutError, String(p.error));
    assert.equal(calls, 3);
    assert.equal(peak, 1);
    assert.equal(clock.pendingTimers, 0);
  });

  describe('an attempt ends for the caller at its timeout, whatever the task does', () => {
    /** A task that ignores its signal and settles `after` ms later (issue 11: the lab's server answers at 3.0 s). */
    function deaf(clock: Clock, after: number, outcome: (n: number) => { ok: string } | { error: Error } = (n) => ({ ok: `late ${n}` })) {
      const starts: number[] = [];
      const fn = (): Promise<string> => {
        const n = starts.push(clock.now());
        return new Promise((resolve, reject) => {
          clock.setTimer(() => {
            const o = outcome(n);
            if ('ok' in o) resolve(o.ok);
            else reject(o.error);
          }, after);
        });
      };
      return { fn, starts };
    }

    test('attemptTimeout 2.8 s, an answer at 3.0 s: the caller has LoadTimeoutError at 2.8 s, the late answer is dropped', async () => {
      const clock = new VirtualClock();
      const retry = new Retry({ clock, attemptTimeout: 2_800, maxAttempts: 1 });
      const seen: { attempt: number; reason: unknown; at: number }[] = [];
      retry.on('abandoned', (e) => seen.push({ attempt: e.attempt, reason: e.reason, at: clock.now() }));
      const t = deaf(clock, 3_000);
      const p = track(retry.execute(t.fn, { key: 'k' }));
      await clock.advance(2_799);
      assert.equal(p.settled, false);
      await clock.advance(1);
      assert.ok(p.error instanceof LoadTimeoutError, String(p.error));
      assert.equal(clock.now(), 2_800);
      assert.deepEqual(seen.map((e) => [e.attempt, e.at]), [[1, 2_800]]);
      assert.ok(seen[0]!.reason instanceof LoadTimeoutError);
      assert.deepEqual(abandonment(retry), { abandoned: 1, abandonedRunning: 1 });
      await clock.advance(200);
      assert.ok(p.error instanceof LoadTimeoutError, 'the answer at 3.0 s never reaches the caller');
      assert.deepEqual(abandonment(retry), { abandoned: 1, abandonedRunning: 0 });
      assert.equal(clock.pendingTimers, 0);
    });

    test("a late failure is swallowed, and a late answer is never returned in place of a later attempt's", async () => {
      const unhandled: unknown[] = [];
      const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
      process.on('unhandledRejection', onUnhandled);
      try {
        const clock = new VirtualClock();
        const q = track(new Retry({ clock, attemptTimeout: 2_800, maxAttempts: 1 }).execute(deaf(clock, 3_000, () => ({ error: new Error('late failure') })).fn));
        await clock.runUntilIdle();
        assert.ok(q.error instanceof LoadTimeoutError);

        // Attempt 1 answers at 3.0 s, while attempt 2 (started at 2.8 s) is still running: the caller gets attempt 2's answer.
        const retry = new Retry({ clock, attemptTimeout: 2_800, baseDelay: 0, maxAttempts: 2 });
        const t = deaf(clock, 1_000, () => ({ ok: 'answer of attempt 2' }));
        let first = true;
        const fn = (): Promise<string> => {
          if (!first) return t.fn();
          first = false;
          return deaf(clock, 3_000, () => ({ ok: 'late answer of attempt 1' })).fn();
        };
        const start = clock.now();
        const p = track(retry.execute(fn));
        await clock.runUntilIdle();
        assert.equal(p.value, 'answer of attempt 2');
        assert.deepEqual(t.starts, [start + 2_800]);
        await new Promise((resolve) => setImmediate(resolve));
        assert.deepEqual(unhandled, []);
      } finally {
        process.off('unhandledRejection', onUnhandled);
      }
    });

    test('a retry beside an abandoned attempt still running is drawn from the budget: none when it is spent', async () => {
      const clock = new VirtualClock();
      const budget = new RetryBudget({ clock, ratio: 0, minPerSecond: 0 });
      const retry = new Retry({ clock, budget, attemptTimeout: 2_800, baseDelay: 0, maxAttempts: 3 });
      let exhausted = 0;
      retry.on('budgetExhausted', () => exhausted++);
      const t = deaf(clock, 3_000);
      const p = track(retry.execute(t.fn));
      await clock.advance(2_800);
      assert.ok(p.error instanceof LoadTimeoutError);
      assert.equal(t.starts.length, 1, 'no free retry stacked onto the attempt the dependency still runs');
      assert.equal(exhausted, 1);

      // With room in the budget the retry runs beside it, and is counted as a retry.
      const roomy = new RetryBudget({ clock, ratio: 0, minPerSecond: 1 });
      const r2 = new Retry({ clock, budget: roomy, attemptTimeout: 2_800, baseDelay: 0, maxAttempts: 2 });
      const u = deaf(clock, 3_000);
      const q = track(r2.execute(u.fn));
      await clock.advance(2_800);
      assert.equal(u.starts.length, 2);
      assert.equal(roomy.retries, 1);
      assert.deepEqual(abandonment(r2), { abandoned: 1, abandonedRunning: 1 });
      await clock.advance(2_800);
      assert.ok(q.error instanceof LoadTimeoutError);
      assert.deepEqual(abandonment(r2), { abandoned: 2, abandonedRunning: 1 }, 'attempt 1 answered at 3.0 s; attempt 2 still runs');
      await clock.runUntilIdle();
      assert.deepEqual(abandonment(r2), { abandoned: 2, abandonedRunning: 0 });
    });

    test('the deadline, an inherited deadline signal and a hard timeout on the signal end the attempt on time too', async () => {
      const clock = new VirtualClock();
      const retry = new Retry({ clock, maxAttempts: 1 });
      const a = track(retry.execute(deaf(clock, 3_000).fn, { deadline: 1_000 }));
      await clock.advance(1_000);
      assert.ok(a.error instanceof DeadlineExceededError, String(a.error));

      // A deadline carried by the signal alone (deadlineSignal, no DeadlineGuard to answer for it).
      const scoped = deadlineSignal(clock, callContext({ deadline: clock.now() + 700 }));
      const b = track(retry.execute(deaf(clock, 3_000).fn, { signal: scoped.signal }));
      await clock.advance(700);
      assert.ok(b.settled, 'answered at the inherited deadline');
      assert.ok(b.error instanceof AbortedError && b.error.cause instanceof DeadlineExceededError, String(b.error));
      scoped.dispose();

      // The cache's hard timeout aborts the load's signal at its deadline.
      const ac = new AbortController();
      const deadline = clock.now() + 500;
      clock.setTimer(() => ac.abort(new LoadTimeoutError('k', 500, 'load')), 500);
      const c = track(retry.execute(deaf(clock, 3_000).fn, { signal: ac.signal, deadline }));
      await clock.advance(500);
      assert.ok(c.error instanceof AbortedError && c.error.cause instanceof LoadTimeoutError, String(c.error));
      assert.deepEqual(abandonment(retry), { abandoned: 3, abandonedRunning: 3 });
      await clock.runUntilIdle();
      assert.deepEqual(abandonment(retry), { abandoned: 3, abandonedRunning: 0 });
      assert.equal(clock.pendingTimers, 0);
    });
  });

  test("a server's retryAfterMs is waited for, at least", async () => {
    const { clock, rig, set } = riggedClock();
    set(0.5);
    const retry = new Retry({ clock: rig, baseDelay: 10 });
    const t = flaky(rig, 1, () => Object.assign(new Error('busy'), { retryAfterMs: 700 }));
    const p = track(retry.execute(t.fn));
    await clock.advance(699);
    assert.equal(t.calls.length, 1);
    await clock.advance(1);
    assert.equal(t.calls.length, 2);
    await clock.settle();
    assert.equal(p.value, 'ok');

    // …but not past the deadline,
    const u = flaky(rig, 1, () => Object.assign(new Error('busy'), { retryAfterMs: 700 }));
    const q = track(retry.execute(u.fn, { deadline: clock.now() + 500 }));
    await clock.runUntilIdle();
    assert.equal((q.error as Error).message, 'busy');
    assert.equal(u.calls.length, 1);

    // …and not beyond maxDelay: the call fails fast.
    const v = flaky(rig, 1, () => Object.assign(new Error('busy'), { retryAfterMs: 60_000 }));
    const r = track(retry.execute(v.fn));
    await clock.runUntilIdle();
    assert.equal((r.error as Error).message, 'busy');
    assert.equal(v.calls.length, 1);
  });

  test('an abort during the backoff stops at once and leaves no timer or listener behind', async () => {
    const { clock, rig, set } = riggedClock();
    set(0.5);
    const retry = new Retry({ clock: rig, baseDelay: 10_000, maxDelay: 10_000 });
    const ac = new AbortController();
    const t = flaky(rig, 100);
    const p = track(retry.execute(t.fn, { signal: ac.signal }));
    await clock.settle();
    assert.equal(t.calls.length, 1);
    assert.equal(clock.pendingTimers, 1, 'the backoff timer');
    ac.abort(new Error('user left'));
    await clock.settle();
    assert.ok(p.error instanceof AbortedError);
    assert.equal(clock.now(), 0, 'no time had to pass');
    assert.equal(clock.pendingTimers, 0);
    assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
    assert.equal(t.calls.length, 1);
  });

  test('bad configuration is a ConfigError', () => {
    assert.throws(() => new Retry({ maxAttempts: 0 }), ConfigError);
    assert.throws(() => new Retry({ maxAttempts: 1.5 }), ConfigError);
    assert.throws(() => new Retry({ baseDelay: -1 }), ConfigError);
    assert.throws(() => new Retry({ baseDelay: Number.NaN }), ConfigError);
    assert.throws(() => new Retry({ baseDelay: 100, maxDelay: 50 }), ConfigError);
    assert.throws(() => new Retry({ attemptTimeout: 0 }), ConfigError);
    assert.throws(() => new Retry({ expectedDuration: -5 }), ConfigError);
    assert.throws(() => new Retry({ retryOn: 3 as unknown as () => boolean }), ConfigError);
  });
});

describe('RetryBudget', () => {
  test('allows ratio × requests plus the floor, and forgets after its window', async () => {
    const clock = new VirtualClock();
    const budget = new RetryBudget({ clock, window: 10_000, ratio: 0.2, minPerSecond: 1 });
    assert.equal(budget.available, 10, 'the floor: 1/s over 10 s');
    for (let i = 0; i < 100; i++) budget.recordRequest();
    assert.equal(budget.available, 30);
    let granted = 0;
    while (budget.tryRetry()) granted++;
    assert.equal(granted, 30);
    assert.equal(budget.available, 0);
    await clock.advance(11_000);
    assert.equal(budget.requests, 0);
    assert.equal(budget.retries, 0);
    assert.equal(budget.available, 10);
  });

  test('bad configuration is a ConfigError', () => {
    assert.throws(() => new RetryBudget({ ratio: 1.5 }), ConfigError);
    assert.throws(() => new RetryBudget({ ratio: -0.1 }), ConfigError);
    assert.throws(() => new RetryBudget({ ratio: Number.NaN }), ConfigError);
    assert.throws(() => new RetryBudget({ minPerSecond: -1 }), ConfigError);
    assert.throws(() => new RetryBudget({ minPerSecond: Number.NaN }), ConfigError);
    assert.throws(() => new RetryBudget({ window: 0 }), ConfigError);
    assert.throws(() => new RetryBudget({ window: Infinity }), ConfigError);
    assert.throws(() => new RetryBudget({ buckets: 0 }), ConfigError);
  });
});

describe('deadlines', () => {
  test('deadlineSignal aborts at the deadline with DeadlineExceededError, or with the parent; dispose leaves nothing', async () => {
    const clock = new VirtualClock();
    const parent = new AbortController();
    const a = deadlineSignal(clock, callContext({ signal: parent.signal, deadline: 100 }));
    assert.equal(getEventListeners(parent.signal, 'abort').length, 1);
    await clock.advance(100);
    assert.ok(a.signal.aborted && a.signal.reason instanceof DeadlineExceededError && a.timedOut);
    assert.equal(getEventListeners(parent.signal, 'abort').length, 0);
    assert.equal(clock.pendingTimers, 0);

    const b = deadlineSignal(clock, callContext({ signal: parent.signal, deadline: 500 }));
    parent.abort(new Error('bye'));
    assert.ok(b.signal.aborted && (b.signal.reason as Error).message === 'bye' && !b.timedOut);
    assert.equal(clock.pendingTimers, 0);

    const other = new AbortController();
    const c = deadlineSignal(clock, callContext({ signal: other.signal, deadline: 500 }));
    c.dispose();
    c.dispose();
    assert.equal(clock.pendingTimers, 0);
    assert.equal(getEventListeners(other.signal, 'abort').length, 0);
    assert.equal(c.signal.aborted, false);

    const none = deadlineSignal(clock, callContext({ signal: other.signal }));
    assert.equal(none.signal, other.signal, 'no deadline: the caller’s own signal, nothing allocated');
  });

  test('a signal scoped inside another is watched without a listener on it, and aborts with it, children in the order they were made', async () => {
    const clock = new VirtualClock();
    const parent = new AbortController();
    const order: string[] = [];
    const outer = scopedSignal(clock, parent.signal, 500, () => new Error('outer late'), () => order.push('outer'));
    const a = scopedSignal(clock, outer.signal, 300, () => new Error('a late'), () => order.push('a'));
    const b = scopedSignal(clock, outer.signal, 400, () => new Error('b late'), () => order.push('b'));
    outer.signal.addEventListener('abort', () => order.push('listener'), { once: true });
    assert.equal(getEventListeners(outer.signal, 'abort').length, 1, 'only the direct listener: the children need none');
    b.dispose();
    const c = scopedSignal(clock, outer.signal, 450, () => new Error('c late'), () => order.push('c'));
    parent.abort(new Error('bye'));
    assert.deepEqual(order, ['listener', 'a', 'c', 'outer']);
    for (const s of [outer, a, c]) assert.equal((s.signal.reason as Error).message, 'bye');
    assert.equal(b.signal.aborted, false, 'a disposed child is no longer tied to its parent');
    assert.equal(clock.pendingTimers, 0);
  });

  test('DeadlineGuard answers at the deadline even when the task ignores its signal', async () => {
    const clock = new VirtualClock();
    const guard = new DeadlineGuard({ timeout: 1000, clock });
    let aborted = false;
    const p = track(
      guard.execute(
        (signal) =>
          new Promise(() => {
            signal.addEventListener('abort', () => (aborted = true));
          }),
      ),
    );
    await clock.advance(999);
    assert.equal(p.settled, false);
    await clock.advance(1);
    assert.ok(p.error instanceof DeadlineExceededError);
    assert.ok(aborted);
    assert.equal(clock.pendingTimers, 0);

    // A caller's earlier deadline wins; a passed one refuses at once.
    const q = track(guard.execute(() => new Promise(() => {}), { deadline: clock.now() + 10 }));
    await clock.advance(10);
    assert.ok(q.error instanceof DeadlineExceededError);
    await assert.rejects(guard.execute(async () => 1, { deadline: clock.now() }), DeadlineExceededError);
    assert.equal(await guard.execute(async () => 1), 1);
    assert.equal(clock.pendingTimers, 0);

    const ac = new AbortController();
    const r = track(guard.execute(() => new Promise(() => {}), { signal: ac.signal }));
    ac.abort();
    await clock.settle();
    assert.ok(r.error instanceof AbortedError);
    assert.equal(clock.pendingTimers, 0);
    assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
    assert.throws(() => new DeadlineGuard({ timeout: 0 }), ConfigError);
    assert.throws(() => new DeadlineGuard({ timeout: Number.NaN }), ConfigError);
  });
});

describe('no leaks', () => {
  /** A signal that counts the abort listeners added to it and not yet removed. */
  function countedSignal(signal: AbortSignal): { signal: AbortSignal; live(): number } {
    let live = 0;
    const add = signal.addEventListener.bind(signal);
    const remove = signal.removeEventListener.bind(signal);
    const seen = new Set<unknown>();
    signal.addEventListener = ((...args: Parameters<AbortSignal['addEventListener']>) => {
      const [type, listener] = args;
      if (type === 'abort' && listener !== null && !seen.has(listener)) {
        seen.add(listener);
        live++;
      }
      add(...args);
    }) as typeof signal.addEventListener;
    signal.removeEventListener = ((...args: Parameters<AbortSignal['removeEventListener']>) => {
      const [type, listener] = args;
      if (type === 'abort' && seen.delete(listener)) live--;
      remove(...args);
    }) as typeof signal.removeEventListener;
    return { signal, live: () => live };
  }

  // A call here costs ~200 µs (Node 20 makes each AbortSignal and abort listener cost ~8–12 µs,
  // and every call makes several): 10⁶ would take minutes. DAMPER_LEAK_CALLS=1000000 runs them all.
  const CALLS = Number(process.env.DAMPER_LEAK_CALLS ?? 30_000);

  test(`${CALLS} calls with aborts, timeouts and deadlines leave no timer and no listener behind`, async (t) => {
    // Stack traces are most of the cost of an error and say nothing about leaks.
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    t.after(() => void (Error.stackTraceLimit = stackTraceLimit));
    const clock = new VirtualClock({ seed: 11 });
    const budget = new RetryBudget({ clock, ratio: 0.5 });
    const retry = new Retry({ clock, budget, attemptTimeout: 20, baseDelay: 5, maxDelay: 20, maxAttempts: 3 });
    const guard = pipeline(new DeadlineGuard({ timeout: 60, clock }), retry);
    const shared = countedSignal(new AbortController().signal);
    const BATCH = 2_000;
    let settled = 0;
    let ok = 0;
    for (let done = 0; done < CALLS; done += BATCH) {
      const aborters: { ac: AbortController; counted: ReturnType<typeof countedSignal> }[] = [];
      for (let i = 0; i < BATCH; i++) {
        const kind = (done + i) % 8;
        let signal = shared.signal;
        let ac: AbortController | undefined;
        if (kind >= 6) {
          ac = new AbortController();
          const counted = countedSignal(ac.signal);
          aborters.push({ ac, counted });
          signal = counted.signal;
        }
        let attempts = 0;
        const task = (s: AbortSignal): Promise<string> => {
          attempts++;
          switch (kind) {
            case 0:
              return Promise.resolve('ok');
            case 1:
              return attempts === 1 ? Promise.reject(new Error('flaky')) : Promise.resolve('ok');
            case 2: // hangs until its signal aborts: per-attempt timeouts, then the deadline
            case 6: // the same, and the caller aborts
              return new Promise((_, reject) => s.addEventListener('abort', () => reject(new Error('cancelled')), { once: true }));
            case 3: // ignores its signal: the DeadlineGuard answers
              return new Promise(() => {});
            case 4:
              return Promise.reject(new OverloadedError('full'));
            case 7: // fails, the caller aborts during the backoff
              return Promise.reject(new Error('down'));
            default:
              return Promise.reject(Object.assign(new Error('busy'), { retryAfterMs: 15 }));
          }
        };
        guarded(guard, task, { signal, key: String(i) }).then(
          () => {
            settled++;
            ok++;
          },
          () => settled++,
        );
      }
      await clock.advance(3);
      for (const { ac } of aborters) ac.abort(new Error('caller left'));
      await clock.settle();
      // Midway, a call still running holds at most two timers (its deadline, and
      // its attempt's timeout or its backoff); one that has settled holds none.
      assert.ok(clock.pendingTimers <= 2 * (done + BATCH - settled), `${clock.pendingTimers} timers for ${done + BATCH - settled} calls in flight`);
      await clock.advance(100);
      for (const { counted, ac } of aborters) {
        assert.equal(counted.live() === 0 || ac.signal.aborted, true);
        assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
      }
      assert.equal(settled, done + BATCH);
      assert.equal(clock.pendingTimers, 0);
      assert.equal(shared.live(), 0);
      assert.equal(getEventListeners(shared.signal, 'abort').length, 0);
    }
    assert.ok(ok > CALLS / 8);
  });
});

describe('stats: what an operator sees of retries, their budget and deadlines', () => {
  test('Retry: calls, the retries that started, and the retryable failures the budget refused', async () => {
    const clock = new VirtualClock();
    const budget = new RetryBudget({ clock, ratio: 0, minPerSecond: 0.2 }); // a floor of 2 retries in the window
    const retry = new Retry({ clock, maxAttempts: 3, budget });
    const once = flaky(clock, 1);
    const p = retry.execute(once.fn);
    await clock.runUntilIdle();
    assert.equal(await p, 'ok'); // 1 retry, started
    const ac = new AbortController();
    const leave = retry.on('retry', () => ac.abort(new Error('gone')));
    const left = track(retry.execute(flaky(clock, 5).fn, { signal: ac.signal }));
    await clock.runUntilIdle();
    assert.ok(left.error instanceof AbortedError); // a retry granted (the budget's second), never started
    leave();
    const always = track(retry.execute(flaky(clock, 5).fn));
    await clock.runUntilIdle();
    assert.equal((always.error as Error).message, 'boom'); // the budget is spent: refused
    await assert.rejects(
      retry.execute(async () => {
        throw new OverloadedError('full');
      }),
      OverloadedError,
    ); // never retried: no refusal of the budget's
    assert.deepEqual(retry.stats(), { calls: 4, retries: 1, budgetRefusals: 1, abandoned: 0, abandonedRunning: 0 });
    assert.deepEqual(budget.stats(), { requests: 4, retries: 2, available: 0 });
  });

  test('RetryBudget: the window as the bound sees it, and what may be spent now', async () => {
    const clock = new VirtualClock();
    const budget = new RetryBudget({ clock, window: 10_000, ratio: 0.2, minPerSecond: 1 });
    for (let i = 0; i < 100; i++) budget.recordRequest();
    for (let i = 0; i < 5; i++) assert.ok(budget.tryRetry());
    assert.deepEqual(budget.stats(), { requests: 100, retries: 5, available: 25 });
    await clock.advance(11_000);
    assert.deepEqual(budget.stats(), { requests: 0, retries: 0, available: 10 });
  });

  test('DeadlineGuard: calls, and the ones refused or ended because their deadline passed (a caller leaving is not one)', async () => {
    const clock = new VirtualClock();
    const guard = new DeadlineGuard({ timeout: 100, clock });
    assert.equal(await guard.execute(async () => 1), 1);
    const ignoring = track(guard.execute(() => new Promise<never>(() => {})));
    await clock.advance(100);
    assert.ok(ignoring.error instanceof DeadlineExceededError); // ended at its deadline
    await assert.rejects(guard.execute(async () => 1, { deadline: clock.now() }), DeadlineExceededError); // refused
    const ac = new AbortController();
    const left = track(guard.execute(() => new Promise<never>(() => {}), { signal: ac.signal }));
    ac.abort(new Error('gone'));
    await clock.settle();
    assert.ok(left.error instanceof AbortedError);
    assert.deepEqual(guard.stats(), { calls: 4, expired: 2 });
  });
});
