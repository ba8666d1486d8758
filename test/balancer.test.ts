import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { Balancer, type BalancerOptions, ConfigError, OverloadedError, type Upstream, VirtualClock } from '../src/index.js';
import { deferred } from './helpers.js';

const ups = (n: number, extra: Partial<Upstream<string>> = {}): Upstream<string>[] => Array.from({ length: n }, (_, i) => ({ id: `u${i}`, target: `u${i}`, ...extra }));
const ok = async (): Promise<void> => {};
const fail = async (): Promise<void> => {
  throw new Error('boom');
};

/** Runs `n` calls one after the other (nothing outstanding), counting picks per target. */
async function shares(b: Balancer<string>, n: number): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    await b.run(async (t) => {
      counts.set(t, (counts.get(t) ?? 0) + 1);
    });
  }
  return counts;
}

/** Fails every call routed to `bad` until `n` failures have been recorded on it. */
async function failOn(b: Balancer<string>, bad: string, n: number): Promise<void> {
  let failures = 0;
  for (let i = 0; failures < n && i < 100_000; i++) {
    await b
      .run(async (t) => {
        if (t === bad) {
          failures++;
          throw new Error('boom');
        }
      })
      .catch(() => {});
  }
}

function make(clock: VirtualClock, options: Partial<BalancerOptions<string>> & { n?: number } = {}): Balancer<string> {
  const { n = 4, ...rest } = options;
  return new Balancer<string>({ upstreams: ups(n), clock, slowStartMs: 0, ...rest });
}

const state = (b: Balancer<string>, id: string): string => b.snapshot().upstreams.find((u) => u.id === id)!.state;

