import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { AbortedError, Cache, ConcurrencyLimiter, ConfigError, DeadlineExceededError, DeadlineGuard, OverloadedError, pipeline, type Priority, RateLimiter, type RateLimiterEvents, type RateLimiterOptions, VirtualClock } from '../src/index.js';
import { track } from './helpers.js';

const hold = (clock: VirtualClock, ms: number) => () => new Promise<void>((r) => clock.setTimer(r, ms));

/** Calls `limiter` `n` times with `wait: false` and counts the admitted ones. */
async function tryMany(limiter: RateLimiter, n: number, priority?: Priority): Promise<number> {
  let admitted = 0;
  const calls = Array.from({ length: n }, () => limiter.execute(async () => void admitted++, { wait: false, ...(priority === undefined ? {} : { priority }) }).catch(() => undefined));
  await Promise.all(calls);
  return admitted;
}

describe('rate', () => {
  test('steady state: exactly burst + rate × t admitted over simulated time, never more in any second', async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ rate: 10, burst: 5, clock });
    const perSecond = new Array<number>(10).fill(0);
    for (let t = 0; t < 10_000; t += 5) {
      // Ten arrivals every 5 ms: demand far above the rate.
      const admitted = await tryMany(limiter, 10);
      perSecond[Math.floor(t / 1000)]! += admitted;
      await clock.advance(5);
    }
    assert.equal(perSecond[0], 5 + 9, 'the burst, then one every 100 ms from 100 to 900');
    for (let s = 1; s < 10; s++) assert.equal(perSecond[s], 10, `second ${s}`);
    // The last token was taken at 9 900 ms; the next has just accrued.
    assert.ok(Math.abs(limiter.tokens - 1) < 1e-9, `${limiter.tokens}`);
  });

  test('queued calls are admitted one per token, each as it accrues, with one wake-up timer', async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ rate: 4, burst: 2, queueTimeout: 60_000, clock });
    const at: number[] = [];
    const calls = Array.from({ length: 10 }, () => limiter.execute(async () => void at.push(clock.now())));
    await clock.settle();
    assert.equal(limiter.queued, 8);
    // Eight timeouts and one wake-up, not one wake-up per waiter.
    assert.equal(clock.pendingTimers, 8 + 1);
    await clock.runUntilIdle();
    await Promise.all(calls);
    assert.deepEqual(at, [0, 0, 250, 500, 750, 1000, 1250, 1500, 1750, 2000]);
    assert.equal(limiter.queued, 0);
    assert.equal(clock.pendingTimers, 0);
  });

  test('tokens are not returned when a task ends (a rate, not a concurrency)', async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ rate: 1, burst: 3, clock });
    for (let i = 0; i < 3; i++) await limiter.execute(async () => i);
    await assert.rejects(limiter.execute(async () => 4, { wait: false }), OverloadedError);
    await clock.advance(1000);
    await assert.rejects(
      limiter.execute(() => Promise.reject(new Error('x'))),
      /x/,
    );
    assert.equal(limiter.tokens, 0, 'a failed call spent its token too');
  });

  test('a background call keeps off the reserve; normal calls still get tokens', async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ rate: 10, burst: 10, reserve: 0.5, clock });
    // Background needs 1 + 0.5 × 9 = 5.5 tokens: admitted at 10, 9, 8, 7, 6.
    assert.equal(await tryMany(limiter, 20, 'background'), 5);
    assert.equal(limiter.tokens, 5);
    assert.equal(await tryMany(limiter, 20, 'normal'), 5);
    assert.equal(await tryMany(limiter, 20, 'low'), 0);

    // Under sustained demand above the rate, first-time misses get every token.
    let normal = 0;
    let background = 0;
    for (let t = 0; t < 10_000; t += 50) {
      await clock.advance(50);
      if ((await tryMany(limiter, 1, 'normal')) === 1) normal++;
      if ((await tryMany(limiter, 1, 'background')) === 1) background++;
    }
    assert.equal(background, 0);
    assert.equal(normal, 100);

    // Once the misses stop, the bucket refills and refreshes go through again.
    await clock.advance(1000);
    assert.equal(await tryMany(limiter, 20, 'background'), 5);
  });

  test('reserve 0 treats background like the rest; reserve 1 admits it only into a full bucket', async () => {
    const clock = new VirtualClock();
    const open = new RateLimiter({ rate: 10, burst: 10, reserve: 0, clock });
    assert.equal(await tryMany(open, 20, 'background'), 10);
    const closed = new RateLimiter({ rate: 10, burst: 10, reserve: 1, clock });
    assert.equal(await tryMany(closed, 20, 'background'), 1);
    assert.equal(await tryMany(closed, 20, 'normal'), 9);
  });

  test('queued calls go highest priority first, first in first out within one', async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ rate: 10, burst: 1, queueTimeout: 10_000, clock });
    const order: string[] = [];
    const job = (name: string) => async () => void order.push(`${name}@${clock.now()}`);
    const all = [
      limiter.execute(job('first')),
      limiter.execute(job('low'), { priority: 'low' }),
      limiter.execute(job('normal-1')),
      limiter.execute(job('background'), { priority: 'background' }),
      limiter.execute(job('critical'), { priority: 'critical' }),
      limiter.execute(job('normal-2')),
    ];
    await clock.advance(1000);
    await Promise.all(all);
    assert.deepEqual(order, ['first@0', 'critical@100', 'normal-1@200', 'normal-2@300', 'low@400', 'background@500']);
  });

  test('an arrival that outranks every waiter takes an available token at once', async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ rate: 10, burst: 10, reserve: 0.5, queueTimeout: 10_000, clock });
    assert.equal(await tryMany(limiter, 5, 'normal'), 5);
    // 5 tokens: below background's 5.5, so a background call waits...
    const bg = track(limiter.execute(async () => 'bg', { priority: 'background' }));
    await clock.settle();
    assert.equal(limiter.queued, 1);
    // ...while a normal one does not wait behind it.
    assert.equal(await limiter.execute(async () => 'n'), 'n');
    await clock.advance(100);
    assert.equal(bg.settled, false, '5 tokens again: still below 5.5');
    await clock.advance(50);
    assert.equal(bg.value, 'bg');
  });

  test('a full queue refuses the newest lowest waiter for a higher arrival, else the arrival', async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ rate: 1, burst: 1, maxQueue: 2, clock, queueTimeout: 10_000 });
    await limiter.execute(async () => 0);
    const low1 = track(limiter.execute(async () => 'l1', { priority: 'low' }));
    const low2 = track(limiter.execute(async () => 'l2', { priority: 'low' }));
    await assert.rejects(limiter.execute(async () => 'l3', { priority: 'low' }), /2 queued/);
    const critical = track(limiter.execute(async () => 'c', { priority: 'critical' }));
    await clock.settle();
    assert.ok(low2.error instanceof OverloadedError && /shed/.test(low2.error.message));
    assert.equal(low1.settled, false);
    await clock.advance(2000);
    assert.equal(critical.value, 'c');
    assert.equal(low1.value, 'l1');
  });
});

