import assert from 'node:assert/strict';
import { basename, join } from 'node:path';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { loadScenarioSource, packageRoot, shippedScenarios } from '../src/lab/lab.js';
import { VARIANTS, type VariantName, type VariantSummary } from '../src/lab/judge/results.js';
import { Recorder } from '../src/lab/judge/metrics.js';
import { type ScenarioCommon } from '../src/lab/schema/common.js';
import { scenarioSource } from '../src/lab/scenario-source.js';
import { axisTick, cellScenarioAt, sweepAxis } from '../src/lab/sweep/sweep-axis.js';
import { VerdictWatch } from '../src/lab/judge/verdict-watch.js';
import { checkPlan } from '../src/lab/sweep/check-plan.js';
import { triggerEndS } from '../src/lab/scenario.js';
import { simulatedCalls } from '../src/lab/run-cost.js';
import { runIsolated, runSummariesIsolated } from '../src/lab/engine/parallel.js';
import { type Scenario } from '../src/lab/world/worlds.js';
import { DRAWN_SEED, seedName } from './support/bars.js';

/**
 * A sweep's cell ends at its verdict (issue 29, part 2): proven here to give
 * the verdict and the recovery second of the run to the horizon, first as a
 * property of the rule over any run of healthy and unhealthy seconds, then on
 * a real grid whose cells recover and stick.
 */

/** A scenario of `seconds` seconds whose trigger ends at `triggerEndS`, holding `holdS` healthy seconds to recover. */
function scenarioOf(seconds: number, triggerEndS: number, holdS: number): ScenarioCommon {
  return {
    durationS: seconds,
    baseline: { fromS: 0, toS: 1 },
    objective: { p99Ms: 100, goodputRatio: 0.9, holdS },
    faults: [{ kind: 'slowdown', startS: 0, endS: triggerEndS, trigger: true }],
  } as unknown as ScenarioCommon;
}

/** Second `s` of `recorder`: ten requests, all answered in 1 ms when healthy, all failed when not. */
function fill(recorder: Recorder, s: number, healthy: boolean): void {
  for (let i = 0; i < 10; i++) {
    recorder.started(s * 1000 + i);
    recorder.ended(s * 1000 + i, s * 1000 + i + 1, healthy ? 'good' : 'bad');
  }
}

const verdictOf = (recorder: Recorder, scenario: ScenarioCommon) => {
  const { recovered, recoverySeconds } = recorder.summary(scenario, recorder.series());
  return { recovered, recoverySeconds };
};

