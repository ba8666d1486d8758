import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadScenario, shippedScenarios } from '../src/lab/lab.js';
import { triggerEndS } from '../src/lab/scenario.js';
import { axisValues, cellScenario, checkGrid, MAX_STEPS, runSweep, scenarioCell, type SweepGrid, type SweepResult, sweepJson, vulnerableCells } from '../src/lab/sweep.js';
import { type Scenario, worldOf } from '../src/lab/worlds.js';

/**
 * The sweep on the shipped scenarios: a small grid each, where naive's
 * vulnerable region (cells stuck long after the trigger ended) must be
 * neither empty nor the whole grid, and damper's strictly smaller. A new
 * scenario is one line in GRIDS: a grid that straddles its naive boundary.
 */
const GRIDS: readonly { readonly scenario: string; readonly grid: SweepGrid; readonly monotone?: boolean }[] = [
  // sitevars at ×0.25 load is read 62/s, under the database's 100/s: naive recovers at any trigger size there; 0.5 s recovers everywhere.
  { scenario: 'facebook-2010', grid: { load: [0.25, 1.25], trigger: [0.5, 60], steps: 3 }, monotone: true },
  // Nodes degraded 1 s at half load: naive recovers; longer or heavier: stuck (`damper lab sweep discord-2019 --load 0.5..1.5 --trigger 1..31 --steps 3`: 7 of 9).
  { scenario: 'discord-2019', grid: { load: [0.5, 1.5], trigger: [1, 31], steps: 2 }, monotone: true },
  // At half load the farm survives a hung server; at the record load it does not (2 of 4).
  { scenario: 'missourian-2010', grid: { load: [0.5, 1], trigger: [65, 125], steps: 2 }, monotone: true },
  // A short slowdown at half load recovers; longer or heavier: the retry storm holds.
  { scenario: 'retry-storm', grid: { load: [0.5, 1.5], trigger: [5, 55], steps: 2 }, monotone: true },
];

/**
 * A shorter run of the same scenario for the serial-vs-threads check: operator
 * actions removed (as the sweep does) and the run ended `afterS` after the
 * trigger instead of the scenario's own horizon. Only for comparing two ways
 * of running the same grid, where what matters is equality, not the verdict.
 */
function shortened(s: Scenario, afterS: number): Scenario {
  const faults = s.faults.filter((f) => f.trigger);
  return { ...s, faults, durationS: triggerEndS({ ...s, faults }) + afterS } as Scenario;
}

// The grids start at once and share the cores through the pool in parallel.ts.
const sweeps = new Map(GRIDS.map(({ scenario, grid }) => [scenario, loadScenario(scenario).then((s) => runSweep(s, grid, { seed: 1 }))]));

// The slowdown's factor resized instead of its length (--trigger-size).
const sizeSweep = loadScenario('retry-storm').then((s) => runSweep(s, { load: [0.99, 1], trigger: [1.5, 4], triggerAxis: 'size', steps: 2 }, { seed: 1 }));

