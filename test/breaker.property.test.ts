import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { test } from 'node:test';
import fc from 'fast-check';
import { type BreakerState, CircuitBreaker } from '../src/guard/breaker.js';
import { BreakerOpenError } from '../src/errors.js';
import { seededRandom, VirtualClock } from '../src/index.js';
import { track } from './helpers.js';

/**
 * Model-based properties of the circuit breaker: random interleavings of calls
 * (success, failure, caller abort, hang) and time steps, run on the virtual
 * clock against the real CircuitBreaker and compared, step by step, with a
 * model a few lines long. Jitter is 0 so the model knows every interval.
 */

type Behaviour = 'ok' | 'fail' | 'abort' | 'hang';
type Step = { readonly kind: 'call'; readonly behaviour: Behaviour; readonly count: number } | { readonly kind: 'advance'; readonly ms: number };

const CONSECUTIVE = 3;
const OPEN_FOR = 100;
const MAX_OPEN_FOR = 800;
const PROBE_TIMEOUT = 250;

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('call' as const), behaviour: fc.constantFrom<Behaviour>('ok', 'ok', 'fail', 'fail', 'abort', 'hang'), count: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.oneof(fc.integer({ min: 1, max: 60 }), fc.integer({ min: 1, max: 900 })) }) },
);

/** The model: the same rules, written as plainly as possible. */
class Model {
  state: BreakerState = 'closed';
  consecutive = 0;
  trips = 0;
  until = 0;
  epoch = 0;
  admitted = 0;
  succeeded = 0;
  reached = 0;
  /** Hung probes: when they time out, and in which half-open period they started. */
  timers: { due: number; epoch: number }[] = [];

  constructor(readonly probes: number) {}

  private go(to: BreakerState, now: number): void {
    this.state = to;
    this.epoch++;
    if (to === 'open') {
      this.trips++;
      this.until = now + Math.min(MAX_OPEN_FOR, OPEN_FOR * 2 ** (this.trips - 1));
    }
    if (to === 'half-open') {
      this.admitted = 0;
      this.succeeded = 0;
    }
    if (to === 'closed') {
      this.trips = 0;
      this.consecutive = 0;
    }
  }

  /** Returns whether the call was refused. */
  call(b: Behaviour, now: number): boolean {
    if (this.state === 'open') {
      if (now < this.until) return true;
      this.go('half-open', now);
    }
    if (this.state === 'half-open') {
      if (this.admitted >= this.probes) return true;
      this.admitted++;
      this.reached++;
      if (b === 'ok' && ++this.succeeded === this.probes) this.go('closed', now);
      else if (b === 'fail') this.go('open', now);
      else if (b === 'abort') this.admitted--;
      else if (b === 'hang') this.timers.push({ due: now + PROBE_TIMEOUT, epoch: this.epoch });
      return false;
    }
    this.reached++;
    if (b === 'ok') this.consecutive = 0;
    else if (b === 'fail' && ++this.consecutive >= CONSECUTIVE) this.go('open', now);
    return false;
  }

  advance(from: number, to: number): void {
    void from;
    const due = this.timers.filter((t) => t.due <= to).sort((a, b) => a.due - b.due);
    this.timers = this.timers.filter((t) => t.due > to);
    for (const t of due) if (t.epoch === this.epoch && this.state === 'half-open') this.go('open', t.due);
  }
}

test('the breaker follows the model through random calls and time steps; nothing passes while open; nothing leaks', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 80 }), fc.integer({ min: 1, max: 3 }), async (steps, probes) => {
      const clock = new VirtualClock();
      const breaker = new CircuitBreaker({
        clock,
        consecutiveFailures: CONSECUTIVE,
        failureRateThreshold: 1,
        openFor: OPEN_FOR,
        maxOpenFor: MAX_OPEN_FOR,
        jitter: 0,
        halfOpenProbes: probes,
        probeTimeout: PROBE_TIMEOUT,
      });
      const model = new Model(probes);
      let reached = 0;
      const longLived = new AbortController();
      const hung: Promise<unknown>[] = [];
      for (const s of steps) {
        if (s.kind === 'advance') {
          const from = clock.now();
          await clock.advance(s.ms);
          model.advance(from, clock.now());
        } else {
          for (let i = 0; i < s.count; i++) {
            const expectRefused = model.call(s.behaviour, clock.now());
            const ac: AbortController = s.behaviour === 'abort' ? new AbortController() : longLived;
            const stateBefore = breaker.state;
            const p: Promise<number> = breaker.execute(
              (signal: AbortSignal): Promise<number> => {
                reached++;
                assert.notEqual(stateBefore === 'open' && breaker.state === 'open', true, 'a call reached the dependency while open');
                if (s.behaviour === 'ok') return Promise.resolve(1);
                if (s.behaviour === 'fail') return Promise.reject(new Error('down'));
                if (s.behaviour === 'abort') {
                  ac.abort();
                  return Promise.reject(new Error('caller aborted'));
                }
                // Hangs, ignoring its signal: only the breaker's probe timeout can end it.
                void signal;
                return new Promise<number>(() => {});
              },
              { signal: ac.signal },
            );
            const t: ReturnType<typeof track<number>> = track(p);
            await clock.settle();
            if (expectRefused) assert.ok(t.error instanceof BreakerOpenError, 'a refusal settles at once');
            else if (s.behaviour === 'hang') hung.push(p.catch(() => {}));
            else assert.equal(t.settled, true);
          }
        }
        assert.equal(breaker.state, model.state);
        assert.equal(reached, model.reached);
      }
      // Let every hung probe time out: no timer and no listener survives.
      await clock.advance(PROBE_TIMEOUT);
      assert.equal(clock.pendingTimers, 0);
      assert.equal(getEventListeners(longLived.signal, 'abort').length, 0);
      void hung;
    }),
    { numRuns: 300 },
  );
});