describe('refusals', () => {
  test('wait: false is refused at once, with when the next token accrues', async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ rate: 5, burst: 1, clock });
    await limiter.execute(async () => 0);
    await clock.advance(50);
    let ran = false;
    await assert.rejects(
      limiter.execute(async () => (ran = true), { wait: false }),
      (e: unknown) => e instanceof OverloadedError && e.code === 'OVERLOADED' && /next token in 150 ms/.test(e.message),
    );
    assert.equal(ran, false);
    assert.equal(limiter.queued, 0);
  });

  test('queue timeout: refused with OverloadedError after queueTimeout, nothing left behind', async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ rate: 1, burst: 1, queueTimeout: 300, clock });
    await limiter.execute(async () => 0);
    let ran = false;
    const waiting = track(limiter.execute(async () => (ran = true)));
    await clock.advance(299);
    assert.equal(waiting.settled, false);
    await clock.advance(1);
    assert.ok(waiting.error instanceof OverloadedError && /waited 300 ms/.test(waiting.error.message));
    assert.equal(limiter.queued, 0);
    assert.equal(clock.pendingTimers, 0);
    await clock.advance(5000);
    assert.equal(ran, false);
    assert.equal(limiter.tokens, 1, 'the refused call took no token');
  });

  test('deadline: refused with DeadlineExceededError at the deadline when it comes before the queue timeout', async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ rate: 1, burst: 1, queueTimeout: 1000, clock });
    await limiter.execute(async () => 0);
    const waiting = track(limiter.execute(async () => 1, { deadline: 200 }));
    await clock.advance(199);
    assert.equal(waiting.settled, false);
    await clock.advance(1);
    assert.ok(waiting.error instanceof DeadlineExceededError);
    assert.equal(limiter.queued, 0);
    assert.equal(clock.pendingTimers, 0);
    // A deadline past already: refused at once, even with a token there, without spending it.
    await clock.advance(5000);
    await assert.rejects(limiter.execute(async () => 2, { deadline: clock.now() }), DeadlineExceededError);
    assert.equal(limiter.tokens, 1);
  });

  test('deadline carried by the signal of a DeadlineGuard in a pipeline', async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ rate: 1, burst: 1, queueTimeout: 10_000, clock });
    const guard = pipeline(new DeadlineGuard({ timeout: 250, clock }), limiter);
    await limiter.execute(async () => 0);
    const waiting = track(guard.run(async () => 1, { key: 'k', signal: new AbortController().signal, wait: true }));
    await clock.advance(250);
    assert.ok(waiting.error instanceof DeadlineExceededError);
    assert.equal(limiter.queued, 0);
    assert.equal(clock.pendingTimers, 0);
  });

  test('abort: the waiter leaves at once with AbortedError and the next one gets the token', async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ rate: 1, burst: 1, queueTimeout: 10_000, clock });
    await limiter.execute(async () => 0);
    const ac = new AbortController();
    const first = track(limiter.execute(async () => 'a', { signal: ac.signal }));
    const second = track(limiter.execute(async () => 'b'));
    await clock.advance(100);
    ac.abort(new Error('caller left'));
    await clock.settle();
    assert.ok(first.error instanceof AbortedError && first.error.code === 'ABORTED');
    assert.equal(limiter.queued, 1);
    await clock.advance(900);
    assert.equal(second.value, 'b');
    assert.equal(clock.pendingTimers, 0);
    // An already aborted call takes no token.
    await clock.advance(1000);
    await assert.rejects(limiter.execute(async () => 'c', { signal: AbortSignal.abort() }), AbortedError);
    assert.equal(limiter.tokens, 1);
  });

  test('bad options are ConfigErrors', () => {
    const bad: unknown[] = [
      undefined,
      {},
      { rate: 0 },
      { rate: -1 },
      { rate: Number.NaN },
      { rate: Infinity },
      { rate: '10' },
      { rate: 10, burst: 0.5 },
      { rate: 10, burst: Infinity },
      { rate: 10, reserve: 1.5 },
      { rate: 10, reserve: -0.1 },
      { rate: 10, queueTimeout: -1 },
      { rate: 10, queueTimeout: 2 ** 32 },
      { rate: 10, maxQueue: 1.5 },
      { rate: 10, maxQueue: -1 },
      { rate: 10, clock: {} },
    ];
    for (const options of bad) assert.throws(() => new RateLimiter(options as RateLimiterOptions), ConfigError, JSON.stringify(options));
    const defaults = new RateLimiter({ rate: 0.5 });
    assert.deepEqual([defaults.burst, defaults.reserve, defaults.queueTimeout, defaults.maxQueue], [1, 0.5, 1000, 1000]);
    assert.equal(new RateLimiter({ rate: 200 }).burst, 200);
  });
});