describe('the vulnerable region, per shipped scenario', () => {
  test('every shipped scenario has a grid here', async () => {
    assert.deepEqual([...GRIDS.map((g) => g.scenario)].sort(), await shippedScenarios());
  });

  for (const { scenario, grid, monotone } of GRIDS) {
    test(`${scenario}: naive's region is neither empty nor the whole grid; damper's is strictly smaller`, { timeout: 120_000 }, async () => {
      const result = await sweeps.get(scenario)!;
      assert.equal(result.cells.length, grid.steps * grid.steps);
      const naive = vulnerableCells(result, 'naive');
      const damper = vulnerableCells(result, 'damper');
      const map = (r: SweepResult, v: 'naive' | 'damper'): string => r.cells.map((c) => `${c.load}×${c.trigger}:${c.variants[v].recoverySeconds ?? 'stuck'}`).join(' ');
      assert.ok(naive.length > 0 && naive.length < result.cells.length, `naive stuck in ${naive.length} cells: ${map(result, 'naive')}`);
      assert.ok(damper.length < naive.length, `damper stuck in ${damper.length} cells: ${map(result, 'damper')}`);
      // Stuck means not healthy long after the trigger: every cell watched for minutes after it ended.
      for (const c of result.cells) assert.ok(c.watchedS >= 300, `${c.load}×${c.trigger} watched only ${c.watchedS} s`);
      // The edge runs the way the loop says: more load or a longer trigger never turns stuck into recovered.
      if (monotone !== true) return;
      const n = result.load.values.length;
      for (const c of naive) {
        const t = result.trigger.values.indexOf(c.trigger);
        const l = result.load.values.indexOf(c.load);
        if (l + 1 < n) assert.equal(result.cells[t * n + l + 1]!.variants.naive.recoverySeconds, null, `more load than ${c.load}×${c.trigger}`);
        if (t + 1 < result.trigger.values.length) assert.equal(result.cells[(t + 1) * n + l]!.variants.naive.recoverySeconds, null, `a longer trigger than ${c.load}×${c.trigger}`);
      }
    });
  }
});

describe('where the cells run changes nothing', () => {
  // One scenario is enough to compare two ways of running the same cells; every grid costs ~20 s.
  for (const { scenario, grid } of GRIDS.slice(0, 1)) {
    test(`${scenario}: worker threads and one thread give a deep-equal result and a byte-identical sweep.json`, { timeout: 120_000 }, async () => {
      const base = shortened(await loadScenario(scenario), 60);
      const small: SweepGrid = { ...grid, steps: 2 };
      const threads = await runSweep(base, small, { seed: 3, runner: 'threads' });
      const serial = await runSweep(base, small, { seed: 3, runner: 'serial' });
      assert.deepEqual(threads, serial);
      assert.equal(sweepJson(threads), sweepJson(serial));
      // And the seed matters: the same grid at another seed is another run.
      const other = await runSweep(base, small, { seed: 4, runner: 'threads' });
      assert.notEqual(sweepJson(other), sweepJson(threads));
    });
  }
});

describe('the grid', () => {
  test('axes: N values from A to B, both ends included, printable', () => {
    assert.deepEqual(axisValues(0.5, 1.5, 3), [0.5, 1, 1.5]);
    assert.deepEqual(axisValues(5, 60, 5), [5, 18.75, 32.5, 46.25, 60]);
    assert.deepEqual(axisValues(0.1, 0.3, 3), [0.1, 0.2, 0.3], 'no 0.30000000000000004');
  });

  test('bad grids are RangeErrors saying what is wrong', () => {
    const ok: SweepGrid = { load: [0.5, 1.5], trigger: [5, 60], steps: 3 };
    assert.doesNotThrow(() => checkGrid(ok));
    for (const [grid, message] of [
      [{ ...ok, steps: 1 }, /steps must be an integer from 2/],
      [{ ...ok, steps: MAX_STEPS + 1 }, /steps must be an integer from 2/],
      [{ ...ok, steps: 2.5 }, /steps/],
      [{ ...ok, load: [0, 1] }, /load: both ends must be positive/],
      [{ ...ok, trigger: [60, 5] }, /trigger: the range must go up/],
      [{ ...ok, load: [1, Number.NaN] }, /load/],
    ] as const) {
      assert.throws(() => checkGrid(grid as SweepGrid), (e) => e instanceof RangeError && message.test(e.message));
    }
  });

  for (const { scenario } of GRIDS) {
    test(`${scenario}: a cell is the scenario at that load and trigger size, without operator actions`, async () => {
      const base = await loadScenario(scenario);
      const world = worldOf(base);
      const cell = cellScenario(base, 1.5, 7);
      assert.deepEqual(
        cell.clients.map((c) => c.rate),
        base.clients.map((c) => c.rate * 1.5),
      );
      assert.equal(world.trigger.size(cell), 7);
      assert.ok(cell.faults.every((f) => f.trigger), 'operator actions removed');
      assert.ok(cellScenario(base, 1, world.trigger.size(base), true).faults.length === base.faults.length, 'kept with operators: true');
      // Load 1 at the scenario's own trigger size, operators kept, is the scenario itself.
      assert.deepEqual(cellScenario(base, 1, world.trigger.size(base), true), base);
    });
  }

  test("the scenario's own cell: the nearest grid point, or none when outside the grid", () => {
    const result = (load: number[], trigger: number[], home: [number, number]): SweepResult =>
      ({ load: { label: 'l', values: load, scenarioValue: home[0] }, trigger: { label: 't', values: trigger, scenarioValue: home[1] } }) as unknown as SweepResult;
    assert.deepEqual(scenarioCell(result([0.5, 1, 1.5], [5, 32.5, 60], [1, 60])), { load: 1, trigger: 2 });
    assert.deepEqual(scenarioCell(result([0.5, 1.5], [5, 60], [1.1, 40])), { load: 1, trigger: 1 });
    assert.equal(scenarioCell(result([0.5, 1.5], [0.25, 2.25], [1, 60])), null);
  });
});

