import { join } from 'node:path';
import { loadScenarioSource } from '../lab/lab.js';
import { labThreads } from '../lab/engine/parallel.js';
import { sourceWithDamperConfig, type ScenarioSource } from '../lab/scenario-source.js';
import { earlyStopSaving, MAX_STEPS, runSweep, type SweepGrid, sweepJson, type SweepResult } from '../lab/sweep/sweep.js';
import { axisTick } from '../lab/sweep/sweep-axis.js';
import { renderSweepReport } from '../lab/sweep/sweep-report.js';
import { DEFAULT_MAX_CALLS, formatCalls, maxCallsHelp } from '../lab/run-cost.js';
import { VARIANTS, type VariantName } from '../lab/judge/results.js';
import { stopwatch } from './stopwatch.js';
import { damperConfigOf, oneScenario, parseMaxCalls, parseSeed, parseSteps, sweepAxes } from './args.js';
import { type Command } from './command.js';
import { type OptionName, type OptionValues } from './options.js';
import { DEFAULT_OUT, writableDir, writeFiles } from './out-dir.js';
import { formatSweepSummary, progressBar } from './terminal.js';

/** The options `lab sweep` and `lab check` share, with the same words in both helps. */
export const GRID_OPTIONS = {
  seed: 'seeds everything random (default 1); the same grid and seed give a byte-identical sweep.json',
  out: 'the folder for sweep.html and sweep.json (default lab-out), made and proven writable before the run',
  serial: 'runs the cells one after another in this thread (the same results), not in a worker thread per core',
  'damper-config': 'the damper variant’s configuration module, over the scenario’s own damper.config',
  'max-calls': maxCallsHelp('every cell and variant'),
} as const satisfies Partial<Record<OptionName, string>>;

/** `damper lab sweep SCENARIO AXIS AXIS`. */
export const sweepCommand: Command = {
  name: 'lab sweep',
  summary: 'maps a scenario’s vulnerable region over two axes',
  usage: 'lab sweep SCENARIO AXIS AXIS [options]',
  about:
    'Replays SCENARIO over a grid of two axes, both variants in every cell, and maps where a run never recovers: the variant’s vulnerable region. An AXIS is --load, --trigger, --trigger-size or --axis (given twice for two fields); of the two, the first in that order (fields as given) goes across, the other up. Operator actions are removed unless --operators. Writes DIR/sweep.html (a heatmap per variant) and DIR/sweep.json; the terminal shows both grids in characters.',
  operands: [['SCENARIO', 'a shipped scenario (below) or the path to a scenario file']],
  options: [
    ['load', 'offered load, × the scenario’s client rates (e.g. 0.5..1.5)'],
    ['trigger', 'how long its world’s trigger lasts, in its unit (e.g. 5..60: the seconds an invalid value is held)'],
    ['trigger-size', 'how hard the trigger hits, in its unit (e.g. 2..8: a slowdown’s factor)'],
    ['axis', 'any numeric field of the scenario file (e.g. servers.workers=2..8), each cell checked again by its schema; a whole-number field takes rounded values'],
    ['steps', `values per axis, 2 to ${MAX_STEPS} (default 5)`],
    ['seed', GRID_OPTIONS.seed],
    ['out', GRID_OPTIONS.out],
    ['operators', 'keeps the scenario’s operator actions (removed by default: does the system recover by itself?)'],
    ['serial', GRID_OPTIONS.serial],
    ['json', 'also prints sweep.json on standard output'],
    ['damper-config', GRID_OPTIONS['damper-config']],
    ['max-calls', GRID_OPTIONS['max-calls']],
  ],
  examples: [
    ['damper lab sweep facebook-2010 --load 0.25..1.25 --trigger 0.5..60', 'load across, how long the invalid value is held up: 5 × 5 cells'],
    ["damper lab sweep retry-storm --axis servers.workers=2..6 --axis 'faults[0].factor=2..6' --steps 3", 'two fields of the file: the server’s workers across, the slowdown’s factor up, 3 × 3 cells'],
  ],
  run: (operands, values) => {
    const scenario = oneScenario('lab sweep', operands);
    const [across, up] = sweepAxes(values);
    return sweep(scenario, { across, up, steps: parseSteps(values.steps) }, { ...gridRun(values), operators: values.operators === true, json: values.json === true });
  },
};