describe('outlier ejection', () => {
  test('consecutive errors eject; the ejected upstream gets no traffic', async () => {
    const clock = new VirtualClock();
    const b = make(clock);
    const ejected: string[] = [];
    b.events.on('eject', (e) => ejected.push(`${e.id}:${e.reason}`));
    await failOn(b, 'u1', 5);
    assert.deepEqual(ejected, ['u1:consecutive-errors']);
    const counts = await shares(b, 400);
    assert.equal(counts.get('u1'), undefined);
    b.close();
  });

  test('never more than the max share ejected, never the last upstream', async () => {
    const clock = new VirtualClock();
    const b = make(clock, { n: 4, outliers: { maxEjectionShare: 0.5 } });
    let refused = 0;
    b.events.on('ejectRefused', () => refused++);
    await b.run(async () => {}); // warm
    for (let i = 0; i < 200; i++) await b.run(fail).catch(() => {});
    const out = b.snapshot().upstreams.filter((u) => u.state !== 'healthy').length;
    assert.equal(out, 2, 'exactly floor(0.5 × 4) ejected');
    assert.ok(refused > 0);
    b.close();

    // Even with maxEjectionShare 1, one upstream always stays in.
    const one = make(new VirtualClock(), { n: 2, outliers: { maxEjectionShare: 1 } });
    for (let i = 0; i < 200; i++) await one.run(fail).catch(() => {});
    assert.equal(one.snapshot().upstreams.filter((u) => u.state === 'healthy').length, 1);
    one.close();

    // A single upstream is never ejected at all.
    const single = make(new VirtualClock(), { n: 1, outliers: { maxEjectionShare: 1 } });
    for (let i = 0; i < 50; i++) await single.run(fail).catch(() => {});
    assert.equal(state(single, 'u0'), 'healthy');
    single.close();
  });

  test('property: whatever fails, ejected ≤ floor(share × n) and < n', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 12 }), fc.double({ min: 0, max: 1, noNaN: true }), fc.array(fc.boolean(), { minLength: 1, maxLength: 300 }), async (n, share, outcomes) => {
        const b = make(new VirtualClock(), { n, outliers: { maxEjectionShare: share, consecutiveErrors: 1 } });
        for (const good of outcomes) {
          await b.run(good ? ok : fail).catch(() => {});
          const out = b.snapshot().upstreams.filter((u) => u.state !== 'healthy').length;
          assert.ok(out <= Math.floor(share * n + 1e-9) && out < n, `${out} out of ${n} with share ${share}`);
        }
        b.close();
      }),
      { numRuns: 60 },
    );
  });

  test('an ejected upstream comes back after its time, and the time grows with repeated ejections', async () => {
    const clock = new VirtualClock();
    const b = make(clock, { outliers: { baseEjectionMs: 1_000, maxEjectionMs: 2_500 } });
    const durations: number[] = [];
    b.events.on('eject', (e) => durations.push(e.durationMs));
    const restored: string[] = [];
    b.events.on('restore', (e) => restored.push(`${e.id}:${e.via}`));
    await failOn(b, 'u1', 5);
    await clock.advance(999);
    assert.equal(state(b, 'u1'), 'ejected');
    await clock.advance(1);
    assert.equal(state(b, 'u1'), 'healthy');
    assert.deepEqual(restored, ['u1:time']);
    await failOn(b, 'u1', 5);
    await clock.advance(2_000);
    await failOn(b, 'u1', 5);
    assert.deepEqual(durations, [1_000, 2_000, 2_500], '×n, capped at maxEjectionMs');
    b.close();
    assert.equal(clock.pendingTimers, 0);
  });

  test('success rate below the others ejects; a failure shared by all ejects nobody', async () => {
    const clock = new VirtualClock();
    const b = make(clock, { n: 5, outliers: { consecutiveErrors: 0, successRate: { interval: 1_000, minRequests: 20, minUpstreams: 3, stdevFactor: 1 } } });
    const ejected: string[] = [];
    b.events.on('eject', (e) => ejected.push(e.id));
    let i = 0;
    // u2 fails half its calls; the others never.
    for (let k = 0; k < 500; k++) await b.run(async (t) => (t === 'u2' && i++ % 2 === 0 ? fail() : undefined)).catch(() => {});
    await clock.advance(1_000);
    await b.run(ok);
    assert.deepEqual(ejected, ['u2']);

    const all = make(new VirtualClock(), { n: 5, outliers: { consecutiveErrors: 0, successRate: { interval: 1_000, minRequests: 20, minUpstreams: 3 } } });
    const none: string[] = [];
    all.events.on('eject', (e) => none.push(e.id));
    for (let k = 0; k < 500; k++) await all.run(k % 2 === 0 ? fail : ok).catch(() => {});
    b.close();
    all.close();
    assert.deepEqual(none, []);
  });
});

describe('slow is not dead', () => {
  test('a slow upstream gets less traffic by least-loaded picking and is never ejected', async () => {
    const clock = new VirtualClock();
    const b = make(clock, { n: 2 });
    let ejections = 0;
    b.events.on('eject', () => ejections++);
    const counts = new Map<string, number>();
    const calls: Promise<void>[] = [];
    // 20 calls per 10 ms; u0 answers in 100 ms, u1 in 5 ms. Every call succeeds.
    for (let tick = 0; tick < 200; tick++) {
      for (let k = 0; k < 20; k++) {
        calls.push(
          b.run(async (t) => {
            counts.set(t, (counts.get(t) ?? 0) + 1);
            await new Promise<void>((r) => clock.setTimer(r, t === 'u0' ? 100 : 5));
          }),
        );
      }
      await clock.advance(10);
    }
    await clock.advance(1_000);
    await Promise.all(calls);
    assert.equal(ejections, 0);
    assert.equal(state(b, 'u0'), 'healthy');
    assert.ok(counts.get('u0')! < counts.get('u1')! / 2, `slow ${counts.get('u0')} vs fast ${counts.get('u1')}`);
    b.close();
  });
});