describe('a cell ends at its verdict', () => {
  test('property: the run ended where the watch says gives the verdict and recovery second of the whole run', () => {
    fc.assert(
      fc.property(fc.array(fc.boolean(), { minLength: 1, maxLength: 80 }), fc.integer({ min: 1, max: 10 }), fc.nat(), fc.boolean(), (healthy, holdS, end, half) => {
        const seconds = healthy.length;
        const triggerEndS = Math.min(end % seconds, seconds - 1) + (half ? 0.5 : 0);
        const scenario = scenarioOf(seconds, triggerEndS, holdS);
        const whole = new Recorder(seconds);
        healthy.forEach((h, s) => fill(whole, s, h));
        // The run as the engine would end it: asked after each whole second, with that second over.
        const partial = new Recorder(seconds);
        const watch = new VerdictWatch(partial, scenario);
        let over = 0;
        while (over < seconds && !watch.decided(over)) fill(partial, over, healthy[over++]!);
        assert.ok(over === seconds || over >= Math.ceil(triggerEndS), `decided at ${over} s, before the trigger window was over`);
        // The definition, written out here: the first second from the trigger's end that starts holdS healthy ones in a row.
        const from = Math.floor(triggerEndS);
        let recoverySeconds: number | null = null;
        for (let s = from, run = 0; s < seconds && recoverySeconds === null; s++) {
          run = healthy[s] ? run + 1 : 0;
          if (run === holdS) recoverySeconds = s - holdS + 1 - from;
        }
        const expected = { recovered: recoverySeconds !== null, recoverySeconds };
        assert.deepEqual(verdictOf(whole, scenario), expected, 'the whole run');
        assert.deepEqual(verdictOf(partial, scenario), expected, `ended after ${over} of ${seconds} s`);
      }),
      { numRuns: 2000 },
    );
  });

  test('a recovery is decided at the end of its streak; a stuck run once the streak cannot fit', () => {
    // Trigger over at 10 s, 3 healthy seconds to recover, 30 s in all.
    const scenario = scenarioOf(30, 10, 3);
    const recorder = new Recorder(30);
    const watch = new VerdictWatch(recorder, scenario);
    for (let s = 0; s < 12; s++) fill(recorder, s, s !== 11);
    assert.equal(watch.decided(10), false, 'nothing read before the trigger window is over');
    assert.equal(watch.decided(12), false, 'one healthy second, then one not');
    for (let s = 12; s < 15; s++) fill(recorder, s, true);
    assert.equal(watch.decided(14), false, 'two in a row');
    assert.equal(watch.decided(15), true, 'three in a row: recovered at 12 s, 2 s after the trigger');
    assert.equal(verdictOf(recorder, scenario).recoverySeconds, 2);

    const stuck = new Recorder(30);
    const never = new VerdictWatch(stuck, scenario);
    for (let s = 0; s < 28; s++) fill(stuck, s, false);
    assert.equal(never.decided(27), false, 'three seconds left could still hold three healthy ones');
    assert.equal(never.decided(28), true, 'two left cannot');
  });

  test('retry-storm: a cell that recovers and one that sticks end with the verdicts and figures of the run to the horizon', async () => {
    // The sweep test's grid's corners (half load and a 5 s slowdown: naive recovers; 1.5× and 55 s: it is stuck), watched a minute after the trigger.
    const shipped = await loadScenarioSource('retry-storm');
    const source = scenarioSource(JSON.stringify({ ...(shipped.doc as Record<string, unknown>), durationS: 120 + 55 + 60 }), shipped.where, shipped.path);
    const verdicts = new Set<boolean>();
    for (const [load, trigger] of [
      [0.5, 5],
      [1.5, 55],
    ] as const) {
      const scenario = cellScenarioAt(source, [[{ kind: 'load' }, load], [{ kind: 'trigger' }, trigger]], 'removed');
      for (const { variant, full, cut } of await bothWays(scenario, 1)) {
        const where = `${variant} at ${load}× × ${trigger} s`;
        assert.equal(cut.recovered, full.recovered, where);
        assert.equal(cut.recoverySeconds, full.recoverySeconds, where);
        // The peak over the part run: never above the whole run's (at half load and a 5 s slowdown, a later minute beat the trigger's).
        assert.ok(cut.amplification <= full.amplification, `${where}: ${cut.amplification} ≤ ${full.amplification}`);
        assert.ok(cut.simulatedRequests < full.simulatedRequests, `${where}: ended before the horizon (${cut.simulatedRequests} of ${full.simulatedRequests} requests)`);
        verdicts.add(full.recovered);
      }
    }
    assert.deepEqual([...verdicts].sort(), [false, true], 'cells of both verdicts');
  });
});

/**
 * Every shipped scenario and example, a cell of its `lab check` grid drawn
 * for this test run, at a seed drawn for it too ({@link DRAWN_SEED};
 * `DAMPER_LAB_SEED` replays both): ended at its verdict, it must say what
 * the run to its horizon says. The whole grids, and the docs' and tests'
 * sweeps, 218 cells to their horizons, are compared by
 * `bench/lab/early-stop.ts` (docs/lab.md, "Early stops, checked and counted"):
 * minutes of simulation, too long for the suite. Here each cell is watched
 * {@link WATCH_S} after its trigger, not to its horizon (8 to 16 minutes):
 * early stopping must agree with the run to whatever horizon it has, and a
 * short one keeps the six cells and the two corners above, on the one
 * thread a test file gets, to tens of CPU-seconds.
 */
