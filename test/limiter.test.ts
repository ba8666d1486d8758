import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { AbortedError, AimdLimit, BreakerOpenError, Cache, CircuitBreaker, ConcurrencyLimiter, type ConcurrencyLimiterEvents, ConfigError, DeadlineExceededError, GradientLimit, type Guard, keyed, OverloadedError, pipeline, VirtualClock } from '../src/index.js';
import { callContext } from '../src/guard/guard.js';
import { deferred, track } from './helpers.js';

const hold = (clock: VirtualClock, ms: number) => () => new Promise<void>((r) => clock.setTimer(r, ms));

describe('priority shedding', () => {
  test('slots go to the highest priority waiting; critical keeps its latency', async () => {
    const clock = new VirtualClock();
    const limiter = new ConcurrencyLimiter({ limit: 1, clock, codel: false, shedDelay: { normal: 10_000, low: 10_000, background: 10_000 } });
    const order: string[] = [];
    const job = (name: string) => async () => {
      order.push(name);
      await hold(clock, 10)();
    };
    const all = [
      limiter.execute(job('first')),
      limiter.execute(job('background'), { priority: 'background' }),
      limiter.execute(job('low'), { priority: 'low' }),
      limiter.execute(job('normal')),
      limiter.execute(job('critical'), { priority: 'critical' }),
    ];
    await clock.advance(100);
    await Promise.all(all);
    assert.deepEqual(order, ['first', 'critical', 'normal', 'low', 'background']);
  });

  test('arrivals are shed by queueing delay, lowest priority first', async () => {
    const clock = new VirtualClock();
    const limiter = new ConcurrencyLimiter({ limit: 1, clock, queueTimeout: 10_000, codel: false, shedDelay: { normal: 500, low: 50, background: 5 } });
    void limiter.execute(hold(clock, 10_000));
    void limiter.execute(hold(clock, 1)).catch(() => {}); // starts the queue's clock
    await clock.advance(20);
    // 20 ms of queueing delay: background (5) is shed, low (50) and normal wait.
    await assert.rejects(limiter.execute(async () => 0, { priority: 'background' }), OverloadedError);
    const low = track(limiter.execute(async () => 0, { priority: 'low' }));
    await clock.advance(40);
    // 60 ms: now low is shed too, critical never is.
    await assert.rejects(limiter.execute(async () => 0, { priority: 'low' }), /shed: queueing delay/);
    const critical = track(limiter.execute(async () => 0, { priority: 'critical' }));
    await clock.settle();
    assert.equal(low.settled, false);
    assert.equal(critical.settled, false);
    await clock.advance(20_000);
  });

  test('a full queue makes room for a higher priority by refusing the lowest', async () => {
    const clock = new VirtualClock();
    const limiter = new ConcurrencyLimiter({ limit: 1, maxQueue: 2, clock, codel: false });
    void limiter.execute(hold(clock, 100));
    const bg = track(limiter.execute(async () => 'bg', { priority: 'background' }));
    const normal = track(limiter.execute(async () => 'n'));
    const critical = track(limiter.execute(async () => 'c', { priority: 'critical' }));
    await clock.settle();
    assert.ok(bg.error instanceof OverloadedError);
    await assert.rejects(limiter.execute(async () => 'x', { priority: 'background' }), OverloadedError);
    await clock.advance(200);
    assert.equal(normal.value, 'n');
    assert.equal(critical.value, 'c');
  });
});

describe('queue discipline', () => {
  test('CoDel: once the queue stands, new waiters get the short target timeout', async () => {
    const clock = new VirtualClock();
    const limiter = new ConcurrencyLimiter({ limit: 1, clock, queueTimeout: 1000, codel: { target: 5, interval: 100 }, shedDelay: { normal: 10_000 } });
    void limiter.execute(hold(clock, 10_000));
    const early = track(limiter.execute(async () => 1));
    await clock.advance(150);
    const late = track(limiter.execute(async () => 2));
    await clock.advance(6);
    assert.ok(late.error instanceof OverloadedError && /standing queue/.test(late.error.message));
    assert.equal(early.settled, false);
    await clock.advance(1000);
    assert.ok(early.error instanceof OverloadedError);
  });

  test('adaptive LIFO: newest first once the queue stands, oldest first before', async () => {
    const clock = new VirtualClock();
    const limiter = new ConcurrencyLimiter({ limit: 1, clock, queueTimeout: 10_000, codel: { target: 10_000, interval: 100 }, shedDelay: { normal: 10_000 } });
    const order: number[] = [];
    void limiter.execute(hold(clock, 50));
    const a = limiter.execute(async () => void order.push(1));
    const b = limiter.execute(async () => void order.push(2));
    await clock.advance(60);
    await Promise.all([a, b]);
    assert.deepEqual(order, [1, 2], 'FIFO while the queue drains');
    order.length = 0;
    void limiter.execute(hold(clock, 500));
    const c = limiter.execute(hold(clock, 1)).then(() => order.push(3));
    const d = limiter.execute(async () => void order.push(4));
    const e = limiter.execute(async () => void order.push(5));
    await clock.advance(1000);
    await Promise.all([c, d, e]);
    assert.deepEqual(order, [5, 4, 3], 'LIFO once it has stood past the interval');
  });
});