describe('picking', () => {
  test('P2C prefers the less loaded', async () => {
    const clock = new VirtualClock();
    const b = make(clock, { n: 4 });
    const hold = deferred<void>();
    // u0 is stuck with calls in flight; the others answer at once.
    const busy = Array.from({ length: 40 }, () => b.run(async (t) => (t === 'u0' ? hold.promise : undefined)));
    await clock.settle();
    assert.ok(b.snapshot().upstreams[0]!.outstanding > 0);
    const counts = await shares(b, 4_000);
    // Uniform picking would give u0 a quarter; P2C only when both draws are u0 (1/16).
    const u0 = (counts.get('u0') ?? 0) / 4_000;
    assert.ok(u0 < 0.09, `u0 got ${u0}`);
    hold.resolve();
    await Promise.all(busy);
    b.close();
  });

  test('weights set the share when idle', async () => {
    const b = new Balancer<string>({ upstreams: [{ id: 'a', target: 'a', weight: 3 }, { id: 'b', target: 'b', weight: 1 }], clock: new VirtualClock(), slowStartMs: 0 });
    const counts = await shares(b, 4_000);
    const ratio = counts.get('a')! / 4_000;
    assert.ok(Math.abs(ratio - 0.75) < 0.03, `a got ${ratio}`);
    b.close();
  });

  test('slow start ramps a restored upstream linearly from the minimum share', async () => {
    const clock = new VirtualClock();
    const b = make(clock, { n: 2, slowStartMs: 10_000, slowStartMinShare: 0.1, outliers: { baseEjectionMs: 1_000 } });
    await failOn(b, 'u1', 5);
    await clock.advance(1_000);
    assert.equal(state(b, 'u1'), 'healthy');
    const measured: number[] = [];
    for (const at of [0, 5_000, 10_000]) {
      if (at > 0) await clock.advance(5_000);
      const counts = await shares(b, 4_000);
      // u1's weight share is s/(1+s) of traffic at share s.
      measured.push((counts.get('u1') ?? 0) / 4_000);
    }
    const expected = [0.1, 0.55, 1].map((s) => s / (1 + s));
    measured.forEach((m, i) => assert.ok(Math.abs(m - expected[i]!) < 0.03, `at step ${i}: ${m} vs ${expected[i]}`));
    b.close();
    assert.equal(clock.pendingTimers, 0);
  });
});

describe('panic', () => {
  test('below the threshold, traffic goes to all upstreams, ejected included', async () => {
    const clock = new VirtualClock();
    const b = make(clock, { n: 4, panicThreshold: 0.75, outliers: { maxEjectionShare: 0.5 } });
    const panics: boolean[] = [];
    b.events.on('panic', (e) => panics.push(e.active));
    await failOn(b, 'u0', 5);
    assert.equal(b.panic, false, '3 of 4 healthy: not below 0.75');
    await failOn(b, 'u1', 5);
    assert.equal(b.panic, true);
    const counts = await shares(b, 800);
    for (const id of ['u0', 'u1', 'u2', 'u3']) assert.ok((counts.get(id) ?? 0) > 100, `${id} got ${counts.get(id)}`);
    await clock.advance(30_000);
    assert.deepEqual(panics, [true, false]);
    b.close();
  });
});