describe('composition', () => {
  test('in a pipeline with a ConcurrencyLimiter, both bounds hold', async () => {
    const clock = new VirtualClock();
    const rate = new RateLimiter({ rate: 20, burst: 5, queueTimeout: 60_000, clock });
    const concurrency = new ConcurrencyLimiter({ limit: 2, clock, queueTimeout: 60_000, codel: false, shedDelay: { normal: 60_000 } });
    const guard = pipeline(rate, concurrency);
    let running = 0;
    let peak = 0;
    const starts: number[] = [];
    const calls = Array.from({ length: 40 }, () =>
      guard.run(
        async () => {
          starts.push(clock.now());
          peak = Math.max(peak, ++running);
          await hold(clock, 30)();
          running--;
        },
        { key: 'k', signal: new AbortController().signal, wait: true },
      ),
    );
    await clock.runUntilIdle();
    await Promise.all(calls);
    assert.equal(starts.length, 40);
    assert.ok(peak <= 2, `peak ${peak}`);
    for (let i = 0; i < starts.length; i++) {
      for (let j = i; j < starts.length; j++) assert.ok(j - i + 1 <= 5 + (20 * (starts[j]! - starts[i]!)) / 1000 + 1e-9);
    }
  });

  test('as a Cache guard: 500 cold keys at once, origin loads per second never above the rate after the burst', async () => {
    const clock = new VirtualClock();
    const rate = 50;
    const limiter = new RateLimiter({ rate, burst: rate, queueTimeout: 30_000, clock });
    const cache = new Cache<number>({ guard: limiter, clock, ttl: 60_000, loadTimeout: 30_000 });
    const loadsPerSecond: number[] = [];
    const values = await (async () => {
      const gets = Array.from({ length: 500 }, (_, i) =>
        cache.get(`key:${i}`, async () => {
          const s = Math.floor(clock.now() / 1000);
          loadsPerSecond[s] = (loadsPerSecond[s] ?? 0) + 1;
          return i;
        }),
      );
      await clock.advance(20_000);
      return Promise.all(gets);
    })();
    assert.deepEqual(values, Array.from({ length: 500 }, (_, i) => i));
    // Second 0: the burst (50 at once) and the rate; then the rate, exactly.
    assert.equal(loadsPerSecond[0], rate + rate - 1);
    for (let s = 1; s < loadsPerSecond.length; s++) assert.ok((loadsPerSecond[s] ?? 0) <= rate, `second ${s}: ${loadsPerSecond[s]} loads`);
    assert.equal(
      loadsPerSecond.reduce((a, b) => a + b, 0),
      500,
    );
    assert.equal(limiter.queued, 0);
  });
});