const WATCH_S = 60;

/** The examples, by path (a test runs from the lab's folder, the command line from anywhere). */
const EXAMPLES = ['checkout', 'profile'].map((name) => join(packageRoot(), 'examples', `${name}.json`));

/**
 * The drawn cell of `ref`'s check grid, watched {@link WATCH_S} after its
 * trigger; a different cell for each scenario. Drawn among the cheaper half
 * of the grid's cells, by the users' calls they simulate: the rule that ends
 * a cell is the same in every cell, and the costliest (the long scenarios at
 * 2.5× their load) made this file 44 to 84 CPU-seconds from run to run, the
 * suite's widest spread. Every cell of every grid is compared by
 * `bench/lab/early-stop.ts`.
 */
async function drawnCell(ref: string, i: number): Promise<{ scenario: Scenario; at: string }> {
  const source = await loadScenarioSource(ref);
  const { grid } = checkPlan(source);
  const across = sweepAxis(source, grid.across, grid.steps);
  const up = sweepAxis(source, grid.up, grid.steps);
  const cells = up.values.flatMap((u) =>
    across.values.map((a) => {
      const cell = cellScenarioAt(source, [[across, a], [up, u]], 'removed');
      // Operator actions are removed: only the trigger's faults are left, all over by its end.
      const scenario: Scenario = { ...cell, durationS: Math.ceil(triggerEndS(cell)) + WATCH_S };
      return { scenario, at: `${axisTick(across, a)} × ${axisTick(up, u)}`, calls: simulatedCalls(scenario) };
    }),
  );
  const cheaper = [...cells].sort((x, y) => x.calls - y.calls).slice(0, Math.ceil(cells.length / 2));
  const { scenario, at } = cheaper[(DRAWN_SEED + 7919 * i) % cheaper.length]!;
  return { scenario, at };
}

/** A cell's variants run to the horizon and to the verdict, both in the pool's worker threads (node --test's promise hooks would slow them fivefold here). */
async function bothWays(scenario: Scenario, seed: number): Promise<{ variant: VariantName; full: VariantSummary; cut: VariantSummary }[]> {
  const [full, cut] = await Promise.all([runIsolated(scenario, seed), runSummariesIsolated(scenario, seed, VARIANTS)]);
  return VARIANTS.map((variant) => ({ variant, full: full.variants[variant].summary, cut: cut[variant]! }));
}

// Started at once: they share the pool's threads.
const drawn = shippedScenarios().then((names) => [...names, ...EXAMPLES].map(async (ref, i) => ({ ref, ...(await drawnCell(ref, i)) })));
const runs = drawn.then((cells) => cells.map((cell) => cell.then(async (c) => ({ ...c, pairs: await bothWays(c.scenario, DRAWN_SEED) }))));

describe('the shipped scenarios and examples: a cell of their check grid ends at its verdict', () => {
  test('every shipped scenario and example has a cell here', async () => {
    assert.equal((await runs).length, (await shippedScenarios()).length + EXAMPLES.length);
  });
  for (const [i, ref] of ['discord-2019', 'facebook-2010', 'missourian-2010', 'retry-storm', ...EXAMPLES].entries()) {
    test(`${basename(ref)}: the drawn cell (${seedName(DRAWN_SEED)}), both variants: the run to the verdict says what the run to the horizon says`, async () => {
      const cell = await (await runs)[i]!;
      assert.equal(cell.ref, ref);
      for (const { variant, full, cut } of cell.pairs) {
        const where = `${ref} at ${cell.at}, ${variant}`;
        assert.equal(cut.recovered, full.recovered, where);
        assert.equal(cut.recoverySeconds, full.recoverySeconds, where);
        assert.equal(full.simulatedS, cell.scenario.durationS, `${where}: the full run covers its timeline`);
        assert.ok(cut.simulatedS < full.simulatedS, `${where}: ended at ${cut.simulatedS} s, before its horizon (${full.simulatedS} s)`);
      }
    });
  }
});
