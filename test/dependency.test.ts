import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BreakerOpenError, ConfigError, Dependency, type DependencyOptions, deadlineOf, LoadTimeoutError, type PickedUpstream, RetryBudget, runInRequestScope, VirtualClock } from '../src/index.js';
import { settleOn } from './helpers.js';

// The transport-free core of damper/http: the composition a service deploys
// (retry under a budget, the balancer, a throttle and a breaker per upstream,
// deadlines), with the attempt supplied by the caller. Virtual time: the
// attempts are simulated upstreams that answer after a delay, or fail.

type Behaviour = 'ok' | 'fail' | 'hang' | 'shed';

/** Upstreams named a, b, …, each answering per its behaviour after `ms`; every attempt logged. */
function world(behaviours: Record<string, Behaviour>, ms = 10) {
  const clock = new VirtualClock({ seed: 1 });
  const log: string[] = [];
  const attempt = (u: PickedUpstream<string>, signal: AbortSignal): Promise<string> => {
    log.push(u.id);
    const b = behaviours[u.id]!;
    return new Promise((resolve, reject) => {
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      if (b === 'hang') return;
      clock.setTimer(() => {
        if (b === 'ok') resolve(u.target);
        else if (b === 'shed') reject(Object.assign(new Error('503'), { status: 503 }));
        else reject(new Error(`${u.id} failed`));
      }, ms);
    });
  };
  const make = (options: Partial<DependencyOptions<string>> = {}) =>
    new Dependency<string>({ upstreams: Object.keys(behaviours).map((id) => ({ id, target: `answer of ${id}` })), clock, budget: new RetryBudget({ clock, ratio: 1, minPerSecond: 1_000 }), retry: { baseDelay: 1, maxDelay: 2 }, ...options });
  return { clock, log, attempt, make };
}


describe('one composition, whatever carries the calls', () => {
  test('a call is answered by an upstream the balancer picks; a failed attempt is retried elsewhere, never on the upstream that just failed it', async () => {
    const { clock, log, attempt, make } = world({ a: 'fail', b: 'ok' });
    const d = make({ breaker: false, throttle: false });
    for (let i = 0; i < 20; i++) {
      const from = log.length;
      const out = await settleOn(clock, d.call(attempt));
      assert.equal(out.value, 'answer of b');
      const tried = log.slice(from);
      for (let j = 1; j < tried.length; j++) assert.notEqual(tried[j], tried[j - 1], `a retry went back to ${tried[j]!}`);
    }
    assert.ok(d.stats().retry.retries > 0);
    d.close();
  });

  test('a call that may not be repeated is sent once', async () => {
    const { clock, log, attempt, make } = world({ a: 'fail' });
    const d = make({ breaker: false, throttle: false });
    const out = await settleOn(clock, d.call(attempt, { idempotent: false }));
    assert.match(String(out.error), /a failed/);
    assert.deepEqual(log, ['a']);
  });

  test("the deadline is the earliest of the caller's, the timeout and the admitted request being served, and each attempt's signal carries it", async () => {
    const { clock, make } = world({ a: 'hang' });
    const d = make({ breaker: false, throttle: false, timeout: 500, retry: { maxAttempts: 1 } });
    const seen: (number | undefined)[] = [];
    const hang = (_: PickedUpstream<string>, signal: AbortSignal): Promise<string> => (seen.push(deadlineOf(signal)), new Promise(() => {}));
    void settleOn(clock, d.call(hang, { deadline: 300 }));
    void settleOn(clock, d.call(hang));
    const scope = { deadline: clock.now() + 200, clock, priority: 'low' as const, signal: new AbortController().signal };
    void settleOn(clock, runInRequestScope(scope, () => d.call(hang)));
    await clock.runUntilIdle();
    assert.deepEqual(seen, [300, 500, 200]);
  });

  test('a hung upstream: the attempt is cut at its timeout and counted against the upstream', async () => {
    const { clock, attempt, make } = world({ a: 'hang', b: 'ok' });
    const d = make({ breaker: false, throttle: false, retry: { attemptTimeout: 100, maxAttempts: 2, baseDelay: 1, maxDelay: 2 } });
    let timeouts = 0;
    d.retry.on('retry', ({ error }) => void (error instanceof LoadTimeoutError && timeouts++));
    for (let i = 0; i < 10; i++) assert.equal((await settleOn(clock, d.call(attempt))).value, 'answer of b');
    assert.ok(timeouts > 0, 'some calls went to the hung one first');
    const a = d.balancer.snapshot().upstreams.find((u) => u.id === 'a')!;
    assert.ok(a.consecutiveErrors > 0 || a.ejections > 0, `the hung upstream was held to account: ${JSON.stringify(a)}`);
  });

  test('bad options and a bad attempt are ConfigErrors', async () => {
    const { clock, make } = world({ a: 'ok' });
    assert.throws(() => new Dependency({ upstreams: [], clock }), ConfigError);
    assert.throws(() => make({ breakerReach: 'sometimes' as 'bounded' }), ConfigError);
    assert.throws(() => make({ countsAgainst: 42 as unknown as () => boolean }), ConfigError);
    const d = make();
    await assert.rejects(d.call(42 as unknown as () => Promise<string>), ConfigError);
    await assert.rejects(d.call(async () => 'x', { deadline: 'soon' as unknown as number }), ConfigError);
    await assert.rejects(d.call(async () => 'x', { idempotent: 'yes' as unknown as boolean }), ConfigError);
  });
});

