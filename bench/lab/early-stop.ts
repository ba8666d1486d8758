/**
 * Early stopping, checked over every grid the lab shows (issue 29, part 2):
 * each cell of the shipped scenarios' check grids and of the sweeps in the
 * docs and tests, run once to its verdict (what `lab sweep` and `lab check`
 * run) and once to its horizon (what `damper lab` runs), both variants. The
 * two must give the same verdict, recovered or stuck, and the same recovery
 * second, in every cell. Also says what the early stops saved: simulated
 * seconds and requests, for recovered and stuck runs apart.
 *
 * Not a test: the whole set took 70 CPU-minutes here (docs/lab.md, "Early
 * stops, checked and counted"). The test suite runs a sample
 * (lab/test/verdict-watch.test.ts).
 * Re-run:
 *
 *   npm run bench:lab:early-stop [-- [LAB_DIST] [--seed N]]
 *
 * (tsx with lab/tsconfig.build.json, which maps no paths: with the root's,
 * tsx would load the library from its TypeScript sources, slower.)
 *
 * Prints a line per cell as it ends (standard error), a line per grid and the
 * totals (standard output: bench/lab/early-stop.txt), writes bench/lab/early-stop.json,
 * and exits 1 if any cell disagrees. Cells run in worker threads
 * (`DAMPER_LAB_THREADS`, default one per core); a cell on several grids runs once.
 */
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { type SweepGrid } from '../../lab/src/lab/sweep/sweep.js';
import { type VariantName, type VariantSummary } from '../../lab/src/lab/judge/results.js';
import { type Scenario } from '../../lab/src/lab/world/worlds.js';
import { labDist } from './lab-dist.js';

const args = process.argv.slice(2);
const seedAt = args.indexOf('--seed');
const seed = seedAt < 0 ? 1 : Number(args[seedAt + 1]);
const distArg = args.find((a, i) => !a.startsWith('--') && args[i - 1] !== '--seed');
const d = await labDist(distArg);
const VARIANTS = d.results.VARIANTS;

/** A grid of the docs or the tests: a scenario (a configuration module laid over it) and its two axes, or its check plan. */
interface GridCase {
  readonly what: string;
  readonly ref: string;
  readonly config?: string;
  readonly grid: SweepGrid | 'check';
}

const load = (from: number, to: number, steps: number, up: { kind: 'trigger' | 'trigger-size'; from: number; to: number } | { field: string; from: number; to: number }): SweepGrid => ({
  across: { axis: { kind: 'load' }, from, to },
  up: 'field' in up ? { axis: { kind: 'field', field: up.field }, from: up.from, to: up.to } : { axis: { kind: up.kind }, from: up.from, to: up.to },
  steps,
});
const trigger = (from: number, to: number) => ({ kind: 'trigger' as const, from, to });
const size = (from: number, to: number) => ({ kind: 'trigger-size' as const, from, to });

const CASES: readonly GridCase[] = [
  // `lab check`: each scenario's check section, else the default grid (check-plan.ts).
  ...['facebook-2010', 'discord-2019', 'missourian-2010', 'retry-storm', 'lab/examples/checkout.json', 'lab/examples/profile.json'].map((ref): GridCase => ({ what: 'check', ref, grid: 'check' })),
  // `lab check` with the configuration modules the docs and tests use.
  { what: 'check, careless.config.mjs', ref: 'retry-storm', config: 'lab/test/fixtures/careless.config.mjs', grid: 'check' },
  { what: 'check, checkout.config.mjs', ref: 'lab/examples/checkout.json', config: 'lab/examples/checkout.config.mjs', grid: 'check' },
  { what: 'check, checkout-no-breaker.config.mjs', ref: 'lab/examples/checkout.json', config: 'lab/examples/checkout-no-breaker.config.mjs', grid: 'check' },
  { what: 'check, profile.config.mjs', ref: 'lab/examples/profile.json', config: 'lab/examples/profile.config.mjs', grid: 'check' },
  // The sweeps docs/lab.md shows.
  { what: 'docs', ref: 'facebook-2010', grid: load(0.25, 1.25, 5, trigger(0.5, 60)) },
  { what: 'docs', ref: 'facebook-2010', grid: load(0.2, 1.4, 5, trigger(0.25, 2.25)) },
  { what: 'docs', ref: 'facebook-2010', grid: load(0.5, 1.5, 3, trigger(5, 60)) },
  { what: 'docs', ref: 'retry-storm', grid: { across: { axis: { kind: 'field', field: 'servers.workers' }, from: 2, to: 6 }, up: { axis: { kind: 'field', field: 'faults[0].factor' }, from: 2, to: 6 }, steps: 3 } },
  { what: 'docs', ref: 'retry-storm', grid: load(0.99, 1, 3, trigger(1, 3)) },
  { what: 'docs', ref: 'retry-storm', grid: load(0.99, 1, 2, size(1.5, 4)) },
  { what: 'docs', ref: 'retry-storm', grid: load(0.5, 1, 2, trigger(5, 10)) },
  { what: 'docs', ref: 'lab/examples/profile.json', grid: load(1, 2, 3, size(10, 400)) },
  // The sweep tests' grids (lab/test/sweep.test.ts), at the scenarios' own lengths.
  { what: 'tests', ref: 'discord-2019', grid: load(0.5, 1.5, 3, trigger(1, 31)) },
  { what: 'tests', ref: 'missourian-2010', grid: load(0.5, 1, 2, trigger(65, 125)) },
  { what: 'tests', ref: 'retry-storm', grid: load(0.5, 1.5, 2, trigger(5, 55)) },
  { what: 'tests', ref: 'retry-storm', grid: { across: { axis: { kind: 'field', field: 'servers.slowdownPerInFlight' }, from: 0.001, to: 0.003 }, up: { axis: { kind: 'trigger' }, from: 10, to: 40 }, steps: 2 } },
];

