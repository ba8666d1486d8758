import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CALIBRATION_CALLS, calibrationSlice, checkCalls, checkEstimate, formatCalls, formatDuration, RunTooLargeError, runCalibration, simulatedCalls } from '../src/lab/run-cost.js';
import { triggerEndS, triggerStartS } from '../src/lab/scenario.js';
import { loadScenario } from '../src/lab/lab.js';
import { testScenario } from './support/scenario-doc.js';

/** 100 s of one open population at 200 calls/s, with `faults` (a do-nothing trigger if none). */
const scenario = (clients: Record<string, unknown>[], faults: Record<string, unknown>[] = []) =>
  testScenario('cost', {
    durationS: 100,
    baseline: { fromS: 5, toS: 20 },
    objective: { p99Ms: 500, goodputRatio: 0.95, holdS: 5 },
    clients,
    servers: { workers: 4, maxQueue: 1000, service: { kind: 'constant', ms: 10 } },
    faults: [{ kind: 'slowdown', factor: 1, startS: 20, endS: 30, label: 'nothing' }, ...faults],
  });

describe('what a run will cost, known before it starts (issue 29, part 3)', () => {
  test('an open population sends its rate × the load the faults set, second by second', () => {
    const open = [{ name: 'users', rate: 200, timeoutMs: 1000 }];
    assert.equal(simulatedCalls(scenario(open)), 20_000);
    assert.equal(simulatedCalls(scenario(open, [{ kind: 'load-spike', factor: 3, startS: 40, endS: 50, label: 'spike', trigger: false }])), 20_000 + 2 * 200 * 10);
  });

  test('a closed population at most one call per user per think time', () => {
    const closed = [{ name: 'users', users: 10, thinkTime: { kind: 'constant', ms: 100 }, timeoutMs: 1000 }];
    assert.equal(simulatedCalls(scenario(closed)), 10 * 10 * 100);
  });

  test('past the limit, refused with the cost and where it comes from; within it, the calls', () => {
    const parts = [
      { name: 'small', scenario: scenario([{ name: 'users', rate: 10, timeoutMs: 1000 }]) },
      { name: 'big', scenario: scenario([{ name: 'users', rate: 200_000, timeoutMs: 1000 }]) },
    ];
    assert.equal(checkCalls('this run', parts.slice(0, 1), ['scenario', 'scenarios'], 2, 2000), 2000);
    assert.throws(
      () => checkCalls('this run', parts, ['scenario', 'scenarios'], 2, 1e7),
      (e: unknown) => e instanceof RunTooLargeError && e.message === 'this run would simulate 40.0 million calls (2 scenarios × 2 variants; the largest, big: 40.0 million), past the limit of 10.0 million: narrow it, or raise the limit with --max-calls N',
    );
    assert.deepEqual([formatCalls(999_999), formatCalls(1_234_567), formatCalls(3.18e9)], ['999,999', '1.23 million', '3.18 billion']);
  });

  test('the calibration times the first seconds, enough for its calls, with the trigger moved into them at its share of the run', async () => {
    const busy = scenario([{ name: 'users', rate: 2000, timeoutMs: 1000 }]);
    const slice = calibrationSlice(busy);
    assert.equal(slice.durationS, CALIBRATION_CALLS / 2000, 'about the calls it aims at');
    assert.equal(simulatedCalls(slice), CALIBRATION_CALLS);
    // The trigger is 10 s of 100: a tenth of the slice, at least a second, at its end.
    assert.deepEqual([triggerStartS(slice), triggerEndS(slice)], [4, 5]);
    assert.deepEqual(slice.baseline, { fromS: 0, toS: 4 });
    const quiet = calibrationSlice(scenario([{ name: 'users', rate: 1, timeoutMs: 1000 }]));
    assert.equal(quiet.durationS, 100, 'never past the run itself');
    // Runs, both variants, and sends what it says (the retry-storm's slowdown and retries in it).
    const storm = await loadScenario('retry-storm');
    // A peer stack (lab sweep --stack) is timed under its own library, as a variant is.
    for (const stack of ['naive', 'damper', 'cockatiel'] as const) assert.equal(await runCalibration(storm, { stack, knobs: {} }, 1), simulatedCalls(calibrationSlice(storm)));
  });

  test('an estimate past --max-minutes is refused, saying what it would take and how to go on', () => {
    checkEstimate('this grid', 3600, 'the basis', 60);
    assert.throws(
      () => checkEstimate('this grid', 3601, '4 cells', 60),
      (e: unknown) => e instanceof RunTooLargeError && e.message === 'this grid would take about 1 h 0 min here (4 cells), past the limit of 60 min: narrow it, spread it over machines with --shard, or raise the limit with --max-minutes M',
    );
    assert.deepEqual([formatDuration(59.4), formatDuration(200), formatDuration(7500)], ['59 s', '3 min 20 s', '2 h 5 min']);
  });
});
