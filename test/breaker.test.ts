import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { describe, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { type BreakerEvents, CircuitBreaker, type CircuitBreakerOptions } from '../src/guard/breaker.js';
import { pipeline } from '../src/guard/guard.js';
import { AbortedError, BreakerOpenError, ConfigError, LoadTimeoutError, ValidationError, VirtualClock } from '../src/index.js';
import { deferred, track } from './helpers.js';

const ok = async (): Promise<number> => 1;
const boom = async (): Promise<never> => {
  throw new Error('boom');
};

function setup(options: CircuitBreakerOptions = {}): { clock: VirtualClock; breaker: CircuitBreaker; transitions: Parameters<BreakerEvents['state']>[0][] } {
  const clock = new VirtualClock();
  const breaker = new CircuitBreaker({ clock, ...options });
  const transitions: Parameters<BreakerEvents['state']>[0][] = [];
  breaker.on('state', (e) => transitions.push(e));
  return { clock, breaker, transitions };
}

async function fail(breaker: CircuitBreaker, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await assert.rejects(breaker.execute(boom), /boom/);
}

/** A task that never settles unless its signal aborts; counts its calls. */
function hanging(): { task: (signal: AbortSignal) => Promise<never>; calls: () => number; signals: AbortSignal[] } {
  const signals: AbortSignal[] = [];
  return {
    task: (signal) => {
      signals.push(signal);
      return new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
    },
    calls: () => signals.length,
    signals,
  };
}

describe('CircuitBreaker: closed', () => {
  test('passes values and errors through, and trips on consecutiveFailures failures in a row', async () => {
    const { breaker, transitions } = setup({ consecutiveFailures: 3 });
    assert.equal(await breaker.execute(ok), 1);
    await fail(breaker, 2);
    assert.equal(await breaker.execute(ok), 1); // a success resets the run
    await fail(breaker, 2);
    assert.equal(breaker.state, 'closed');
    await fail(breaker, 1);
    assert.equal(breaker.state, 'open');
    assert.deepEqual(transitions.map((t) => [t.from, t.to, t.reason]), [['closed', 'open', 'consecutive-failures']]);
  });

  test('a task that throws synchronously is a failure, and its error reaches the caller', async () => {
    const { breaker } = setup({ consecutiveFailures: 2 });
    const sync = (): Promise<number> => {
      throw new TypeError('sync');
    };
    await assert.rejects(breaker.execute(sync), TypeError);
    await assert.rejects(breaker.execute(sync), TypeError);
    assert.equal(breaker.state, 'open');
  });

  test('trips on the failure rate only once minimumCalls calls are in the window', async () => {
    const { breaker, transitions } = setup({ consecutiveFailures: 1000, minimumCalls: 20, failureRateThreshold: 0.5 });
    // 19 calls, all failures but one: a 95 % rate, below the call floor.
    await fail(breaker, 18);
    await breaker.execute(ok);
    assert.equal(breaker.state, 'closed');
    assert.equal(breaker.stats().calls, 19);
    await fail(breaker, 1);
    assert.equal(breaker.state, 'open');
    assert.equal(transitions[0]?.reason, 'failure-rate');
  });

  test('a rate at the threshold does not trip, above it does', async () => {
    const { breaker } = setup({ consecutiveFailures: 1000, minimumCalls: 10, failureRateThreshold: 0.5 });
    for (let i = 0; i < 5; i++) {
      await breaker.execute(ok);
      await fail(breaker, 1);
    }
    assert.equal(breaker.state, 'closed'); // 5 / 10 = 0.5
    await fail(breaker, 1);
    assert.equal(breaker.state, 'open'); // 6 / 11
  });

  test('the window slides: failures older than `window` are forgotten, bucket by bucket', async () => {
    const { clock, breaker } = setup({ consecutiveFailures: 1000, minimumCalls: 10, failureRateThreshold: 0.5, window: 1000, windowBuckets: 10 });
    await fail(breaker, 9);
    assert.deepEqual([breaker.stats().calls, breaker.stats().failures], [9, 9]);
    await clock.advance(500);
    assert.equal(breaker.stats().failures, 9);
    await clock.advance(500); // the bucket at 0 ms has left the window
    assert.deepEqual([breaker.stats().calls, breaker.stats().failures], [0, 0]);
    for (let i = 0; i < 10; i++) await breaker.execute(ok);
    await fail(breaker, 1);
    assert.equal(breaker.state, 'closed');
    assert.deepEqual([breaker.stats().calls, breaker.stats().failures], [11, 1]);
  });

  test('memory is bounded: a long run of calls keeps the same fixed ring', async () => {
    const { clock, breaker } = setup({ window: 1000, windowBuckets: 4 });
    for (let i = 0; i < 5000; i++) {
      await breaker.execute(ok);
      if (i % 10 === 0) await clock.advance(7);
    }
    // At 10 calls per 7 ms, a 1000 ms window holds about 1430 calls.
    assert.ok(breaker.stats().calls <= 1430 && breaker.stats().calls >= 1000, String(breaker.stats().calls));
  });

  test('trips on the slow-call rate; slowCallMs decides what is slow', async () => {
    const { clock, breaker, transitions } = setup({ minimumCalls: 4, slowCallRateThreshold: 0.5, slowCallMs: 100 });
    const run = async (ms: number): Promise<void> => {
      const d = deferred<number>();
      const p = breaker.execute(() => d.promise);
      await clock.advance(ms);
      d.resolve(1);
      await p;
    };
    await run(10);
    await run(150);
    await run(99);
    await run(100); // 2 slow of 4: at the threshold
    assert.equal(breaker.state, 'closed');
    assert.equal(breaker.stats().slow, 2);
    await run(200); // 3 of 5
    assert.equal(breaker.state, 'open');
    assert.equal(transitions[0]?.reason, 'slow-call-rate');
  });

  test('an outcome is recorded before the caller resumes', async () => {
    const { breaker } = setup({ consecutiveFailures: 1 });
    await assert.rejects(breaker.execute(boom));
    assert.equal(breaker.state, 'open');
  });
});

describe('CircuitBreaker: open', () => {
  test('refuses at once with BreakerOpenError and retryAfterMs, without calling the task', async () => {
    const { clock, breaker } = setup({ consecutiveFailures: 1, openFor: 1000, jitter: 0 });
    const rejected: unknown[] = [];
    breaker.on('rejected', (e) => rejected.push(e));
    await fail(breaker, 1);
    await clock.advance(300);
    let called = 0;
    const t = track(
      breaker.execute(async () => {
        called++;
        return 1;
      }),
    );
    await clock.settle();
    assert.ok(t.error instanceof BreakerOpenError);
    assert.equal(t.error.code, 'BREAKER_OPEN');
    assert.equal(t.error.retryAfterMs, 700);
    assert.equal(called, 0);
    assert.deepEqual(rejected, [{ key: '', state: 'open', retryAfterMs: 700 }]);
    assert.equal(clock.pendingTimers, 0, 'no timer while open: the move to half-open is lazy');
  });

  test('the interval is jittered within ±jitter, grows ×2 per consecutive trip up to maxOpenFor, and resets on close', async () => {
    const { clock, breaker, transitions } = setup({ consecutiveFailures: 1, openFor: 1000, maxOpenFor: 5000, jitter: 0.2 });
    await fail(breaker, 1);
    for (let trip = 1; trip <= 6; trip++) {
      const last = transitions.at(-1)!;
      assert.equal(last.to, 'open');
      const expected = Math.min(5000, 1000 * 2 ** (trip - 1));
      assert.ok(last.openForMs! >= expected * 0.8 - 1e-9 && last.openForMs! <= Math.min(5000, expected * 1.2) + 1e-9, `trip ${trip}: ${last.openForMs}`);
      // Just before the interval ends: still refused.
      await clock.advance(Math.floor(last.openForMs!) - 1);
      await assert.rejects(breaker.execute(ok), BreakerOpenError);
      await clock.advance(2);
      await assert.rejects(breaker.execute(boom), /boom/); // the probe fails: reopen, longer
    }
    const intervals = transitions.filter((t) => t.to === 'open').map((t) => t.openForMs!);
    assert.equal(new Set(intervals.map((x) => x.toFixed(6))).size, intervals.length, 'jitter draws differ');
    await clock.advance(6000);
    assert.equal(await breaker.execute(ok), 1);
    assert.equal(breaker.state, 'closed');
    await fail(breaker, 1);
    const again = transitions.at(-1)!;
    assert.ok(again.openForMs! <= 1200 && again.openForMs! >= 800, 'the interval starts over after a close');
  });

  test('isolate() holds it open until reset(); reset() closes it and forgets the counts', async () => {
    const { clock, breaker, transitions } = setup({ consecutiveFailures: 3 });
    await fail(breaker, 2);
    breaker.isolate();
    await clock.advance(3_600_000);
    const e = await breaker.execute(ok).catch((x: unknown) => x);
    assert.ok(e instanceof BreakerOpenError && e.retryAfterMs === undefined);
    breaker.reset();
    assert.equal(breaker.state, 'closed');
    assert.equal(breaker.stats().consecutiveFailures, 0);
    await fail(breaker, 2);
    assert.equal(breaker.state, 'closed');
    assert.deepEqual(transitions.map((t) => t.reason), ['isolated', 'reset']);
  });
});

describe('CircuitBreaker: half-open', () => {
  async function opened(options: CircuitBreakerOptions = {}): Promise<ReturnType<typeof setup>> {
    const s = setup({ consecutiveFailures: 1, openFor: 1000, jitter: 0, ...options });
    await fail(s.breaker, 1);
    await s.clock.advance(1000);
    return s;
  }

  test('admits exactly halfOpenProbes calls and refuses the rest at once; all succeeding closes', async () => {
    const { clock, breaker, transitions } = await opened({ halfOpenProbes: 3 });
    const gates = [deferred<number>(), deferred<number>(), deferred<number>()];
    let called = 0;
    const calls = Array.from({ length: 10 }, () => track(breaker.execute(() => gates[called++]!.promise)));
    await clock.settle();
    assert.equal(called, 3);
    assert.equal(breaker.state, 'half-open');
    assert.ok(calls.slice(3).every((c) => c.error instanceof BreakerOpenError), 'the seven others are refused without waiting');
    assert.ok(calls.slice(0, 3).every((c) => !c.settled));
    gates[0]!.resolve(1);
    gates[1]!.resolve(2);
    await clock.settle();
    assert.equal(breaker.state, 'half-open');
    await assert.rejects(breaker.execute(ok), BreakerOpenError); // slots are not handed out again
    gates[2]!.resolve(3);
    await clock.settle();
    assert.equal(breaker.state, 'closed');
    assert.deepEqual(transitions.map((t) => t.reason), ['consecutive-failures', 'open-elapsed', 'probes-succeeded']);
    assert.equal(clock.pendingTimers, 0, 'probe timers are cancelled');
  });

  test('any probe failure reopens, with a longer interval', async () => {
    const { clock, breaker, transitions } = await opened({ halfOpenProbes: 2 });
    const a = deferred<number>();
    const pa = track(breaker.execute(() => a.promise));
    const pb = breaker.execute(boom);
    await assert.rejects(pb, /boom/);
    assert.equal(breaker.state, 'open');
    assert.equal(transitions.at(-1)?.reason, 'probe-failed');
    assert.equal(transitions.at(-1)?.openForMs, 2000);
    a.resolve(1); // a late probe of a finished half-open period decides nothing
    await clock.settle();
    assert.equal(pa.value, 1);
    assert.equal(breaker.state, 'open');
    assert.equal(clock.pendingTimers, 0);
  });

  test('a probe that does not settle within probeTimeout aborts its signal, fails, and reopens', async () => {
    const { clock, breaker, transitions } = await opened({ probeTimeout: 500 });
    const h = hanging();
    const probe = track(breaker.execute(h.task, { key: 'user:1' }));
    await clock.advance(499);
    assert.equal(probe.settled, false);
    assert.equal(h.signals[0]?.aborted, false);
    await clock.advance(1);
    assert.ok(probe.error instanceof LoadTimeoutError);
    assert.equal(probe.error.key, 'user:1');
    assert.equal(h.signals[0]?.aborted, true);
    assert.equal(breaker.state, 'open');
    assert.equal(transitions.at(-1)?.reason, 'probe-timeout');
    assert.equal(clock.pendingTimers, 0);
  });

  test('the caller’s abort of a probe counts for nothing and frees the slot for the next caller', async () => {
    const { clock, breaker } = await opened();
    const h = hanging();
    const ac = new AbortController();
    const probe = track(breaker.execute(h.task, { signal: ac.signal }));
    await clock.settle();
    await assert.rejects(breaker.execute(ok), BreakerOpenError);
    ac.abort(new Error('caller left'));
    await clock.settle();
    assert.equal(probe.settled, true);
    assert.equal(h.signals[0]?.aborted, true, 'the probe’s own signal follows the caller’s');
    assert.equal(breaker.state, 'half-open');
    assert.equal(await breaker.execute(ok), 1);
    assert.equal(breaker.state, 'closed');
    assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
    assert.equal(clock.pendingTimers, 0);
  });

  test('a caller already aborted is not admitted as a probe', async () => {
    const { breaker } = await opened();
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(breaker.execute(ok, { signal: ac.signal }), AbortedError);
    assert.equal(await breaker.execute(ok), 1);
  });

  test('with the slow-call rule on, a slow probe is a failed probe', async () => {
    const { clock, breaker } = await opened({ slowCallRateThreshold: 0.5, slowCallMs: 100 });
    const d = deferred<number>();
    const p = breaker.execute(() => d.promise);
    await clock.advance(150);
    d.resolve(1);
    assert.equal(await p, 1);
    assert.equal(breaker.state, 'open');
  });
});

describe('CircuitBreaker: what counts', () => {
  test('the caller’s own abort never counts, neither as failure nor as success', async () => {
    const { breaker } = setup({ consecutiveFailures: 2, minimumCalls: 100 });
    await fail(breaker, 1);
    for (let i = 0; i < 50; i++) {
      const ac = new AbortController();
      const p = breaker.execute(
        (signal) =>
          new Promise<number>((_, reject) => {
            signal.addEventListener('abort', () => reject(new Error('aborted by caller')), { once: true });
          }),
        { signal: ac.signal },
      );
      ac.abort();
      await assert.rejects(p, /aborted by caller/);
    }
    assert.equal(breaker.state, 'closed');
    assert.deepEqual([breaker.stats().calls, breaker.stats().consecutiveFailures], [1, 1], 'the aborted calls left no trace');
    await fail(breaker, 1);
    assert.equal(breaker.state, 'open', 'nor did they reset the run of failures');
  });

  test('isFailure decides: errors it rejects count as successes', async () => {
    const isFailure = (e: unknown): boolean => !(e instanceof RangeError);
    const { breaker } = setup({ consecutiveFailures: 2, isFailure });
    const notFound = async (): Promise<never> => {
      throw new RangeError('404');
    };
    for (let i = 0; i < 10; i++) {
      await fail(breaker, 1);
      await assert.rejects(breaker.execute(notFound), RangeError);
    }
    assert.equal(breaker.state, 'closed');
    assert.equal(breaker.stats().failures, 10);
    assert.equal(breaker.stats().calls, 20);
  });

  test('by default a ValidationError is not a failure; AbortedError and a nested breaker’s refusal are not counted', async () => {
    const { breaker } = setup({ consecutiveFailures: 1 });
    await assert.rejects(
      breaker.execute(async () => {
        throw new ValidationError('k', 'bad');
      }),
      ValidationError,
    );
    await assert.rejects(
      breaker.execute(async () => {
        throw new AbortedError('gone', undefined);
      }),
      AbortedError,
    );
    await assert.rejects(
      breaker.execute(async () => {
        throw new BreakerOpenError('inner', 10);
      }),
      BreakerOpenError,
    );
    assert.equal(breaker.state, 'closed');
    assert.equal(breaker.stats().calls, 1);
  });

  test('an isFailure that throws counts the call as a failure', async () => {
    const { breaker } = setup({
      consecutiveFailures: 1,
      isFailure: () => {
        throw new Error('bad predicate');
      },
    });
    await fail(breaker, 1);
    assert.equal(breaker.state, 'open');
  });

  test('works inside a pipeline, with the context the pipeline passes', async () => {
    const { breaker } = setup({ consecutiveFailures: 1 });
    const guard = pipeline(breaker);
    assert.equal(await guard.run(ok, { key: 'k', signal: new AbortController().signal, wait: true }), 1);
    await assert.rejects(guard.run(boom, { key: 'k', signal: new AbortController().signal, wait: true }), /boom/);
    assert.equal(breaker.state, 'open');
  });
});

describe('CircuitBreaker: configuration and events', () => {
  test('bad configuration is a ConfigError at construction', () => {
    const bad: CircuitBreakerOptions[] = [
      { consecutiveFailures: 0 },
      { consecutiveFailures: 1.5 },
      { consecutiveFailures: Number.NaN },
      { window: -1 },
      { window: 0 },
      { window: 1000, windowBuckets: 3 },
      { window: 5, windowBuckets: 10 },
      { windowBuckets: 0 },
      { minimumCalls: 0 },
      { failureRateThreshold: -0.1 },
      { failureRateThreshold: 1.5 },
      { failureRateThreshold: Number.NaN },
      { slowCallRateThreshold: 2 },
      { slowCallMs: 0 },
      { openFor: -5 },
      { openFor: Number.POSITIVE_INFINITY },
      { openFor: 10_000, maxOpenFor: 5_000 },
      { maxOpenFor: 2 ** 32 },
      { jitter: -0.1 },
      { jitter: 1 },
      { halfOpenProbes: 0 },
      { probeTimeout: 0 },
      { probeTimeout: Number.NaN },
      { isFailure: 'yes' as unknown as () => boolean },
    ];
    for (const options of bad) assert.throws(() => new CircuitBreaker(options), ConfigError, JSON.stringify(options));
    assert.doesNotThrow(() => new CircuitBreaker({ window: 1000, windowBuckets: 1000, failureRateThreshold: 0, slowCallRateThreshold: 0 }));
  });

  test('listeners can be removed; one that throws cannot corrupt the breaker', async () => {
    const { breaker } = setup({ consecutiveFailures: 1 });
    let seen = 0;
    const off = breaker.on('state', () => {
      seen++;
      throw new Error('listener bug');
    });
    await fail(breaker, 1);
    assert.equal(breaker.state, 'open');
    off();
    breaker.reset();
    assert.equal(seen, 1);
  });
});

describe('CircuitBreaker: regressions from other libraries', () => {
  test('opossum #119, #819: no half-open burst — 10 000 callers at the half-open instant, one reaches the dependency', async () => {
    const { clock, breaker } = setup({ consecutiveFailures: 1, openFor: 1000, jitter: 0 });
    await fail(breaker, 1);
    await clock.advance(1000);
    const h = hanging();
    const calls = Array.from({ length: 10_000 }, () => track(breaker.execute(h.task)));
    await clock.settle();
    assert.equal(h.calls(), 1);
    assert.equal(calls.filter((c) => c.error instanceof BreakerOpenError).length, 9_999);
  });

  test('opossum #119 (second half), #57; resilience4j #2093: a failed probe reopens and probing resumes — never stuck open', async () => {
    const { clock, breaker } = setup({ consecutiveFailures: 1, minimumCalls: 1, failureRateThreshold: 1, openFor: 100, maxOpenFor: 400, jitter: 0 });
    await fail(breaker, 1);
    for (let i = 0; i < 20; i++) {
      await clock.advance(400);
      await assert.rejects(breaker.execute(boom), /boom/);
      assert.equal(breaker.state, 'open');
    }
    await clock.advance(400);
    assert.equal(await breaker.execute(ok), 1);
    assert.equal(breaker.state, 'closed');
  });

  test('opossum #385: failures of calls already in flight when it trips do not push the half-open instant out', async () => {
    const { clock, breaker } = setup({ consecutiveFailures: 5, openFor: 1000, jitter: 0 });
    const gates = Array.from({ length: 6 }, () => deferred<number>());
    const calls = gates.map((g) => track(breaker.execute(() => g.promise)));
    for (const g of gates.slice(0, 5)) g.reject(new Error('down'));
    await clock.settle();
    assert.equal(breaker.state, 'open');
    await clock.advance(900);
    gates[5]!.reject(new Error('down, late'));
    await clock.settle();
    assert.ok(calls[5]!.error instanceof Error);
    await clock.advance(100);
    assert.equal(await breaker.execute(ok), 1, 'probed at 1000 ms as scheduled');
    assert.equal(breaker.state, 'closed');
  });

  test('brakes #10, resilience4j #646/#674: a call from before the trip cannot close the breaker or stand in for a probe', async () => {
    const { clock, breaker, transitions } = setup({ consecutiveFailures: 1, openFor: 1000, jitter: 0 });
    const early = deferred<number>();
    const earlyCall = track(breaker.execute(() => early.promise));
    await fail(breaker, 1);
    await clock.advance(1000);
    const h = hanging();
    const probe = track(breaker.execute(h.task));
    early.resolve(1); // late success, from the closed epoch
    await clock.settle();
    assert.equal(earlyCall.value, 1);
    assert.equal(breaker.state, 'half-open');
    assert.equal(probe.settled, false);
    await assert.rejects(breaker.execute(ok), BreakerOpenError, 'the probe slot is still taken');
    assert.deepEqual(transitions.map((t) => t.to), ['open', 'half-open']);
  });

  test('resilience4j #646: probes failing together make one transition, not an illegal open → open', async () => {
    const { clock, breaker, transitions } = setup({ consecutiveFailures: 1, openFor: 1000, jitter: 0, halfOpenProbes: 5 });
    await fail(breaker, 1);
    await clock.advance(1000);
    const gates = Array.from({ length: 5 }, () => deferred<number>());
    const probes = gates.map((g) => track(breaker.execute(() => g.promise)));
    for (const g of gates) g.reject(new Error('still down'));
    await clock.settle();
    assert.ok(probes.every((p) => p.error instanceof Error && p.error.message === 'still down'));
    assert.deepEqual(transitions.map((t) => t.to), ['open', 'half-open', 'open']);
  });

  test('resilience4j #935, #903: a probe that never settles (and ignores its signal) cannot hold the breaker half-open', async () => {
    const { clock, breaker } = setup({ consecutiveFailures: 1, openFor: 1000, jitter: 0, probeTimeout: 2000 });
    await fail(breaker, 1);
    await clock.advance(1000);
    const never = track(breaker.execute(() => new Promise<number>(() => {})));
    await clock.advance(2000);
    assert.ok(never.error instanceof LoadTimeoutError, 'the caller is not left hanging either');
    assert.equal(breaker.state, 'open');
    await clock.advance(2400);
    assert.equal(await breaker.execute(ok), 1);
    assert.equal(breaker.state, 'closed');
    assert.equal(clock.pendingTimers, 0);
  });

  test('opossum #217: one failure on a quiet service is not a 100 % failure rate', async () => {
    const { breaker } = setup({ consecutiveFailures: 5, minimumCalls: 20 });
    await fail(breaker, 1);
    assert.equal(breaker.state, 'closed');
  });

  test('opossum #45: refusals while open are not counted as failures', async () => {
    const { clock, breaker, transitions } = setup({ consecutiveFailures: 1, openFor: 1000, jitter: 0 });
    await fail(breaker, 1);
    for (let i = 0; i < 100; i++) await assert.rejects(breaker.execute(ok), BreakerOpenError);
    await clock.advance(1000);
    assert.equal(await breaker.execute(ok), 1);
    assert.equal(breaker.state, 'closed');
    assert.equal(breaker.stats().calls, 0);
    assert.equal(transitions.at(-2)?.openForMs, undefined);
  });

  test('Hystrix #674: errors that are not failures never trip, and never wedge the breaker', async () => {
    const { breaker } = setup({ consecutiveFailures: 1, minimumCalls: 1, failureRateThreshold: 0, isFailure: (e) => !(e instanceof RangeError) });
    for (let i = 0; i < 100; i++) {
      await assert.rejects(
        breaker.execute(async () => {
          throw new RangeError('bad request');
        }),
      );
    }
    assert.equal(breaker.state, 'closed');
    assert.equal(await breaker.execute(ok), 1);
  });

  test('opossum #809, #363; cockatiel #11: 10 000 breakers, used, tripped and dropped, hold no timer and are collected', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const clock = new VirtualClock();
    let collected = 0;
    const registry = new FinalizationRegistry<void>(() => {
      collected++;
    });
    const N = 10_000;
    await (async () => {
      for (let i = 0; i < N; i++) {
        const breaker = new CircuitBreaker({ clock, consecutiveFailures: 1, openFor: 100, jitter: 0, probeTimeout: 50 });
        breaker.on('state', () => {});
        await breaker.execute(ok);
        await breaker.execute(boom).catch(() => {});
        if (i % 2 === 0) {
          await clock.advance(100);
          void breaker.execute(() => new Promise<number>(() => {})).catch(() => {}); // a hung probe
        }
        registry.register(breaker);
      }
    })();
    assert.ok(clock.pendingTimers <= N / 2, 'only hung probes hold a timer');
    await clock.advance(100);
    assert.equal(clock.pendingTimers, 0);
    for (let i = 0; i < 10 && collected < N; i++) {
      gc();
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.ok(collected >= N * 0.99, `collected ${collected} of ${N}`);
  });

  test('cockatiel #81, #69: no abort listener is left on a long-lived caller signal', async () => {
    const { clock, breaker } = setup({ consecutiveFailures: 1, openFor: 10, jitter: 0, probeTimeout: 5 });
    const ac = new AbortController();
    const signal = ac.signal;
    for (let i = 0; i < 2000; i++) {
      const kind = i % 4;
      if (kind === 0) await breaker.execute(ok, { signal }).catch(() => {});
      else if (kind === 1) await breaker.execute(boom, { signal }).catch(() => {});
      else if (kind === 2) {
        const p = breaker.execute(() => new Promise<number>(() => {}), { signal }).catch(() => {});
        await clock.advance(10);
        await p;
      } else await clock.advance(10);
      assert.ok(getEventListeners(signal, 'abort').length <= 1);
    }
    await clock.runUntilIdle();
    assert.equal(getEventListeners(signal, 'abort').length, 0);
    assert.equal(clock.pendingTimers, 0);
  });

  test('opossum #335: listeners do not accumulate — every `on` returns its unsubscribe', () => {
    const { breaker } = setup();
    let calls = 0;
    for (let i = 0; i < 10_000; i++) {
      const off = breaker.on('rejected', () => calls++);
      off();
    }
    breaker.isolate();
    void breaker.execute(ok).catch(() => {});
    assert.equal(calls, 0);
  });
});

describe('stats: what an operator sees of a breaker', () => {
  test('succeeded, failed and rejected count every call by what happened to it; trips and state follow the breaker through open, half-open and closed', async () => {
    const { clock, breaker } = setup({ consecutiveFailures: 2, openFor: 1000, jitter: 0, halfOpenProbes: 1, isFailure: (e) => !(e instanceof RangeError) });
    assert.deepEqual(breaker.stats(), { state: 'closed', calls: 0, failures: 0, slow: 0, consecutiveFailures: 0, trips: 0, succeeded: 0, failed: 0, rejected: 0 });
    await breaker.execute(ok);
    await breaker.execute(ok, { key: 'k' }); // the keyed closed path
    await assert.rejects(
      breaker.execute(async () => {
        throw new RangeError('404');
      }),
      RangeError,
    ); // excused by isFailure: a success
    await fail(breaker, 2); // trips
    assert.equal(breaker.state, 'open');
    await assert.rejects(breaker.execute(ok), BreakerOpenError);
    await assert.rejects(breaker.execute(ok), BreakerOpenError);
    assert.deepEqual(breaker.stats(), { state: 'open', calls: 5, failures: 2, slow: 0, consecutiveFailures: 2, trips: 1, succeeded: 3, failed: 2, rejected: 2 });

    await clock.advance(1000);
    const probe = deferred<number>();
    const probing = breaker.execute(() => probe.promise);
    await assert.rejects(breaker.execute(ok), BreakerOpenError); // half-open, its probe out
    assert.equal(breaker.stats().state, 'half-open');
    probe.reject(new Error('still down'));
    await assert.rejects(probing, /still down/);
    // The window is the closed state's: a probe's outcome is not in it, and it is cleared only on a close.
    assert.deepEqual(breaker.stats(), { state: 'open', calls: 5, failures: 2, slow: 0, consecutiveFailures: 2, trips: 2, succeeded: 3, failed: 3, rejected: 3 });

    await clock.advance(2000);
    assert.equal(await breaker.execute(ok), 1); // the probe succeeds: closed
    assert.deepEqual(breaker.stats(), { state: 'closed', calls: 0, failures: 0, slow: 0, consecutiveFailures: 0, trips: 2, succeeded: 4, failed: 3, rejected: 3 }, 'trips count since made: a close does not forget them');
  });

  test('a call the caller aborted, or whose answer came after a transition, counts in none of them', async () => {
    const { breaker } = setup({ consecutiveFailures: 1 });
    const late = deferred<number>();
    const pending = breaker.execute(() => late.promise);
    const ac = new AbortController();
    const aborting = breaker.execute(async (signal) => new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))), { signal: ac.signal });
    ac.abort(new Error('caller left'));
    await assert.rejects(aborting, /caller left/);
    breaker.isolate();
    late.resolve(1);
    await pending;
    const { succeeded, failed, rejected, trips } = breaker.stats();
    assert.deepEqual({ succeeded, failed, rejected, trips }, { succeeded: 0, failed: 0, rejected: 0, trips: 0 });
  });

  test('stats() is a fresh object each time: a caller that keeps one sees it stand still', async () => {
    const { breaker } = setup();
    const before = breaker.stats();
    await breaker.execute(ok);
    assert.notEqual(breaker.stats(), before);
    assert.equal(before.succeeded, 0);
    assert.equal(breaker.stats().succeeded, 1);
  });
});