describe('deadlines: nobody waits past theirs (the rest in wait-queue.test.ts, for both limiters)', () => {
  test("CoDel's target and the deadline: whichever comes first ends the wait", async () => {
    const clock = new VirtualClock();
    const limiter = new ConcurrencyLimiter({ limit: 1, clock, queueTimeout: 1000, codel: { target: 50, interval: 100 }, shedDelay: { normal: 10_000 } });
    void limiter.execute(hold(clock, 10_000));
    void limiter.execute(async () => 0).catch(() => {}); // starts the queue's clock
    await clock.advance(150); // the queue stands: newcomers get 50 ms
    const soon = track(limiter.execute(async () => 1, { deadline: clock.now() + 10 }));
    const later = track(limiter.execute(async () => 2, { deadline: clock.now() + 500 }));
    await clock.advance(10);
    assert.ok(soon.error instanceof DeadlineExceededError);
    assert.equal(later.settled, false);
    await clock.advance(40);
    assert.ok(later.error instanceof OverloadedError && /standing queue/.test(later.error.message));
    assert.equal(limiter.stats().shed.timeout, 2, 'both ran out of time to wait');
    await clock.advance(10_000);
  });

  test('a call that finds a slot free runs at once, whatever its deadline: the admit-at-once path reads none, its task has the signal', async () => {
    const clock = new VirtualClock();
    const limiter = new ConcurrencyLimiter({ limit: 1, clock });
    await clock.advance(100);
    assert.equal(await limiter.execute(async () => 'ran', { deadline: 50 }), 'ran');
    assert.equal(limiter.stats().admitted, 1);
  });
});

describe('adaptive limits', () => {
  test('AIMD grows while calls are fast and the limit is used, shrinks on slowness', () => {
    const aimd = new AimdLimit({ initial: 10, max: 100, latencyThresholdMs: 100 });
    for (let i = 0; i < 200; i++) aimd.sample(10, aimd.current, false);
    const grown = aimd.current;
    assert.ok(grown > 10, `grew to ${grown}`);
    aimd.sample(500, grown, false);
    assert.equal(aimd.current, Math.floor(grown * 0.9));
    aimd.sample(10, 5, true);
    assert.ok(aimd.current < grown * 0.9);
    const idle = new AimdLimit({ initial: 10 });
    for (let i = 0; i < 1000; i++) idle.sample(10, 1, false);
    assert.equal(idle.current, 10, 'an unused limit does not drift up');
  });

  test('gradient limit shrinks when latency rises above its no-load level, and recovers', () => {
    const g = new GradientLimit({ initial: 50, max: 200 });
    for (let i = 0; i < 500; i++) g.sample(10, g.current, false);
    const calm = g.current;
    for (let i = 0; i < 200; i++) g.sample(100, g.current, false);
    const slow = g.current;
    assert.ok(slow < calm / 2, `calm ${calm}, slow ${slow}`);
    for (let i = 0; i < 2000; i++) g.sample(10, g.current, false);
    assert.ok(g.current > slow * 2, `recovered to ${g.current}`);
  });

  test('a limiter with an adaptive limit lowers its concurrency when the dependency slows', async () => {
    const clock = new VirtualClock();
    const limiter = new ConcurrencyLimiter({ limit: new AimdLimit({ initial: 20, latencyThresholdMs: 100 }), clock, queueTimeout: 60_000, shedDelay: { normal: 60_000 } });
    let latency = 10;
    const calls = Array.from({ length: 400 }, () => limiter.execute(() => hold(clock, latency)()));
    await clock.advance(100);
    latency = 300;
    await clock.advance(60_000);
    await Promise.allSettled(calls);
    assert.ok(limiter.limit < 20, `limit ${limiter.limit}`);
  });

  test('bad limits are ConfigErrors', () => {
    assert.throws(() => new AimdLimit({ backoffRatio: 1.5 }), ConfigError);
    assert.throws(() => new AimdLimit({ initial: 0 }), ConfigError);
    assert.throws(() => new GradientLimit({ tolerance: 0.5 }), ConfigError);
    assert.throws(() => new ConcurrencyLimiter({ limit: {} as never }), ConfigError);
    assert.throws(() => new ConcurrencyLimiter({ codel: { target: -1, interval: 100 } }), ConfigError);
    assert.throws(() => new ConcurrencyLimiter({ shedDelay: { low: Number.NaN } }), ConfigError);
  });
});