/** One variant of one cell, run both ways. */
interface Pair {
  readonly variant: VariantName;
  readonly full: VariantSummary;
  readonly cut: VariantSummary;
}

interface CellReport {
  readonly grid: string;
  readonly at: string;
  readonly pairs: readonly Pair[];
}

const started = performance.now();
/** A cell on several grids (a check grid and a docs grid share points) runs once. */
const runs = new Map<string, Promise<Pair[]>>();
function runBothWays(scenario: Scenario): Promise<Pair[]> {
  const key = JSON.stringify(scenario);
  let run = runs.get(key);
  if (run === undefined) {
    run = Promise.all([d.parallel.runIsolated(scenario, seed), d.parallel.runSummariesIsolated(scenario, seed, VARIANTS)]).then(([full, cut]) =>
      VARIANTS.map((variant) => ({ variant, full: full.variants[variant].summary, cut: cut[variant]! })),
    );
    runs.set(key, run);
  }
  return run;
}

const gridName = (c: GridCase, grid: SweepGrid): string => {
  const range = (r: SweepGrid['across']) => `${d.axis.axisTitle(r.axis)} ${r.from}..${r.to}`;
  return `${c.ref}${c.config === undefined ? '' : ` + ${c.config.split('/').pop()}`} (${c.what}): ${range(grid.across)} × ${range(grid.up)}, ${grid.steps} steps`;
};

const cells: Promise<CellReport>[] = [];
const grids: string[] = [];
for (const c of CASES) {
  const shipped = await d.lab.loadScenarioSource(c.ref);
  const source = c.config === undefined ? shipped : d.source.sourceWithDamperConfig(shipped, c.config);
  const grid = c.grid === 'check' ? d.checkPlan.checkPlan(source).grid : c.grid;
  const name = gridName(c, grid);
  grids.push(name);
  const across = d.axis.sweepAxis(source, grid.across, grid.steps);
  const up = d.axis.sweepAxis(source, grid.up, grid.steps);
  for (const u of up.values) {
    for (const a of across.values) {
      const scenario = d.axis.cellScenarioAt(source, [[across, a], [up, u]], 'removed');
      const at = `${d.axis.axisTick(across, a)} × ${d.axis.axisTick(up, u)}`;
      cells.push(runBothWays(scenario).then((pairs) => ({ grid: name, at, pairs })));
    }
  }
}
process.stderr.write(`${cells.length} cells on ${grids.length} grids, ${runs.size} distinct, seed ${seed}, lab from ${d.dir}\n`);
let done = 0;
// A line per cell as it ends: a run cut short still says what it found.
for (const cell of cells) {
  void cell.then(({ grid, at, pairs }) => {
    const said = pairs.map((p) => `${p.variant} ${p.full.recoverySeconds ?? 'stuck'}/${p.cut.recoverySeconds ?? 'stuck'} ${p.cut.simulatedS}/${p.full.simulatedS} s`).join(', ');
    process.stderr.write(`${++done}/${cells.length} ${((performance.now() - started) / 1000).toFixed(0)} s: ${grid} at ${at}: ${said}\n`);
  });
}
const reports = await Promise.all(cells);
const wallS = (performance.now() - started) / 1000;