/** What `lab sweep` and `lab check` share: where, how and with which configuration the grid runs. */
export interface GridRun {
  readonly seed: number;
  readonly out: string;
  readonly serial: boolean;
  /** `--damper-config`: over the scenario's own `damper.config`. */
  readonly damperConfig?: string;
  /** `--max-calls`: past it the grid is refused before it runs. */
  readonly maxCalls: number;
}

/** The options a grid runs with, read and checked. */
export function gridRun(values: OptionValues): GridRun {
  return { seed: parseSeed(values.seed), out: values.out ?? DEFAULT_OUT, serial: values.serial === true, maxCalls: parseMaxCalls(values['max-calls'], DEFAULT_MAX_CALLS), ...damperConfigOf(values['damper-config']) };
}

/** The scenario as a sweep reads it, with `--damper-config` laid over its own. */
export async function sweepSource(ref: string, damperConfig: string | undefined): Promise<ScenarioSource> {
  const source = await loadScenarioSource(ref);
  return damperConfig === undefined ? source : sourceWithDamperConfig(source, damperConfig);
}

/** Runs a grid with a progress bar; writes sweep.json and sweep.html into the folder proven writable first. */
export async function sweepGrid(
  source: ScenarioSource,
  grid: SweepGrid,
  run: GridRun & { readonly operators: boolean; readonly variants: readonly VariantName[] },
): Promise<{ result: SweepResult; dir: string; json: string; wall: number; workers: number }> {
  const dir = await writableDir(run.out);
  const elapsed = stopwatch();
  const bar = progressBar(process.stderr);
  const cells = grid.steps * grid.steps;
  const workers = run.serial ? 1 : Math.min(labThreads(), cells);
  const result = await runSweep(source, grid, {
    seed: run.seed,
    maxCalls: run.maxCalls,
    onPlan: (plan) => bar.update(0, `sweep: ${plan.cells} cells, ${formatCalls(plan.calls)} simulated calls, on ${workers} ${workers === 1 ? 'thread' : 'threads'}`),
    runner: run.serial ? 'serial' : 'threads',
    operators: run.operators,
    variants: run.variants,
    onCell: (cell, done, total) =>
      bar.update(done / total, `sweep: ${done}/${total} cells done (last: ${axisTick({ kind: grid.across.axis.kind }, cell.across)}, ${axisTick({ kind: grid.up.axis.kind }, cell.up)})${timeLeft(elapsed(), done, total)}`),
  });
  bar.done();
  const wall = elapsed() / 1000;
  const json = sweepJson(result);
  await writeFiles(dir, { 'sweep.json': json, 'sweep.html': renderSweepReport(result) });
  return { result, dir, json, wall, workers };
}

/**
 * The time a grid has left, read from the cells done so far (each cell's
 * time so far, the same for the rest): a guess, said as one. Empty once
 * every cell is done.
 */
export function timeLeft(elapsedMs: number, done: number, total: number): string {
  if (done === 0 || done >= total) return '';
  const s = Math.round(((elapsedMs / done) * (total - done)) / 1000);
  return s < 60 ? `, about ${s} s left` : `, about ${Math.floor(s / 60)} min ${s % 60} s left`;
}

/** The cost line: cells, wall time, threads. */
export function costLine(cells: number, wall: number, workers: number): string {
  return `${cells} cells in ${wall.toFixed(1)} s on ${workers} ${workers === 1 ? 'thread' : 'threads'} (${((wall * workers) / cells).toFixed(1)} s per cell per thread)`;
}

/** What ending cells at their verdict saved, for the cost line: "; early stops saved 41 % of the simulated seconds". */
export function savedClause(result: SweepResult): string {
  const { share } = earlyStopSaving(result);
  return `; early stops saved ${Math.round(share * 100)} % of the simulated seconds`;
}

async function sweep(ref: string, grid: SweepGrid, args: GridRun & { readonly operators: boolean; readonly json: boolean }): Promise<number> {
  const source = await sweepSource(ref, args.damperConfig);
  const { result, dir, json, wall, workers } = await sweepGrid(source, grid, { ...args, variants: VARIANTS });
  if (args.json) process.stdout.write(json);
  else process.stdout.write(`${formatSweepSummary(result)}\n\n${costLine(result.cells.length, wall, workers)}${savedClause(result)}\nwrote ${join(dir, 'sweep.html')} and ${join(dir, 'sweep.json')}\n`);
  return 0;
}