describe('damper lab sweep command', () => {
  // The CLI as compiled next to this test (build/src/cli/main.js): no tsx to start in every process and worker.
  const main = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
  const cli = (...args: string[]) => spawnSync(process.execPath, [main, 'lab', 'sweep', ...args], { encoding: 'utf8', timeout: 120_000 });
  const noStack = (stderr: string): void => assert.doesNotMatch(stderr, /\n\s+at /);

  test('bad arguments: one line naming the problem, the usage, exit 2', () => {
    const ok = ['--load', '0.5..1.5', '--trigger', '5..60'];
    for (const [args, message] of [
      [['facebook-2010', '--trigger', '5..60'], /lab sweep needs --load A\.\.B/],
      [['facebook-2010', '--load', '0.5..1.5'], /lab sweep needs --trigger C\.\.D/],
      [[...ok], /lab sweep needs a SCENARIO/],
      [['facebook-2010', 'other', ...ok], /one SCENARIO, got also: other/],
      [['facebook-2010', '--load', '1.5', '--trigger', '5..60'], /--load must be a range A\.\.B/],
      [['facebook-2010', '--load', '0.5..x', '--trigger', '5..60'], /--load must be a range/],
      [['facebook-2010', '--load', '0..1', '--trigger', '5..60'], /--load: 0 is not positive/],
      [['facebook-2010', '--load', '0.5..1.5', '--trigger', '60..5'], /--trigger: the range must go up/],
      [['facebook-2010', ...ok, '--steps', '1'], /--steps must be an integer from 2 to 12/],
      [['facebook-2010', ...ok, '--steps', '13'], /--steps must be an integer from 2 to 12/],
      [['facebook-2010', ...ok, '--steps', '3.5'], /--steps must be an integer/],
      [['facebook-2010', ...ok, '--seed', '-2'], /--seed/],
    ] as const) {
      const r = cli(...args);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message, args.join(' '));
      assert.match(r.stderr, /usage: damper/);
      noStack(r.stderr);
    }
  });

  test('an unknown scenario exits 2 naming it; sweep options outside lab sweep are refused', () => {
    const r = cli('no-such-incident', '--load', '0.5..1.5', '--trigger', '5..60');
    assert.equal(r.status, 2);
    assert.match(r.stderr, /no-such-incident: unknown scenario/);
    noStack(r.stderr);
    const lab = spawnSync(process.execPath, [main, 'lab', 'facebook-2010', '--steps', '3'], { encoding: 'utf8' });
    assert.equal(lab.status, 2);
    assert.match(lab.stderr, /--steps is an option of lab sweep only/);
  });

  test('a small real run writes sweep.json and sweep.html and prints the region', { timeout: 120_000 }, () => {
    const dir = mkdtempSync(join(tmpdir(), 'damper-sweep-'));
    const file = join(dir, 'small.json');
    const doc = JSON.parse(readFileSync('scenarios/facebook-2010.json', 'utf8')) as Record<string, unknown>;
    // The shipped scenario, shortened: the trigger from 60 s to 80 s, 100 s watched after the trigger.
    writeFileSync(
      file,
      JSON.stringify({
        ...doc,
        name: 'small',
        durationS: 180,
        faults: [{ kind: 'invalid-value', key: 'sitevars', startS: 60, endS: 80, label: 'a short trigger' }],
        baseline: { fromS: 20, toS: 60 },
      }),
    );
    const out = join(dir, 'out');
    const r = cli(file, '--load', '0.25..1', '--trigger', '0.5..20', '--steps', '2', '--seed', '2', '--out', out);
    assert.equal(r.status, 0, r.stderr);
    assert.ok(existsSync(join(out, 'sweep.html')));
    const json = JSON.parse(readFileSync(join(out, 'sweep.json'), 'utf8')) as SweepResult;
    assert.equal(json.scenario, 'small');
    assert.equal(json.seed, 2);
    assert.deepEqual(json.load.values, [0.25, 1]);
    assert.deepEqual(json.trigger.values, [0.5, 20]);
    assert.equal(json.cells.length, 4);
    for (const c of json.cells) for (const v of ['naive', 'damper'] as const) assert.deepEqual(Object.keys(c.variants[v]).sort(), ['amplification', 'goodputRatio', 'recovered', 'recoverySeconds']);
    assert.match(r.stdout, /vulnerable region \(stuck cells\): naive \d\/4 \(\d+ %\), damper \d\/4/);
    assert.match(r.stdout, /^naive: \d of 4 cells stuck/m);
    assert.match(r.stderr, /sweep: 4\/4 cells done/);
  });
});