describe('active health checks', () => {
  test('thresholds: unhealthy after N failures, healthy after M passes; slow answers pass', async () => {
    const clock = new VirtualClock();
    let mode: 'ok' | 'slow' | 'hang' | 'error' = 'ok';
    const check = (_t: string, signal: AbortSignal): Promise<void> =>
      new Promise((resolve, reject) => {
        if (mode === 'error') return reject(new Error('refused'));
        if (mode === 'hang') return signal.addEventListener('abort', () => reject(signal.reason));
        clock.setTimer(resolve, mode === 'slow' ? 800 : 10);
      });
    const b = make(clock, { n: 2, health: { check, interval: 1_000, timeout: 1_000, slowMs: 500, jitter: 0, healthyThreshold: 2, unhealthyThreshold: 3 } });
    const events: string[] = [];
    b.events.on('health', (e) => events.push(`${e.id}:${e.ok ? (e.slow ? 'slow' : 'ok') : 'fail'}`));
    mode = 'slow';
    await clock.advance(5_000);
    assert.ok(events.includes('u0:slow'));
    assert.equal(state(b, 'u0'), 'healthy', 'slow is not dead');
    assert.equal(b.snapshot().upstreams[0]!.slow, true);
    mode = 'hang';
    events.length = 0;
    await clock.advance(3_900);
    assert.equal(state(b, 'u0'), 'healthy', 'two timeouts are not enough');
    await clock.advance(2_500);
    assert.equal(state(b, 'u0'), 'unhealthy', 'three are');
    mode = 'ok';
    await clock.advance(1_100);
    assert.equal(state(b, 'u0'), 'unhealthy', 'one pass is not enough');
    await clock.advance(2_000);
    assert.equal(state(b, 'u0'), 'healthy');
    mode = 'error';
    await clock.advance(6_000);
    assert.equal(state(b, 'u0'), 'unhealthy', 'errors count like timeouts');
    b.close();
    assert.equal(clock.pendingTimers, 0, 'close() leaves no timer');
  });

  test('property: ejection and the checks interleaved in any order, an upstream in service is as healthy as its last probe said', async () => {
    const step = fc.record({ ms: fc.integer({ min: 0, max: 1_500 }), calls: fc.array(fc.boolean(), { maxLength: 12 }), answering: fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }) });
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 2, max: 5 }), fc.array(step, { minLength: 1, maxLength: 25 }), async (n, steps) => {
        const clock = new VirtualClock({ seed: n });
        let answering: readonly boolean[] = [];
        const check = async (t: string): Promise<void> => {
          if (!answering[Number(t.slice(1))]) throw new Error('down');
        };
        const b = make(clock, { n, slowStartMs: 2_000, outliers: { baseEjectionMs: 1_000, consecutiveErrors: 2 }, health: { check, interval: 300, unhealthyThreshold: 2, healthyThreshold: 2 } });
        const lastVerdict = new Map<string, boolean>();
        b.events.on('health', (e) => lastVerdict.set(e.id, e.healthy));
        for (const { ms, calls, answering: now } of steps) {
          answering = now;
          for (const good of calls) {
            await b
              .run(async (t) => {
                if (!b.panic) assert.equal(state(b, t), 'healthy', `routed to ${t} outside panic`);
                if (!good) throw new Error('boom');
              })
              .catch(() => {});
          }
          await clock.advance(ms);
          for (const u of b.snapshot().upstreams) {
            if (u.state === 'ejected' || u.state === 'awaiting-check') continue;
            assert.equal(u.state, (lastVerdict.get(u.id) ?? true) ? 'healthy' : 'unhealthy', `${u.id} in service`);
          }
        }
        b.close();
        assert.equal(clock.pendingTimers, 0);
      }),
      { numRuns: 40 },
    );
  });

  test('jitter: probes of a fleet do not run in step', async () => {
    const clock = new VirtualClock({ seed: 7 });
    const times: number[] = [];
    const b = make(clock, { n: 8, health: { check: async () => void times.push(clock.now()), interval: 1_000, jitter: 0.2 } });
    await clock.advance(1_000);
    assert.equal(times.length, 8);
    assert.ok(new Set(times).size >= 7, 'first probes spread over the interval');
    times.length = 0;
    await clock.advance(10_000);
    const gaps = new Set(times.map((t) => t % 1_000));
    assert.ok(gaps.size > 20);
    b.close();
    assert.equal(clock.pendingTimers, 0);
  });

  /** Of three upstreams, u1 fails its calls until ejected (for 1 s) and its probes (every 500 ms) until `answer()`; returned 3 s later. */
  async function ejectedAndDown(clock: VirtualClock, options: { slowStartMs?: number; health: Partial<NonNullable<BalancerOptions<string>['health']>> }) {
    let answers = false;
    const check = async (t: string): Promise<void> => (t === 'u1' && !answers ? Promise.reject(new Error('down')) : undefined);
    const b = make(clock, { n: 3, slowStartMs: options.slowStartMs ?? 0, outliers: { baseEjectionMs: 1_000 }, health: { check, interval: 500, jitter: 0, ...options.health } });
    const restored: string[] = [];
    b.events.on('restore', (e) => restored.push(`${e.id}:${e.via}`));
    await failOn(b, 'u1', 5);
    await clock.advance(3_000);
    return { b, restored, answer: () => void (answers = true) };
  }

  test('an ejected upstream comes back only after its time and a passing check', async () => {
    const clock = new VirtualClock();
    const { b, restored, answer } = await ejectedAndDown(clock, { health: { unhealthyThreshold: 100 } });
    assert.equal(state(b, 'u1'), 'awaiting-check', 'time is up but checks fail');
    answer();
    await clock.advance(600);
    assert.equal(state(b, 'u1'), 'healthy');
    assert.deepEqual(restored, ['u1:health-check']);
    b.close();
    assert.equal(clock.pendingTimers, 0);
  });

  test('an upstream whose checks failed while it was ejected comes back unhealthy, then ramps once they pass', async () => {
    const clock = new VirtualClock();
    const { b, restored, answer } = await ejectedAndDown(clock, { slowStartMs: 10_000, health: { unhealthyThreshold: 2, healthyThreshold: 3 } });
    assert.equal(state(b, 'u1'), 'awaiting-check', 'ejection is what the snapshot shows, whatever the checks say meanwhile');
    answer();
    await clock.advance(600);
    assert.deepEqual(restored, ['u1:health-check'], 'a passing probe ends the ejection');
    assert.equal(state(b, 'u1'), 'unhealthy', 'but the checker needs healthyThreshold passes');
    await clock.advance(1_000);
    const back = b.snapshot().upstreams[1]!;
    assert.equal(back.state, 'healthy');
    assert.ok(back.share < 0.2, `ramps from its return to health, share ${back.share}`);
    b.close();
    assert.equal(clock.pendingTimers, 0);
  });
});