describe('never remove the last capacity (principle 5): open breakers are bounded like ejection', () => {
  /** A dependency whose breakers open at the second failure in a row and stay open a minute; one attempt per call. */
  const tripping = { breaker: { consecutiveFailures: 2, openFor: 60_000 }, throttle: false as const, retry: { maxAttempts: 1 } };

  test("the only upstream's open breaker does not refuse every call: the attempt goes past it (through the throttle)", async () => {
    const { clock, log, attempt, make } = world({ a: 'fail' });
    const d = make(tripping);
    for (let i = 0; i < 2; i++) await settleOn(clock, d.call(attempt));
    assert.equal(d.stats().upstreams[0]!.breaker!.state, 'open');
    const out = await settleOn(clock, d.call(attempt));
    assert.match(String(out.error), /a failed/, 'the upstream was called, and its own answer is the caller\'s');
    assert.equal(log.length, 3);
  });

  test("with breakerReach 'unbounded' the only upstream's open breaker refuses, and nothing is sent", async () => {
    const { clock, log, attempt, make } = world({ a: 'fail' });
    const d = make({ ...tripping, breakerReach: 'unbounded' });
    for (let i = 0; i < 2; i++) await settleOn(clock, d.call(attempt));
    const out = await settleOn(clock, d.call(attempt));
    assert.ok(out.error instanceof BreakerOpenError, String(out.error));
    assert.equal(log.length, 2);
  });

  test('of two upstreams, one open breaker is honoured (the other serves); two are not', async () => {
    const { clock, log, attempt, make } = world({ a: 'fail', b: 'ok' });
    const d = make(tripping);
    // Trip a's breaker: calls until it has failed twice.
    while (d.stats().upstreams[0]!.breaker!.state !== 'open') await settleOn(clock, d.call(attempt));
    const from = log.length;
    for (let i = 0; i < 20; i++) assert.equal((await settleOn(clock, d.call(attempt))).value, 'answer of b');
    assert.ok(!log.slice(from).includes('a'), 'a is out while b serves');
  });

  test("an upstream out by its health checks counts: the open breaker of the last one left does not refuse (the Missourian's second server)", async () => {
    const { clock, log, attempt, make } = world({ a: 'hang', b: 'shed' });
    // a is hung: it never answers a health check either. b carries everything and sheds.
    const health = { check: (target: string) => (target === 'answer of a' ? new Promise<void>(() => {}) : Promise.resolve()), interval: 1_000, timeout: 500, unhealthyThreshold: 1, healthyThreshold: 1 };
    const d = make({ ...tripping, balancer: { health } });
    /** Advances the clock until `p` settles (the health checks keep timers pending for ever: the clock is never idle). */
    const until = async (p: Promise<unknown>): Promise<{ error?: unknown }> => {
      const out: { error?: unknown; done?: true } = {};
      p.then(
        () => (out.done = true),
        (error: unknown) => ((out.error = error), (out.done = true)),
      );
      while (out.done !== true) await clock.advance(10);
      return out;
    };
    await clock.advance(2_000);
    assert.equal(d.stats().balancer.upstreams.find((u) => u.id === 'a')!.state, 'unhealthy');
    while (d.stats().upstreams.find((u) => u.id === 'b')!.breaker!.state !== 'open') await until(d.call(attempt));
    const from = log.length;
    const out = await until(d.call(attempt));
    assert.deepEqual(log.slice(from), ['b'], 'the call went to b past its open breaker: a and b out would be every upstream');
    assert.match(String(out.error), /503/, "b's own answer is the caller's, not a BreakerOpenError");
    d.close();
  });

  test('an upstream shedding (a 503) trips its breaker but is never ejected by the balancer: shedding is alive', async () => {
    const { clock, attempt, make } = world({ a: 'shed', b: 'ok' });
    const d = make({ throttle: false, retry: { maxAttempts: 1 }, balancer: { outliers: { consecutiveErrors: 2 } } });
    for (let i = 0; i < 40; i++) await settleOn(clock, d.call(attempt));
    const a = d.stats().balancer.upstreams.find((u) => u.id === 'a')!;
    assert.equal(a.ejections, 0, JSON.stringify(a));
  });
});
