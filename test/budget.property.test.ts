import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { RetryBudget } from '../src/guard/budget.js';
import { VirtualClock } from '../src/time/virtual.js';

/**
 * Model-based properties of the retry budget: random sequences of requests,
 * retry attempts and time steps against the real RetryBudget on the virtual
 * clock, checked against a plain log of every event (the model keeps what the
 * budget must not: a record per call).
 */

type Step = { readonly kind: 'request'; readonly n: number } | { readonly kind: 'retry'; readonly n: number } | { readonly kind: 'advance'; readonly ms: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('request' as const), n: fc.integer({ min: 1, max: 40 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('retry' as const), n: fc.integer({ min: 1, max: 40 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 8_000 })) }) },
);

// Windows and bucket counts whose bucket width is a whole number of ms, so the
// model's arithmetic on event times and the ring's agree at bucket edges.
const shape = fc.record({
  window: fc.constantFrom(1_000, 6_000, 10_000),
  buckets: fc.constantFrom(1, 2, 4, 5, 8, 10, 20),
  ratio: fc.oneof(fc.constantFrom(0, 0.1, 0.2, 1), fc.double({ min: 0, max: 1, noNaN: true })),
  minPerSecond: fc.oneof(fc.constantFrom(0, 1, 10), fc.double({ min: 0, max: 20, noNaN: true })),
});

const EPS = 1e-9;

function count(log: readonly number[], from: number, to: number, openFrom = true): number {
  let n = 0;
  for (const t of log) if ((openFrom ? t > from : t >= from) && t <= to) n++;
  return n;
}

test('property: a granted retry never takes retries in any window past ratio × requests + floor; and the budget is at most one bucket conservative', async () => {
  await fc.assert(
    fc.asyncProperty(shape, fc.array(step, { minLength: 1, maxLength: 120 }), fc.integer({ min: 0, max: 50_000 }), async (s, steps, start) => {
      const clock = new VirtualClock({ start });
      const budget = new RetryBudget({ clock, ...s });
      const W = s.window;
      const w = W / s.buckets;
      const floor = (s.minPerSecond * W) / 1000;
      const requests: number[] = [];
      const retries: number[] = [];
      for (const st of steps) {
        if (st.kind === 'advance') {
          await clock.advance(st.ms);
          continue;
        }
        for (let i = 0; i < st.n; i++) {
          const t = clock.now();
          if (st.kind === 'request') {
            budget.recordRequest();
            requests.push(t);
            continue;
          }
          // Liveness: what the budget must grant, seen conservatively (one bucket each side).
          const mustGrant = count(retries, t - W - w, t) + 1 <= s.ratio * count(requests, t - W + w, t, false) + floor - EPS;
          const granted = budget.tryRetry();
          if (granted) {
            retries.push(t);
            // Safety: in the true sliding window (t − W, t], this retry included.
            const inWindow = count(retries, t - W, t);
            const allowed = s.ratio * count(requests, t - W, t) + floor;
            assert.ok(inWindow <= allowed + EPS, `at ${t}: ${inWindow} retries > ${allowed} allowed`);
          } else {
            assert.ok(!mustGrant, `at ${t}: refused a retry the budget had room for`);
          }
        }
      }
      // Over any window (s, s + W]: retries ≤ ratio × requests in (s − W, s + W] + floor, a bound on load you can state.
      for (const r of retries) {
        const from = r - W;
        assert.ok(count(retries, from, r) <= s.ratio * count(requests, from - W, r) + floor + EPS);
      }
    }),
    { numRuns: 300 },
  );
});

test('property: once retries stop (the dependency healed), the budget is whole again within one window (plus one bucket)', async () => {
  await fc.assert(
    fc.asyncProperty(shape, fc.array(step, { maxLength: 80 }), fc.integer({ min: 1, max: 50 }), async (s, steps, perStep) => {
      const clock = new VirtualClock();
      const budget = new RetryBudget({ clock, ...s });
      // A storm: random requests, as many retries as it grants, time passing.
      for (const st of steps) {
        if (st.kind === 'advance') await clock.advance(st.ms);
        else if (st.kind === 'request') for (let i = 0; i < st.n; i++) budget.recordRequest();
        else for (let i = 0; i < st.n; i++) budget.tryRetry();
      }
      // Healed: requests go on at a steady rate, nothing needs a retry.
      const W = s.window;
      const step = W / s.buckets / 2;
      const healedAt = clock.now();
      while (clock.now() < healedAt + W + W / s.buckets) {
        for (let i = 0; i < perStep; i++) budget.recordRequest();
        await clock.advance(step);
      }
      assert.equal(budget.retries, 0);
      const full = Math.floor(s.ratio * budget.requests + (s.minPerSecond * W) / 1000 + EPS);
      assert.equal(budget.available, full);
      let granted = 0;
      while (budget.tryRetry()) granted++;
      assert.equal(granted, full);
    }),
    { numRuns: 200 },
  );
});

test('a retry storm against a dead dependency stays within the stated bound', async () => {
  const clock = new VirtualClock();
  const budget = new RetryBudget({ clock, window: 10_000, ratio: 0.2, minPerSecond: 10 });
  let requests = 0;
  let retries = 0;
  // 1000 calls/s for a minute, each wanting 2 retries (a "3 attempts" policy): 3000 calls/s unbudgeted.
  for (let ms = 0; ms < 60_000; ms += 10) {
    for (let i = 0; i < 10; i++) {
      budget.recordRequest();
      requests++;
      for (let r = 0; r < 2 && budget.tryRetry(); r++) retries++;
    }
    await clock.advance(10);
  }
  // At most 20 % of the requests plus 10/s, rather than 200 %.
  assert.ok(retries <= 0.2 * requests + 10 * 60 + 100, `retries ${retries} for ${requests} requests`);
  assert.ok(retries >= 0.15 * requests, `the budget is spent, not hoarded: ${retries}`);
});