describe('rate invariants (model-based)', () => {
  test('over any arrival sequence, admissions in any interval ≤ burst + rate × its length; nothing left behind', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            gap: fc.integer({ min: 0, max: 200 }),
            count: fc.integer({ min: 1, max: 5 }),
            priority: fc.constantFrom<Priority>('critical', 'normal', 'low', 'background', -5),
            wait: fc.boolean(),
            abortAfter: fc.option(fc.integer({ min: 0, max: 300 })),
            deadline: fc.option(fc.integer({ min: 0, max: 2000 })),
          }),
          { minLength: 1, maxLength: 60 },
        ),
        fc.record({
          rate: fc.double({ min: 0.5, max: 200, noNaN: true }),
          burst: fc.option(fc.double({ min: 1, max: 20, noNaN: true })),
          reserve: fc.double({ min: 0, max: 1, noNaN: true }),
          maxQueue: fc.integer({ min: 0, max: 30 }),
          queueTimeout: fc.integer({ min: 0, max: 3000 }),
        }),
        async (arrivals, o) => {
          const clock = new VirtualClock();
          const limiter = new RateLimiter({ rate: o.rate, reserve: o.reserve, maxQueue: o.maxQueue, queueTimeout: o.queueTimeout, clock, ...(o.burst === null ? {} : { burst: o.burst }) });
          const admitted: number[] = [];
          const settled: Promise<unknown>[] = [];
          for (const a of arrivals) {
            for (let i = 0; i < a.count; i++) {
              const ac = new AbortController();
              if (a.abortAfter !== null) clock.setTimer(() => ac.abort(), a.abortAfter);
              const options = { signal: ac.signal, priority: a.priority, wait: a.wait, ...(a.deadline === null ? {} : { deadline: clock.now() + a.deadline }) };
              settled.push(limiter.execute(async () => void admitted.push(clock.now()), options).catch((e: unknown) => assert.ok(e instanceof OverloadedError || e instanceof AbortedError || e instanceof DeadlineExceededError, String(e))));
            }
            const tokens = limiter.tokens;
            assert.ok(tokens >= 0 && tokens <= limiter.burst, `tokens ${tokens}`);
            await clock.advance(a.gap);
          }
          await clock.runUntilIdle();
          await Promise.all(settled);
          // Admission instants are in order; check every interval between two of them.
          for (let i = 0; i < admitted.length; i++) {
            for (let j = i; j < admitted.length; j++) {
              const allowed = limiter.burst + (o.rate * (admitted[j]! - admitted[i]!)) / 1000;
              assert.ok(j - i + 1 <= allowed + 1e-6, `${j - i + 1} admitted in [${admitted[i]}, ${admitted[j]}] > ${allowed}`);
            }
          }
          assert.equal(limiter.queued, 0);
          assert.equal(clock.pendingTimers, 0);
        },
      ),
      { numRuns: 150, seed: 20_250_101 },
    );
  });
});