describe('overload', () => {
  test('low priorities are shed first, past a fraction of the limit', async () => {
    const b = make(new VirtualClock(), { n: 1, maxOutstanding: 10, lowPriorityShare: 0.8 });
    const hold = deferred<void>();
    const running = Array.from({ length: 8 }, () => b.run(() => hold.promise));
    await assert.rejects(b.run(ok, { priority: 'low' }), OverloadedError);
    await assert.rejects(b.run(ok, { priority: 'background' }), OverloadedError);
    running.push(b.run(() => hold.promise)); // normal still admitted at 80 %
    hold.resolve();
    await Promise.all(running);
    await b.run(ok, { priority: 'background' });
    b.close();
  });

  test('when every upstream is full, everything is shed at once instead of queueing', async () => {
    const b = make(new VirtualClock(), { n: 3, maxOutstanding: 5 });
    const hold = deferred<void>();
    // P2C alone would leave room; the scan fills every slot before anything is shed.
    const running = Array.from({ length: 15 }, () => b.run(() => hold.promise));
    assert.deepEqual(b.snapshot().upstreams.map((u) => u.outstanding), [5, 5, 5]);
    let called = false;
    await assert.rejects(b.run(async () => void (called = true)), OverloadedError);
    await assert.rejects(b.run(ok, { priority: 'critical' }), OverloadedError);
    assert.equal(called, false);
    hold.resolve();
    await Promise.all(running);
    await b.run(ok);
    b.close();
  });
});