/** Simulated seconds and requests, to the horizon and to the verdict. */
interface Tally {
  runs: number;
  horizonS: number;
  simulatedS: number;
  fullRequests: number;
  cutRequests: number;
}
const tally = (): Tally => ({ runs: 0, horizonS: 0, simulatedS: 0, fullRequests: 0, cutRequests: 0 });
const add = (t: Tally, p: Pair): void => {
  t.runs++;
  t.horizonS += p.full.simulatedS;
  t.simulatedS += p.cut.simulatedS;
  t.fullRequests += p.full.simulatedRequests;
  t.cutRequests += p.cut.simulatedRequests;
};
const saved = (t: Tally): string =>
  t.runs === 0 ? 'none' : `${t.runs} runs, ${pct(1 - t.simulatedS / t.horizonS)} of the simulated seconds saved (${t.simulatedS} of ${t.horizonS}), ${pct(1 - t.cutRequests / t.fullRequests)} of the simulated requests`;
const pct = (x: number): string => `${(x * 100).toFixed(1)} %`;

const disagreements: string[] = [];
const byGrid = new Map<string, { recovered: Tally; stuck: Tally }>();
const total = { recovered: tally(), stuck: tally() };
/** Seconds a stuck run stopped before its horizon: the stuck rule saves at most the objective's hold. */
const stuckSavedS: number[] = [];
// Each distinct run counts once in the totals, however many grids hold its cell.
const counted = new Set<VariantSummary>();
for (const { grid, at, pairs } of reports) {
  const g = byGrid.get(grid) ?? { recovered: tally(), stuck: tally() };
  byGrid.set(grid, g);
  for (const p of pairs) {
    if (p.full.recovered !== p.cut.recovered || p.full.recoverySeconds !== p.cut.recoverySeconds) {
      disagreements.push(`${grid} at ${at}, ${p.variant}: to the horizon ${p.full.recoverySeconds ?? 'stuck'}, to the verdict ${p.cut.recoverySeconds ?? 'stuck'}`);
    }
    const kind = p.full.recovered ? 'recovered' : 'stuck';
    add(g[kind], p);
    if (counted.has(p.full)) continue;
    counted.add(p.full);
    add(total[kind], p);
    if (kind === 'stuck') stuckSavedS.push(p.full.simulatedS - p.cut.simulatedS);
  }
}

const lines = [
  `early stopping against runs to the horizon, seed ${seed}: ${reports.length} cells on ${grids.length} grids (${runs.size} distinct), ${counted.size} variant runs each way, in ${wallS.toFixed(0)} s wall`,
  ...[...byGrid].map(([grid, g]) => `  ${grid}\n    recovered: ${saved(g.recovered)}\n    stuck: ${saved(g.stuck)}`),
  `all distinct runs, recovered: ${saved(total.recovered)}`,
  `all distinct runs, stuck: ${saved(total.stuck)}`,
  `all distinct runs: ${saved({ runs: total.recovered.runs + total.stuck.runs, horizonS: total.recovered.horizonS + total.stuck.horizonS, simulatedS: total.recovered.simulatedS + total.stuck.simulatedS, fullRequests: total.recovered.fullRequests + total.stuck.fullRequests, cutRequests: total.recovered.cutRequests + total.stuck.cutRequests })}`,
  `a stuck run stopped ${Math.min(...stuckSavedS)} to ${Math.max(...stuckSavedS)} s before its horizon`,
  disagreements.length === 0 ? 'every cell: the same verdict and recovery second both ways' : `DISAGREE in ${disagreements.length} runs:\n${disagreements.map((l) => `  ${l}`).join('\n')}`,
];
console.log(lines.join('\n'));
writeFileSync(
  'bench/lab/early-stop.json',
  `${JSON.stringify({ seed, wallS: Math.round(wallS), cells: reports.length, distinct: runs.size, total, stuckSavedS: { min: Math.min(...stuckSavedS), max: Math.max(...stuckSavedS) }, disagreements, grids: Object.fromEntries(byGrid) }, null, 2)}\n`,
);
process.exitCode = disagreements.length === 0 ? 0 : 1;