describe('--trigger-size: how hard the trigger hits, not how long (OSDI 2022 varies the capacity drop)', () => {
  test('every shipped world reads and resizes its main trigger’s magnitude, timeline unchanged', async () => {
    const expected: Record<string, number> = { 'facebook-2010': 0.25, 'discord-2019': 0.99, 'missourian-2010': 1.43, 'retry-storm': 4 };
    for (const name of await shippedScenarios()) {
      const s = await loadScenario(name);
      const axis = worldOf(s).triggerSize;
      assert.equal(Number(axis.size(s).toFixed(6)), expected[name], name);
      const resized = cellScenario(s, 1, name === 'discord-2019' ? 0.5 : 0.1, true, 'size');
      assert.equal(Number(axis.size(resized).toFixed(6)), name === 'discord-2019' ? 0.5 : 0.1, name);
      assert.deepEqual(resized.faults.map((f) => [f.startS, f.endS]), s.faults.map((f) => [f.startS, f.endS]), `${name}: the timeline stays`);
    }
  });

  test('a size the trigger cannot take is refused, naming it', async () => {
    const fb = await loadScenario('facebook-2010');
    assert.throws(() => cellScenario(fb, 1, 2, true, 'size'), /invalid key's share must be above 0 and at most/);
    const discord = await loadScenario('discord-2019');
    assert.throws(() => cellScenario(discord, 1, 1.5, true, 'size'), /share of throughput lost must be above 0 and below 1/);
  });

  test('retry-storm: a mild slowdown recovers, a hard one of the same length is stuck (naive)', { timeout: 600_000 }, async () => {
    const result = await sizeSweep;
    assert.equal(result.trigger.label, worldOf(await loadScenario('retry-storm')).triggerSize.axis);
    const naive = (factor: number) => result.cells.find((c) => c.load === 1 && c.trigger === factor)!.variants.naive;
    // ×1.5 leaves 265 requests/s for 200 offered; ×4 leaves 99.
    assert.notEqual(naive(1.5).recoverySeconds, null);
    assert.equal(naive(4).recoverySeconds, null);
    assert.ok(result.cells.every((c) => c.variants.damper.recoverySeconds !== null), 'damper recovers in every cell');
  });
});
