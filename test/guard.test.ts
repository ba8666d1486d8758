import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AbortedError, AdaptiveThrottle, ArgumentError, Backoff, Balancer, CircuitBreaker, ConcurrencyLimiter, ConfigError, DeadlineGuard, guarded, keyed, OverloadedError, pipeline, RateLimiter, Retry, RetryBudget, VirtualClock } from '../src/index.js';
import { deferred, track } from './helpers.js';

const ctx = (key = 'k', signal = new AbortController().signal, wait = true) => ({ key, signal, wait });

describe('Backoff', () => {
  test('grows by its factor, stays within its jitter band and under its cap', () => {
    const b = new Backoff({ base: 100, max: 1000, factor: 2, jitter: 0.2 });
    let r = 0;
    const rand = (): number => (r = (r + 0.37) % 1);
    for (let n = 1; n <= 10; n++) {
      const exp = Math.min(1000, 100 * 2 ** (n - 1));
      for (let i = 0; i < 20; i++) {
        const d = b.delay(n, rand);
        assert.ok(d >= exp * 0.8 - 1e-9 && d <= Math.min(1000, exp * 1.2) + 1e-9, `delay(${n}) = ${d}`);
        assert.ok(d >= b.minDelay(n) - 1e-9);
      }
    }
    assert.equal(b.delay(5000, () => 0.5), 1000);
  });

  test('rejects nonsense', () => {
    assert.throws(() => new Backoff({ base: 0 }), ConfigError);
    assert.throws(() => new Backoff({ jitter: 1.5 }), ConfigError);
    assert.throws(() => new Backoff({ factor: 0.5 }), ConfigError);
    assert.throws(() => new Backoff({ base: 10, max: 5 }), ConfigError);
  });
});

describe('ConcurrencyLimiter', () => {
  test('never runs more than its limit; queued tasks run in arrival order', async () => {
    const clock = new VirtualClock();
    const limiter = new ConcurrencyLimiter({ limit: 2, maxQueue: 10, queueTimeout: 10_000, clock });
    const gates = Array.from({ length: 5 }, () => deferred<void>());
    const order: number[] = [];
    let running = 0;
    let peak = 0;
    const runs = gates.map((g, i) =>
      limiter.run(async () => {
        order.push(i);
        running++;
        peak = Math.max(peak, running);
        await g.promise;
        running--;
      }, ctx()),
    );
    await clock.settle();
    assert.equal(limiter.inFlight, 2);
    assert.equal(limiter.queued, 3);
    for (const g of gates) {
      g.resolve();
      await clock.settle();
    }
    await Promise.all(runs);
    assert.equal(peak, 2);
    assert.deepEqual(order, [0, 1, 2, 3, 4]);
    assert.equal(limiter.inFlight, 0);
  });

  test('refuses beyond the queue, after the queue timeout, and at once when the caller will not wait', async () => {
    const clock = new VirtualClock();
    const limiter = new ConcurrencyLimiter({ limit: 1, maxQueue: 1, queueTimeout: 100, clock });
    const hold = deferred<void>();
    const first = limiter.run(() => hold.promise, ctx());
    const queued = track(limiter.run(async () => 1, ctx()));
    await assert.rejects(limiter.run(async () => 2, ctx()), OverloadedError);
    await assert.rejects(limiter.run(async () => 3, ctx('k', new AbortController().signal, false)), OverloadedError);
    await clock.advance(100);
    assert.ok(queued.error instanceof OverloadedError);
    assert.equal(limiter.queued, 0);
    hold.resolve();
    await first;
    assert.equal(limiter.inFlight, 0);
  });

  test('an abort while queued leaves the queue and does not leak its slot', async () => {
    const clock = new VirtualClock();
    const limiter = new ConcurrencyLimiter({ limit: 1, clock });
    const hold = deferred<void>();
    const first = limiter.run(() => hold.promise, ctx());
    const ac = new AbortController();
    const queued = track(limiter.run(async () => 1, ctx('k', ac.signal)));
    await clock.settle();
    ac.abort();
    await clock.settle();
    assert.ok(queued.error instanceof AbortedError);
    assert.equal(limiter.queued, 0);
    assert.equal(clock.pendingTimers, 0);
    hold.resolve();
    await first;
    assert.equal(await limiter.run(async () => 7, ctx()), 7);
    assert.equal(limiter.inFlight, 0);
  });

  test('a task that throws releases its slot', async () => {
    const limiter = new ConcurrencyLimiter({ limit: 1, clock: new VirtualClock() });
    await assert.rejects(limiter.run(() => Promise.reject(new Error('x')), ctx()));
    assert.equal(limiter.inFlight, 0);
  });

  test('bad configuration is a ConfigError', () => {
    assert.throws(() => new ConcurrencyLimiter({ limit: 0 }), ConfigError);
    assert.throws(() => new ConcurrencyLimiter({ maxQueue: -1 }), ConfigError);
    assert.throws(() => new ConcurrencyLimiter({ queueTimeout: Number.NaN }), ConfigError);
  });
});

describe('a task that is not a function is a programming error, not a dependency failure (issue 13, item 2)', () => {
  const notTasks = [42, null, undefined, 'fetch', {}] as unknown as ((signal: AbortSignal) => Promise<number>)[];

  test('every guard refuses it with ArgumentError and changes no state', async () => {
    const clock = new VirtualClock({ seed: 1 });
    const breaker = new CircuitBreaker({ clock, consecutiveFailures: 1 });
    const budget = new RetryBudget({ clock, minPerSecond: 0, ratio: 0.5 });
    const retry = new Retry({ clock, budget, baseDelay: 1 });
    const limiter = new ConcurrencyLimiter({ clock, limit: 1 });
    const rate = new RateLimiter({ clock, rate: 1, burst: 1 });
    const throttle = new AdaptiveThrottle({ clock });
    const deadline = new DeadlineGuard({ clock, timeout: 100 });
    const perKey = keyed(() => new CircuitBreaker({ clock, consecutiveFailures: 1 }), { maxDomains: 1 });
    const balancer = new Balancer<string>({ clock, upstreams: [{ id: 'a', target: 'a' }], outliers: { consecutiveErrors: 1 } });
    const guards = { breaker, retry, limiter, rate, throttle, deadline, perKey, pipeline: pipeline() };
    for (const task of notTasks) {
      for (const [name, guard] of Object.entries(guards)) await assert.rejects(guarded(guard, task), ArgumentError, name);
      await assert.rejects(balancer.run(task as never), ArgumentError, 'balancer');
    }
    assert.equal(breaker.state, 'closed', 'no failure counted: one would have tripped it');
    assert.equal(limiter.inFlight, 0);
    assert.equal(rate.tokens, 1, 'no token taken');
    assert.equal(throttle.probability, 0);
    assert.equal(perKey.domains, 0, 'no domain guard made');
    assert.equal(balancer.snapshot().upstreams[0]!.state, 'healthy', 'no upstream ejected');
    // The budget was not credited by refused calls: with no floor, a real failure finds nothing to retry with.
    let calls = 0;
    await assert.rejects(
      retry.execute(async () => {
        calls++;
        throw new Error('down');
      }),
      /down/,
    );
    assert.equal(calls, 1, 'one request recorded (0.5 of a retry) is not enough for a retry');
    assert.equal(await guarded(breaker, async () => 7), 7);
  });
});