describe('pick for callers that manage the call (an HTTP client)', () => {
  test('avoid: a retry goes elsewhere whenever another upstream has room, and back only when none has', () => {
    const clock = new VirtualClock({ seed: 7 });
    const b = make(clock, { n: 3, maxOutstanding: 2 });
    for (let i = 0; i < 300; i++) {
      const p = b.pick({ avoid: new Set(['u1']) })!;
      assert.notEqual(p.id, 'u1', 'an avoided upstream is not picked while others have room');
    }
    // u0 and u2 full: the avoided one is all that is left, and avoiding never sheds a call that could be served.
    const full = new Balancer<string>({ upstreams: ups(3, { maxOutstanding: 1 }), clock });
    const a = full.pick({ avoid: new Set(['u1']) })!;
    full.start(a);
    const c = full.pick({ avoid: new Set(['u1']) })!;
    full.start(c);
    assert.deepEqual([a.id, c.id].sort(), ['u0', 'u2']);
    const last = full.pick({ avoid: new Set(['u1']) });
    assert.equal(last?.id, 'u1', 'the avoided upstream, as the only one with room');
    full.start(last!);
    assert.equal(full.pick({ avoid: new Set(['u1']) }), undefined, 'all full: shed');
    assert.equal(full.stats().unavailable, 1, 'one unavailable for the one call shed, not one per avoided try');
  });

  test('priority: a low-priority pick is shed past the low-priority share, a critical one is not', () => {
    const clock = new VirtualClock({ seed: 1 });
    const b = new Balancer<string>({ upstreams: ups(1, { maxOutstanding: 10 }), clock, lowPriorityShare: 0.5 });
    for (let i = 0; i < 5; i++) b.start(b.pick({ priority: 'critical' })!);
    assert.equal(b.pick({ priority: 'low' }), undefined);
    assert.notEqual(b.pick({ priority: 'critical' }), undefined);
  });

  test('release: the call is no longer outstanding and counts neither for nor against the upstream', () => {
    const clock = new VirtualClock({ seed: 1 });
    const b = new Balancer<string>({ upstreams: ups(2), clock, outliers: { consecutiveErrors: 2 } });
    const u0 = b.stats().upstreams[0]!.id;
    const pickU0 = (): ReturnType<typeof b.pick> => {
      for (;;) {
        const p = b.pick()!;
        if (p.id === u0) return p;
      }
    };
    let p = pickU0()!;
    b.start(p);
    b.finish(p, false);
    p = pickU0()!;
    b.start(p);
    assert.equal(b.stats().upstreams[0]!.inFlight, 1);
    b.release(p);
    assert.equal(b.stats().upstreams[0]!.inFlight, 0);
    p = pickU0()!;
    b.start(p);
    b.finish(p, false);
    assert.equal(b.stats().upstreams[0]!.ejections, 1, 'two failures in a row: the release between them was no success');
  });

  test('bad pick options are ConfigErrors, and change nothing', () => {
    const b = make(new VirtualClock({ seed: 1 }), { n: 2 });
    assert.throws(() => b.pick({ avoid: ['u0'] as unknown as Set<string> }), ConfigError);
    assert.throws(() => b.pick({ priority: 'urgent' as 'low' }), ConfigError);
    assert.throws(() => b.pick(null as unknown as undefined), ConfigError);
    assert.equal(b.stats().picks, 0);
  });

  test('mayBeOut counts the open breakers with the upstreams already out; its argument is a Set of ids', async () => {
    const clock = new VirtualClock({ seed: 1 });
    // u0 never answers its health checks: out after the first.
    const b = make(clock, { n: 2, health: { check: (t: string) => (t === 'u0' ? new Promise<void>(() => {}) : Promise.resolve()), interval: 1_000, timeout: 500, unhealthyThreshold: 1 } });
    assert.equal(b.mayBeOut(new Set(['u1'])), true, 'one of two out: within the default share');
    await clock.advance(2_000);
    assert.equal(b.mayBeOut(new Set()), true);
    assert.equal(b.mayBeOut(new Set(['u1'])), false, 'u0 out by its checks and u1 by its breaker: every upstream');
    assert.throws(() => b.mayBeOut(1 as unknown as Set<string>), ConfigError);
    b.close();
  });
});

