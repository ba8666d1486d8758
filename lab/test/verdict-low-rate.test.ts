import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { runIsolated } from '../src/lab/engine/parallel.js';
import { Recorder } from '../src/lab/judge/metrics.js';
import { type ScenarioRun, VARIANTS } from '../src/lab/judge/results.js';
import { describeVariant } from '../src/lab/judge/verdict.js';
import { type ServiceScenario } from '../src/lab/world/service.js';
import { testScenario } from './support/scenario-doc.js';

/**
 * A verdict that does not flap (issue 28, item 6). A request counts in the
 * second it was sent, as a load generator counts it: its answer, however
 * late, is that second's. Counted in the second it ended, a low-rate
 * scenario with second-long latencies read unhealthy on noise: a Poisson
 * burst still in flight at a second's end left that second short of
 * answers, and "never recovered" was written over a run where no call
 * failed.
 */

describe('a request counts in the second it was sent', () => {
  test('an answer that comes in a later second is its own second\'s; the second is final once nothing sent in it is in flight', () => {
    const recorder = new Recorder(3);
    recorder.started(100);
    recorder.started(900);
    recorder.ended(100, 400, 'good');
    assert.equal(recorder.settledBefore(1), 0, 'second 0 is over, but a request sent in it is still in flight');
    recorder.started(1200);
    recorder.ended(1200, 1300, 'good');
    recorder.ended(900, 2500, 'good');
    assert.equal(recorder.settledBefore(1), 1, 'not beyond the seconds that are over');
    assert.equal(recorder.settledBefore(3), 3);
    const series = recorder.series();
    assert.deepEqual(series.offered, [2, 1, 0]);
    assert.deepEqual(series.goodput, [2, 1, 0], 'the answer at 2.5 s counts in second 0, when it was sent');
    assert.deepEqual(series.inFlight, [1, 1, 0], 'in flight at each second\'s end: sent so far, not ended yet');
    assert.ok(series.p99Ms[0]! >= 1600 && series.p99Ms[0]! <= 1650, `second 0's p99 is its slowest request's 1,600 ms (to the histogram's 3 %), got ${series.p99Ms[0]}`);
    const objective = { p99Ms: 2000, goodputRatio: 1, holdS: 1 };
    assert.ok(recorder.healthy(objective, 0) && recorder.healthy(objective, 1), 'every request answered within the objective: healthy');
    assert.equal(recorder.healthy(objective, 2), false, 'nothing sent: not healthy (nothing to judge)');
  });

  test('an operator\'s dashboard reads answers as they arrive: what the conditional actions see while the incident goes on', () => {
    const recorder = new Recorder(3);
    for (let i = 0; i < 10; i++) recorder.started(i * 100);
    // Half of second 0's requests answered in second 1: the dashboard's second 0 shows half its goodput.
    for (let i = 0; i < 10; i++) recorder.ended(i * 100, i < 5 ? i * 100 + 50 : 1000 + i, 'good');
    assert.equal(recorder.recentGoodputRatio(1000, 1), 0.5);
    assert.equal(recorder.recentGoodputRatio(2000, 2), 1);
  });

  test('a request ends once, and none is sent after the horizon', () => {
    const recorder = new Recorder(2);
    recorder.started(10);
    recorder.ended(10, 20, 'bad');
    assert.throws(() => recorder.ended(10, 30, 'bad'), /ends once/);
    assert.throws(() => recorder.started(2000), /after the horizon/);
  });
});

/**
 * A slow service at a low rate, as Brooker's simulations have it: 40
 * calls/s, each 1.7 s of work (lognormal, σ 0.2) on a server with far more
 * workers than that holds, so nothing ever queues and nothing fails; a p99
 * objective of 5 s. The "trigger" (×1.3 for 20 s) leaves ample capacity: a
 * correct verdict is "stayed healthy throughout", for both variants.
 */
function slowLowRate(change: (d: Record<string, unknown>) => void = () => {}): ServiceScenario {
  return testScenario(
    'slow-low-rate',
    {
      durationS: 90,
      baseline: { fromS: 5, toS: 30 },
      objective: { p99Ms: 5000, goodputRatio: 0.95, holdS: 10 },
      clients: [{ name: 'users', rate: 40, timeoutMs: 10_000 }],
      servers: { workers: 1000, maxQueue: 1000, service: { kind: 'lognormal', medianMs: 1700, sigma: 0.2 } },
      faults: [{ kind: 'slowdown', factor: 1.3, startS: 30, endS: 50, label: 'a mild slowdown' }],
    },
    change,
  );
}

/** `slowLowRate` with bursts: every 10 s, three times the arrivals for one second, straddling a second's end. */
const bursty = slowLowRate((d) => {
  const faults = d.faults as Record<string, unknown>[];
  for (let s = 10.5; s < 80; s += 10) faults.push({ kind: 'load-spike', factor: 3, startS: s, endS: s + 1, trigger: false, label: 'a burst' });
});

/** Two client tiers retrying twice each at 40 calls/s, 300 ms of work: nothing fails, a Poisson burst is still in flight at many seconds' ends. */
const twoTiers = slowLowRate((d) => {
  d.servers = { workers: 1000, maxQueue: 1000, service: { kind: 'exponential', meanMs: 300 } };
  d.tiers = { count: 2, attemptTimeoutMs: 5000, each: [{ retries: 2 }, { retries: 2 }] };
  d.objective = { p99Ms: 3000, goodputRatio: 0.99, holdS: 10 };
});

const runs: Record<string, [ServiceScenario, Promise<ScenarioRun>]> = {
  'slow, low rate': [slowLowRate(), runIsolated(slowLowRate(), 1)],
  'with bursts': [bursty, runIsolated(bursty, 1)],
  'two retrying tiers': [twoTiers, runIsolated(twoTiers, 2)],
};

describe('a verdict that does not flap at low rates', () => {
  for (const [name, [scenario, run]] of Object.entries(runs)) {
    test(`${name}: no call fails, and every variant stayed healthy throughout`, async () => {
      const { variants } = await run;
      for (const v of VARIANTS) {
        const { summary, series } = variants[v];
        assert.equal(summary.errorRate, 0, `${v}: no call failed`);
        assert.equal(summary.recoverySeconds, 0, `${v}: healthy from the trigger's end on`);
        const unhealthy = series.offered.flatMap((o, s) => (s >= 5 && (series.goodput[s]! < o || (series.p99Ms[s] ?? Infinity) > 5000) ? [s] : []));
        assert.deepEqual(unhealthy, [], `${v}: every second from the fifth on answered all it was sent`);
        const middle = series.inFlight.slice(5, 80);
        assert.ok(middle.reduce((a, b) => a + b, 0) / middle.length >= 5, `${v}: requests were in flight at seconds' ends (the case this rule is for)`);
        assert.match(describeVariant(scenario, v, variants[v]), /stayed healthy throughout$/);
      }
    });
  }
});