describe('stats: what an operator sees of a rate limiter, and why each call was refused', () => {
  test('every refusal reason counted once, with its event; admitted and waited, with the wait each waiter paid for its token', async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ rate: 4, burst: 1, maxQueue: 2, queueTimeout: 400, clock });
    const refused: Parameters<RateLimiterEvents['refused']>[0][] = [];
    const admitted: Parameters<RateLimiterEvents['admitted']>[0][] = [];
    limiter.on('refused', (e) => refused.push(e));
    limiter.on('admitted', (e) => admitted.push(e));
    await limiter.execute(async () => 'a', { key: 'a' }); // the bucket's one token, at once: no event
    await assert.rejects(limiter.execute(async () => 0, { key: 'busy', wait: false }), OverloadedError);
    await assert.rejects(limiter.execute(async () => 0, { key: 'late', deadline: 0 }), DeadlineExceededError);
    const b = limiter.execute(async () => 'b', { key: 'b' }); // its token accrues at 250
    const c = track(limiter.execute(async () => 'c', { key: 'c', priority: 'low' })); // the queue is full
    await assert.rejects(limiter.execute(async () => 0, { key: 'full', priority: 'low' }), /refused/);
    const d = track(limiter.execute(async () => 'd', { key: 'd' })); // outranks c, which is displaced; its token would come at 500, past its 400 ms
    await clock.settle();
    assert.ok(c.error instanceof OverloadedError);
    assert.deepEqual(limiter.stats(), { admitted: 1, waited: 0, queued: 2, refused: { busy: 1, full: 1, displaced: 1, timeout: 0, deadline: 1 } });
    await clock.advance(400);
    assert.equal(await b, 'b');
    assert.ok(d.error instanceof OverloadedError && /waited 400 ms/.test(d.error.message));
    const e = track(limiter.execute(async () => 'e', { key: 'e', deadline: 450 })); // its token comes at 500
    await clock.advance(50);
    assert.ok(e.error instanceof DeadlineExceededError);
    const f = limiter.execute(async () => 'f', { key: 'f', priority: 'critical' });
    await clock.advance(50);
    assert.equal(await f, 'f');
    assert.deepEqual(limiter.stats(), { admitted: 3, waited: 2, queued: 0, refused: { busy: 1, full: 1, displaced: 1, timeout: 1, deadline: 2 } });
    assert.deepEqual(admitted, [
      { key: 'b', priority: 'normal', waitedMs: 250 },
      { key: 'f', priority: 'critical', waitedMs: 50 },
    ]);
    assert.deepEqual(
      refused.map((r) => [r.key, r.priority, r.reason]),
      [
        ['busy', 'normal', 'busy'],
        ['late', 'normal', 'deadline'],
        ['full', 'low', 'full'],
        ['c', 'low', 'displaced'],
        ['d', 'normal', 'timeout'],
        ['e', 'normal', 'deadline'],
      ],
    );
  });

  test("a caller's abort is no refusal", async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ rate: 1, burst: 1, clock });
    await limiter.execute(async () => 0);
    const ac = new AbortController();
    const waiting = track(limiter.execute(async () => 1, { signal: ac.signal }));
    await clock.settle();
    ac.abort(new Error('gone'));
    await clock.settle();
    assert.ok(waiting.error instanceof AbortedError);
    assert.deepEqual(limiter.stats(), { admitted: 1, waited: 0, queued: 0, refused: { busy: 0, full: 0, displaced: 0, timeout: 0, deadline: 0 } });
  });
});