describe('configuration', () => {
  test('bad options throw ConfigError at construction', () => {
    const clock = new VirtualClock();
    const bad: Partial<BalancerOptions<string>>[] = [
      { upstreams: [] },
      { upstreams: [{ id: 'a', target: 'a' }, { id: 'a', target: 'b' }] },
      { upstreams: [{ id: 'a', target: 'a', weight: 0 }] },
      { upstreams: [{ id: 'a', target: 'a', weight: -1 }] },
      { upstreams: [{ id: 'a', target: 'a', maxOutstanding: 0 }] },
      { slowStartMs: -1 },
      { slowStartMinShare: 1.5 },
      { panicThreshold: -0.1 },
      { outliers: { maxEjectionShare: 2 } },
      { outliers: { baseEjectionMs: -5 } },
      { outliers: { baseEjectionMs: 10_000, maxEjectionMs: 1_000 } },
      { health: { check: ok, timeout: 100, slowMs: 200 } },
      { health: { check: ok, interval: -1 } },
      { health: { check: ok, jitter: 2 } },
      { health: { check: 'nope' as unknown as () => Promise<void> } },
    ];
    for (const options of bad) assert.throws(() => new Balancer<string>({ upstreams: ups(2), clock, ...options }), ConfigError, JSON.stringify(options));
    assert.equal(clock.pendingTimers, 0);
  });
});

describe('stats: what an operator sees of a balancer', () => {
  test('picks and unavailable since made; each upstream in flight, ejected, in slow start, and ejected how often', async () => {
    const clock = new VirtualClock();
    const b = new Balancer<string>({ upstreams: ups(2, { maxOutstanding: 2 }), clock, slowStartMs: 1000, outliers: { consecutiveErrors: 1, baseEjectionMs: 100, maxEjectionShare: 0.5, successRate: false } });
    let runs = 0;
    const ejectU1 = async (): Promise<void> => {
      while (state(b, 'u1') === 'healthy') {
        runs++;
        await b.run(async (t) => {
          if (t === 'u1') throw new Error('boom');
        }).catch(() => {});
      }
    };
    await ejectU1();
    const hold = deferred<void>();
    const held = [b.run(() => hold.promise), b.run(() => hold.promise)]; // u0 is all there is: both there
    await assert.rejects(b.run(ok), OverloadedError);
    await assert.rejects(b.run(ok, { priority: 'critical' }), OverloadedError);
    assert.deepEqual(b.stats(), {
      panic: false,
      picks: runs + 2,
      unavailable: 2,
      upstreams: [
        { id: 'u0', inFlight: 2, ejected: false, slowStart: false, ejections: 0, state: 'healthy', share: 1 },
        { id: 'u1', inFlight: 0, ejected: true, slowStart: false, ejections: 1, state: 'ejected', share: 1 },
      ],
    });
    hold.resolve();
    await Promise.all(held);

    await clock.advance(100); // u1's time is up: back, in slow start
    assert.ok(b.pick() !== undefined, 'a pick() is a pick too');
    const back = b.stats().upstreams[1]!;
    assert.deepEqual([back.ejected, back.slowStart, back.state, back.share], [false, true, 'healthy', 0.1]);
    await clock.advance(1000);
    assert.equal(b.stats().upstreams[1]!.slowStart, false);

    await clock.advance(100_000); // long enough in service that the ejection multiplier is forgiven
    await ejectU1();
    assert.equal(b.snapshot().upstreams[1]!.ejections, 1, "the snapshot's multiplier started over");
    const after = b.stats();
    assert.equal(after.upstreams[1]!.ejections, 2, 'stats count every ejection since made');
    assert.equal(after.picks, runs + 3);
    assert.equal(after.unavailable, 2);
    b.close();
  });

  test('panic is read as it stands now', async () => {
    const clock = new VirtualClock();
    const b = make(clock, { n: 2, panicThreshold: 1, outliers: { consecutiveErrors: 1, maxEjectionShare: 0.5 } });
    assert.equal(b.stats().panic, false);
    await failOn(b, 'u0', 1);
    assert.equal(b.stats().panic, true);
    b.close();
  });
});