test('at the half-open instant, of 10 000 concurrent callers at most halfOpenProbes reach the dependency; the rest are refused in the same tick', async () => {
  await fc.assert(
    fc.asyncProperty(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 0, max: 500 }), async (probes, extraMs) => {
      const clock = new VirtualClock({ seed: probes * 1000 + extraMs });
      const breaker = new CircuitBreaker({ clock, consecutiveFailures: 1, openFor: 1000, halfOpenProbes: probes });
      await breaker.execute(() => Promise.reject(new Error('down'))).catch(() => {});
      await clock.advance(1200 + extraMs); // past any jittered interval
      let reached = 0;
      const calls = Array.from({ length: 10_000 }, () =>
        track(
          breaker.execute(() => {
            reached++;
            return new Promise<number>(() => {});
          }),
        ),
      );
      await clock.settle();
      assert.equal(reached, probes);
      assert.equal(calls.filter((c) => c.error instanceof BreakerOpenError).length, 10_000 - probes);
      await clock.advance(5000);
      assert.equal(clock.pendingTimers, 0);
    }),
    { numRuns: 8 },
  );
});

test('a window rate trips exactly when a plain bucketed count says it should', async () => {
  const WINDOW = 1000;
  const BUCKETS = 10;
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.record({ fail: fc.boolean(), gap: fc.integer({ min: 0, max: 150 }) }), { minLength: 1, maxLength: 200 }),
      fc.constantFrom(0.2, 0.5, 0.8),
      async (calls, threshold) => {
        const clock = new VirtualClock();
        const breaker = new CircuitBreaker({ clock, consecutiveFailures: 1000, minimumCalls: 10, failureRateThreshold: threshold, window: WINDOW, windowBuckets: BUCKETS });
        const log: { at: number; fail: boolean }[] = [];
        for (const c of calls) {
          await clock.advance(c.gap);
          const now = clock.now();
          await breaker.execute(() => (c.fail ? Promise.reject(new Error('x')) : Promise.resolve(1))).catch(() => {});
          log.push({ at: now, fail: c.fail });
          const bucket = Math.floor(now / (WINDOW / BUCKETS));
          const inWindow = log.filter((r) => Math.floor(r.at / (WINDOW / BUCKETS)) > bucket - BUCKETS);
          const failures = inWindow.filter((r) => r.fail).length;
          const shouldTrip = inWindow.length >= 10 && failures > threshold * inWindow.length;
          assert.equal(breaker.state === 'open', shouldTrip, `after ${log.length} calls: ${failures}/${inWindow.length}`);
          if (shouldTrip) return;
        }
      },
    ),
    { numRuns: 200 },
  );
});

// 10⁶ calls take about 20 s here; 250 000 keep the suite fast and already cross
// hundreds of trips and probe timeouts. DAMPER_LEAK_CALLS=1000000 runs them all.
const LEAK_CALLS = Number(process.env.DAMPER_LEAK_CALLS ?? 250_000);

test(`${LEAK_CALLS} calls with outages, failures, aborts and probe timeouts leave no timer and no abort listener behind`, async () => {
  const clock = new VirtualClock();
  const breaker = new CircuitBreaker({ clock, consecutiveFailures: 5, openFor: 50, maxOpenFor: 400, probeTimeout: 20, halfOpenProbes: 2 });
  const longLived = new AbortController();
  const signal = longLived.signal;
  const okTask = (): Promise<number> => Promise.resolve(1);
  const failTask = (): Promise<number> => Promise.reject(new Error('down'));
  // Rejects when its signal aborts (a per-call caller abort, or a probe timeout)…
  const abortableTask = (s: AbortSignal): Promise<number> => new Promise<number>((_, reject) => s.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
  // …or never settles, ignoring its signal (probe timeouts must still free the breaker).
  const hangTask = (): Promise<number> => new Promise<number>(() => {});
  const swallow = (): void => {};
  const N = LEAK_CALLS;
  const random = seededRandom(7);
  let trips = 0;
  breaker.on('state', (e) => {
    if (e.to === 'open') trips++;
  });
  const started = process.hrtime.bigint();
  let refused = 0;
  for (let i = 0; i < N; i++) {
    // Every 10 000 calls, an outage of 1 000 calls in which 90 % fail.
    const down = i % 10_000 < 1_000;
    const r = down ? (random() < 0.9 ? 85 : random() * 100) : random() * 100;
    let p: Promise<number>;
    if (r < 80) p = breaker.execute(okTask, r < 40 ? undefined : { signal });
    else if (r < 92) p = breaker.execute(failTask, { signal });
    else if (r < 97) {
      const ac = new AbortController();
      p = breaker.execute(abortableTask, { signal: ac.signal });
      ac.abort();
    } else p = breaker.execute(hangTask, { signal });
    p.catch((e: unknown) => {
      if (e instanceof BreakerOpenError) refused++;
    });
    void swallow;
    if (i % 1000 === 999) await clock.advance(7);
  }
  await clock.advance(1000);
  await clock.runUntilIdle();
  assert.equal(clock.pendingTimers, 0);
  assert.equal(getEventListeners(signal, 'abort').length, 0);
  assert.ok(refused > 0 && trips >= 10, `the breaker did trip along the way (${trips} trips)`);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  assert.ok(seconds < 30, `took ${seconds.toFixed(1)} s`);
});