describe('limiter invariants (model-based)', () => {
  test('never more than the limit in flight, nothing lost, every refusal counted once, no timer or listener left', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            gap: fc.integer({ min: 0, max: 20 }),
            duration: fc.integer({ min: 0, max: 100 }),
            priority: fc.constantFrom('critical' as const, 'normal' as const, 'low' as const, 'background' as const),
            abortAfter: fc.option(fc.integer({ min: 0, max: 50 })),
            deadlineIn: fc.option(fc.integer({ min: -5, max: 300 })),
            fails: fc.boolean(),
          }),
          { minLength: 1, maxLength: 120 },
        ),
        fc.integer({ min: 1, max: 8 }),
        async (calls, limit) => {
          const clock = new VirtualClock();
          const limiter = new ConcurrencyLimiter({ limit, maxQueue: 16, queueTimeout: 200, clock });
          let running = 0;
          let peak = 0;
          let started = 0;
          let refused = 0;
          // Abort listeners still attached to signals that never fired (a fired
          // signal drops its `once` listeners by itself).
          const attached = new Map<AbortSignal, number>();
          const settled: Promise<unknown>[] = [];
          for (const c of calls) {
            const ac = new AbortController();
            const add = ac.signal.addEventListener.bind(ac.signal);
            const remove = ac.signal.removeEventListener.bind(ac.signal);
            attached.set(ac.signal, 0);
            ac.signal.addEventListener = ((...args: Parameters<typeof add>) => (attached.set(ac.signal, attached.get(ac.signal)! + 1), add(...args))) as typeof add;
            ac.signal.removeEventListener = ((...args: Parameters<typeof remove>) => (attached.set(ac.signal, attached.get(ac.signal)! - 1), remove(...args))) as typeof remove;
            if (c.abortAfter !== null) clock.setTimer(() => ac.abort(), c.abortAfter);
            settled.push(
              limiter
                .execute(
                  async () => {
                    started++;
                    running++;
                    peak = Math.max(peak, running);
                    await hold(clock, c.duration)();
                    running--;
                    if (c.fails) throw new Error('dependency failed');
                  },
                  { signal: ac.signal, priority: c.priority, ...(c.deadlineIn === null ? {} : { deadline: clock.now() + c.deadlineIn }) },
                )
                .catch((e: unknown) => {
                  if (e instanceof OverloadedError || e instanceof DeadlineExceededError) refused++;
                  else assert.ok(e instanceof AbortedError || (e instanceof Error && e.message === 'dependency failed'), String(e));
                }),
            );
            await clock.advance(c.gap);
          }
          await clock.runUntilIdle();
          await Promise.all(settled);
          assert.ok(peak <= limit, `peak ${peak} > limit ${limit}`);
          assert.equal(limiter.inFlight, 0);
          assert.equal(limiter.queued, 0);
          assert.equal(clock.pendingTimers, 0);
          const { admitted, shed } = limiter.stats();
          assert.equal(admitted, started);
          assert.equal(Object.values(shed).reduce((a, b) => a + b, 0), refused);
          const left = [...attached].filter(([signal, n]) => !signal.aborted && n > 0).length;
          assert.equal(left, 0, `${left} signals still carry abort listeners`);
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('failure domains', () => {
  test('keyed: one failing shard fills its own limiter, the others go on', async () => {
    const clock = new VirtualClock();
    const perShard = keyed(() => new ConcurrencyLimiter({ limit: 1, maxQueue: 0, clock }), { domain: (key) => key.split(':')[0]! });
    const stuck = deferred<void>();
    void perShard.run(() => stuck.promise, callContext({ key: 'a:1' }));
    await assert.rejects(perShard.run(async () => 1, callContext({ key: 'a:2' })), OverloadedError);
    assert.equal(await perShard.run(async () => 2, callContext({ key: 'b:1' })), 2);
    assert.equal(perShard.domains, 2);
    stuck.resolve();
  });

  test('keyed: the number of domains is bounded', async () => {
    const perKey = keyed(() => new ConcurrencyLimiter({ limit: 1, clock: new VirtualClock() }), { maxDomains: 10 });
    for (let i = 0; i < 1000; i++) await perKey.run(async () => i, callContext({ key: `k${i}` }));
    assert.equal(perKey.domains, 10);
  });
});

describe('guards in the cache', () => {
  const refusing = (error: Error): Guard & { calls: number } => ({
    calls: 0,
    run() {
      this.calls++;
      return Promise.reject(error);
    },
  });

  for (const error of [new BreakerOpenError('open', 1000), new OverloadedError('full')]) {
    test(`${error.name} from the guard: stale served, key backs off, nothing deleted, no storm`, async () => {
      const clock = new VirtualClock();
      let guard: Guard = { run: (task, ctx) => task(ctx.signal) };
      const cache = new Cache<number>({ clock, ttl: 100, staleFor: 60_000, guard: { run: (t, c) => guard.run(t, c) } });
      await cache.get('k', () => 1);
      const refuse = refusing(error);
      guard = refuse;
      await clock.advance(200);
      let loads = 0;
      for (let i = 0; i < 200; i++) {
        assert.equal(await cache.get('k', () => ++loads), 1);
        await clock.advance(5);
      }
      assert.equal(loads, 0);
      assert.ok(refuse.calls <= 5, `guard asked ${refuse.calls} times`);
      assert.equal(cache.peek('k'), 1);
      // With nothing to serve, the caller fails fast with the guard's error.
      await assert.rejects(cache.get('cold', () => 2), (e) => e === error);
    });
  }

  test('a pipeline in the cache: the load carries its priority and deadline to every guard', async () => {
    const clock = new VirtualClock();
    const seen: unknown[] = [];
    const spy: Guard = {
      run(task, ctx) {
        seen.push({ priority: ctx.priority, deadline: ctx.deadline, wait: ctx.wait });
        return task(ctx.signal);
      },
    };
    const cache = new Cache<number>({ clock, ttl: 100, staleFor: 10_000, loadTimeout: 2000, guard: pipeline(spy, new ConcurrencyLimiter({ clock }), spy) });
    await cache.get('k', () => 1, { priority: 'critical' });
    await clock.advance(150);
    await cache.get('k', () => 2);
    await clock.settle();
    assert.deepEqual(seen, [
      { priority: 'critical', deadline: 2000, wait: true },
      { priority: 'critical', deadline: 2000, wait: true },
      { priority: 'background', deadline: 2150, wait: false },
      { priority: 'background', deadline: 2150, wait: false },
    ]);
  });

  test("a hanging dependency trips a breaker inside the cache: the load's hard timeout counts as a failure", async () => {
    const clock = new VirtualClock();
    const breaker = new CircuitBreaker({ clock, consecutiveFailures: 3 });
    const cache = new Cache<number>({ clock, loadTimeout: 100, guard: breaker });
    let calls = 0;
    const hang = (): Promise<number> => (calls++, new Promise<number>(() => {}));
    for (let i = 0; i < 3; i++) {
      const p = track(cache.get('k', hang));
      await clock.advance(100);
      assert.equal((p.error as { code?: string }).code, 'LOAD_TIMEOUT');
      if (i < 2) await clock.advance(2_000); // past the key's backoff
    }
    assert.equal(breaker.state, 'open');
    // Another key now fails fast without reaching the dependency.
    await assert.rejects(cache.get('other', hang), BreakerOpenError);
    assert.equal(calls, 3);
  });

  test('the hard timeout covers the queue: a load stuck behind the budget ends at loadTimeout', async () => {
    const clock = new VirtualClock();
    const cache = new Cache<number>({ clock, loadTimeout: 500, guard: new ConcurrencyLimiter({ limit: 1, queueTimeout: 10_000, clock, shedDelay: { normal: 10_000 } }) });
    void cache.get('a', () => new Promise<number>(() => {})).catch(() => {});
    const b = track(cache.get('b', () => 2));
    await clock.advance(500);
    assert.equal(b.settled, true);
    assert.equal((b.error as { code?: string }).code, 'LOAD_TIMEOUT');
    await clock.runUntilIdle();
  });
});

describe('stats: what an operator sees of a limiter, and why each call was shed', () => {
  type Shed = Parameters<ConcurrencyLimiterEvents['shed']>[0];
  type Admitted = Parameters<ConcurrencyLimiterEvents['admitted']>[0];

  test('every shed reason counted once, with its event; admitted and waited, with the queueing delay each waiter paid', async () => {
    const clock = new VirtualClock();
    const limiter = new ConcurrencyLimiter({ limit: 1, maxQueue: 2, queueTimeout: 1000, clock, codel: false, shedDelay: { normal: 500, low: 50, background: 5 } });
    const shed: Shed[] = [];
    const admitted: Admitted[] = [];
    limiter.on('shed', (e) => shed.push(e));
    limiter.on('admitted', (e) => admitted.push(e));
    const a = limiter.execute(hold(clock, 100), { key: 'a' }); // a slot at once: no admitted event
    await assert.rejects(limiter.execute(async () => 0, { key: 'busy', wait: false }), OverloadedError);
    const b = track(limiter.execute(async () => 'b', { key: 'b' }));
    await clock.advance(10);
    await assert.rejects(limiter.execute(async () => 0, { key: 'delay', priority: 'background' }), /queueing delay/); // 10 ms > 5
    const c = track(limiter.execute(async () => 'c', { key: 'c', priority: 'low' })); // 10 ms < 50: queued, the queue is full
    await assert.rejects(limiter.execute(async () => 0, { key: 'full', priority: 'low' }), /refused/); // does not outrank c
    const d = limiter.execute(hold(clock, 2000), { key: 'd', priority: 'critical' }); // outranks c, which is displaced
    await clock.settle();
    assert.ok(c.error instanceof OverloadedError);
    assert.deepEqual(limiter.stats(), { limit: 1, inFlight: 1, queued: 2, admitted: 1, waited: 0, shed: { busy: 1, delay: 1, full: 1, displaced: 1, timeout: 0 } });

    await clock.advance(90); // a ends at 100: d, the higher priority, gets the slot after 90 ms
    await a;
    assert.deepEqual(admitted, [{ key: 'd', priority: 'critical', waitedMs: 90 }]);
    await clock.advance(900); // b has waited its queueTimeout behind d
    assert.ok(b.error instanceof OverloadedError);
    await clock.advance(2000);
    await d;
    assert.deepEqual(limiter.stats(), { limit: 1, inFlight: 0, queued: 0, admitted: 2, waited: 1, shed: { busy: 1, delay: 1, full: 1, displaced: 1, timeout: 1 } });
    assert.deepEqual(shed, [
      { key: 'busy', priority: 'normal', reason: 'busy' },
      { key: 'delay', priority: 'background', reason: 'delay' },
      { key: 'full', priority: 'low', reason: 'full' },
      { key: 'c', priority: 'low', reason: 'displaced' },
      { key: 'b', priority: 'normal', reason: 'timeout' },
    ]);
  });

  test("CoDel's standing-queue timeout is a timeout too; a caller's abort is no shed", async () => {
    const clock = new VirtualClock();
    const limiter = new ConcurrencyLimiter({ limit: 1, clock, queueTimeout: 1000, codel: { target: 5, interval: 100 }, shedDelay: { normal: 10_000 } });
    const reasons: string[] = [];
    limiter.on('shed', (e) => reasons.push(e.reason));
    void limiter.execute(hold(clock, 10_000));
    const ac = new AbortController();
    const leaving = track(limiter.execute(async () => 1, { signal: ac.signal }));
    await clock.advance(150);
    const late = track(limiter.execute(async () => 2));
    await clock.advance(6);
    assert.ok(late.error instanceof OverloadedError && /standing queue/.test(late.error.message));
    ac.abort(new Error('gone'));
    await clock.settle();
    assert.ok(leaving.settled);
    assert.deepEqual(reasons, ['timeout']);
    const { shed, queued, inFlight, admitted, waited } = limiter.stats();
    assert.deepEqual({ shed, queued, inFlight, admitted, waited }, { shed: { busy: 0, delay: 0, full: 0, displaced: 0, timeout: 1 }, queued: 0, inFlight: 1, admitted: 1, waited: 0 });
    await clock.advance(10_000);
  });

  test('an adaptive limit is read as it stands now', () => {
    const clock = new VirtualClock();
    const limiter = new ConcurrencyLimiter({ limit: new AimdLimit({ initial: 7, min: 1, max: 50 }), clock });
    assert.equal(limiter.stats().limit, 7);
  });
});
