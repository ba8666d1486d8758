import { join } from 'node:path';
import { loadScenarioSource } from '../lab/lab.js';
import { labThreads } from '../lab/engine/parallel.js';
import { sourceWithDamperConfig, type ScenarioSource } from '../lab/scenario-source.js';
import { earlyStopSaving, gridVariants, MAX_STEPS, peerOf, runSweepPart, type SweepGrid, sweepJson, type SweepPlan, type SweepResult, type SweepVariant } from '../lab/sweep/sweep.js';
import { assemble, type CheckOfPart, partFileName, partJson, type Shard, type SweepPart } from '../lab/sweep/shard.js';
import { axisTick } from '../lab/sweep/sweep-axis.js';
import { renderSweepReport } from '../lab/sweep/sweep-report.js';
import { checkEstimate, DEFAULT_MAX_CALLS, DEFAULT_MAX_MINUTES, formatCalls, formatDuration, maxCallsHelp, runCalibration } from '../lab/run-cost.js';
import { stopwatch } from './stopwatch.js';
import { type VariantName } from '../lab/judge/results.js';
import { parseStackSpec } from '../lab/stacks/peers.js';
import { type StackSpec } from '../lab/stacks/stack.js';
import { damperConfigOf, oneScenario, parseMaxCalls, parseMaxMinutes, parseSeed, parseShard, parseSteps, sweepAxes } from './args.js';
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
  'max-minutes': `the wall time the grid may take here, estimated before it runs from a calibration (default ${DEFAULT_MAX_MINUTES}); past it the grid is refused`,
  shard: 'runs the I-th of N shares of the cells (cell k goes to share k mod N + 1) and writes DIR/sweep.part-I-of-N.json; damper lab merge puts the N parts together',
} as const satisfies Partial<Record<OptionName, string>>;

/** `damper lab sweep SCENARIO AXIS AXIS`. */
export const sweepCommand: Command = {
  name: 'lab sweep',
  summary: 'maps a scenario’s vulnerable region over two axes',
  usage: 'lab sweep SCENARIO AXIS AXIS [options]',
  about:
    'Replays SCENARIO over a grid of two axes, both variants in every cell, and maps where a run never recovers: the variant’s vulnerable region. An AXIS is --load, --trigger, --trigger-size or --axis (given twice for two fields); of the two, the first in that order (fields as given) goes across, the other up. Operator actions are removed unless --operators. With --stack, a peer stack of lab stacks (cockatiel, bentocache…) runs in every cell too, in virtual time from the same seed, and its region is drawn beside damper’s. Writes DIR/sweep.html (a heatmap per variant) and DIR/sweep.json; the terminal shows both grids in characters.',
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
    ['max-minutes', GRID_OPTIONS['max-minutes']],
    ['shard', GRID_OPTIONS.shard],
    ['stack', 'a peer stack to run in every cell beside naive and damper, repeatable, with its knobs as in lab stacks (cockatiel:bulkhead=24): its vulnerable region is drawn beside damper’s'],
  ],
  examples: [
    ['damper lab sweep facebook-2010 --load 0.25..1.25 --trigger 0.5..60', 'load across, how long the invalid value is held up: 5 × 5 cells'],
    ["damper lab sweep retry-storm --axis servers.workers=2..6 --axis 'faults[0].factor=2..6' --steps 3", 'two fields of the file: the server’s workers across, the slowdown’s factor up, 3 × 3 cells'],
  ],
  run: (operands, values) => {
    const scenario = oneScenario('lab sweep', operands);
    const [across, up] = sweepAxes(values);
    const stacks = (values.stack ?? []).map(parseStackSpec);
    return sweep(scenario, { across, up, steps: parseSteps(values.steps) }, { ...gridRun(values), operators: values.operators === true, json: values.json === true, stacks });
  },
};

/** What `lab sweep` and `lab check` share: where, how and with which configuration the grid runs. */
export interface GridRun {
  readonly seed: number;
  readonly out: string;
  readonly serial: boolean;
  /** `--damper-config`: over the scenario's own `damper.config`. */
  readonly damperConfig?: string;
  /** `--max-calls`: past it the grid is refused before it runs (a shard's own cells). */
  readonly maxCalls: number;
  /** `--max-minutes`: an estimate past it is refused before the grid runs. */
  readonly maxMinutes: number;
  /** `--shard I/N`: this share of the cells, written as a part; undefined: the whole grid. */
  readonly shard?: Shard;
}

/** The options a grid runs with, read and checked. */
export function gridRun(values: OptionValues): GridRun {
  const shard = parseShard(values.shard);
  return {
    seed: parseSeed(values.seed),
    out: values.out ?? DEFAULT_OUT,
    serial: values.serial === true,
    maxCalls: parseMaxCalls(values['max-calls'], DEFAULT_MAX_CALLS),
    maxMinutes: parseMaxMinutes(values['max-minutes']),
    ...damperConfigOf(values['damper-config']),
    ...(shard === undefined ? {} : { shard }),
  };
}

/** The scenario as a sweep reads it, with `--damper-config` laid over its own. */
export async function sweepSource(ref: string, damperConfig: string | undefined): Promise<ScenarioSource> {
  const source = await loadScenarioSource(ref);
  return damperConfig === undefined ? source : sourceWithDamperConfig(source, damperConfig);
}

/** What a grid run wrote: the whole sweep (sweep.json and sweep.html), or with `--shard` its part. */
export type GridOutcome = { readonly dir: string; readonly wall: number; readonly workers: number; readonly estimateS: number } & (
  | { readonly kind: 'whole'; readonly result: SweepResult; readonly json: string }
  | { readonly kind: 'part'; readonly part: SweepPart; readonly file: string; readonly json: string }
);

/**
 * Runs a grid (its variants: {@link gridVariants}) with a progress bar;
 * writes sweep.json and sweep.html, or with `--shard` the part, into the
 * folder proven writable first. `check`: what `lab check`'s part carries.
 */
export async function sweepGrid(source: ScenarioSource, grid: SweepGrid, run: GridRun & { readonly operators: boolean; readonly check?: CheckOfPart; readonly stacks?: readonly StackSpec[] }): Promise<GridOutcome> {
  const dir = await writableDir(run.out);
  const elapsed = stopwatch();
  const bar = progressBar(process.stderr);
  let workers = 1;
  let estimateS = 0;
  const variants = gridVariants(source.scenario, run.stacks);
  const found = await runSweepPart(source, grid, {
    seed: run.seed,
    maxCalls: run.maxCalls,
    onPlan: async (plan) => {
      workers = run.serial ? 1 : Math.max(1, Math.min(labThreads(), plan.cells));
      const threads = `${workers} ${workers === 1 ? 'thread' : 'threads'}`;
      const what = `${run.shard === undefined ? 'sweep' : `sweep, share ${run.shard.index}/${run.shard.count}`}: ${plan.cells} cells, ${formatCalls(plan.calls)} simulated calls`;
      bar.update(0, `${what}; timing a call here…`);
      estimateS = await estimate(plan, variants, run.seed, workers);
      checkEstimate('this grid', estimateS, `${formatCalls(plan.calls)} calls on ${threads}, at the cost of a call of its largest cell timed just now`, run.maxMinutes);
      bar.update(0, `${what}, about ${formatDuration(estimateS)} on ${threads}`);
    },
    runner: run.serial ? 'serial' : 'threads',
    operators: run.operators,
    variants,
    ...(run.shard === undefined ? {} : { shard: run.shard }),
    onCell: (cell, done, total) =>
      bar.update(done / total, `sweep: ${done}/${total} cells done (last: ${axisTick({ kind: grid.across.axis.kind }, cell.across)}, ${axisTick({ kind: grid.up.axis.kind }, cell.up)})${timeLeft(elapsed(), done, total)}`),
  });
  bar.done();
  const wall = elapsed() / 1000;
  if (run.shard !== undefined) {
    const part: SweepPart = run.check === undefined ? found : { ...found, check: run.check };
    const json = partJson(part);
    await writeFiles(dir, { [partFileName(run.shard)]: json });
    return { kind: 'part', part, file: join(dir, partFileName(run.shard)), json, dir, wall, workers, estimateS };
  }
  const result = assemble(found.sweep, found.cells.map((c) => c.cell));
  return { kind: 'whole', result, ...(await writeSweep(dir, result)), dir, wall, workers, estimateS };
}

/**
 * Know before you wait: the wall time a grid will take here, s. Each
 * variant's call is timed on the grid's largest cell (run once to warm the
 * code, once timed: run-cost.ts), a peer stack's under that peer, and every
 * cell's calls are costed at it, spread over the threads. damper-lab (the
 * lab's own settings) is costed as damper. A guess, said as one
 * (docs/lab.md, "Know before you wait").
 */
async function estimate(plan: SweepPlan, variants: readonly SweepVariant[], seed: number, workers: number): Promise<number> {
  if (plan.largest === undefined) return 0;
  const perCall: Partial<Record<SweepVariant, number>> = {};
  for (const variant of variants) {
    if (variant === 'damper-lab') continue;
    const stack = peerOf(variant) ?? { stack: variant as VariantName, knobs: {} };
    await runCalibration(plan.largest, stack, seed);
    const timed = stopwatch();
    const calls = await runCalibration(plan.largest, stack, seed);
    perCall[variant] = timed() / calls;
  }
  const msPerCall = variants.reduce((sum, v) => sum + perCall[v === 'damper-lab' ? 'damper' : v]!, 0);
  return ((plan.calls / variants.length) * msPerCall) / 1000 / workers;
}

/** Writes sweep.json and sweep.html, a whole run's or a merge's. */
export async function writeSweep(dir: string, result: SweepResult): Promise<{ json: string }> {
  const json = sweepJson(result);
  await writeFiles(dir, { 'sweep.json': json, 'sweep.html': renderSweepReport(result) });
  return { json };
}

/** What a shard's run prints: what it ran and wrote, and how the parts come together. */
export function partLines(outcome: GridOutcome & { kind: 'part' }): string {
  const { part } = outcome;
  const total = part.sweep.across.values.length * part.sweep.up.values.length;
  const { index, count } = part.shard;
  return [
    `damper lab ${part.check === undefined ? 'sweep' : 'check'} ${part.sweep.scenario}, seed ${part.sweep.seed}: share ${index} of ${count}, ${part.cells.length} of the grid's ${total} cells`,
    costLine(part.cells.length, outcome.wall, outcome.workers, outcome.estimateS),
    `wrote ${outcome.file}`,
    `once all ${count} parts are written: damper lab merge PARTS_OR_FOLDERS [--out DIR] writes sweep.json and sweep.html${part.check === undefined ? '' : ' and gives the check’s verdict'}`,
  ].join('\n');
}

/**
 * The time a grid has left, read from the cells done so far (each cell's
 * time so far, the same for the rest): a guess, said as one. Empty once
 * every cell is done.
 */
export function timeLeft(elapsedMs: number, done: number, total: number): string {
  if (done === 0 || done >= total) return '';
  return `, about ${formatDuration(((elapsedMs / done) * (total - done)) / 1000)} left`;
}

/** The cost line: cells, wall time, threads, and the estimate made before they ran (none for a merge). */
export function costLine(cells: number, wall: number, workers: number, estimateS?: number): string {
  const guessed = estimateS === undefined ? '' : `; estimated ${formatDuration(estimateS)} before it ran`;
  const per = cells === 0 ? '' : ` (${((wall * workers) / cells).toFixed(1)} s per cell per thread${guessed})`;
  return `${cells} cells in ${wall.toFixed(1)} s on ${workers} ${workers === 1 ? 'thread' : 'threads'}${per}`;
}

/** What ending cells at their verdict saved, for the cost line: "; early stops saved 41 % of the simulated seconds". */
export function savedClause(result: SweepResult): string {
  const { share } = earlyStopSaving(result);
  return `; early stops saved ${Math.round(share * 100)} % of the simulated seconds`;
}

async function sweep(ref: string, grid: SweepGrid, args: GridRun & { readonly operators: boolean; readonly json: boolean; readonly stacks: readonly StackSpec[] }): Promise<number> {
  const source = await sweepSource(ref, args.damperConfig);
  const outcome = await sweepGrid(source, grid, args);
  if (args.json) process.stdout.write(outcome.json);
  else if (outcome.kind === 'part') process.stdout.write(`${partLines(outcome)}\n`);
  else process.stdout.write(`${sweepScreen(outcome.result, `${costLine(outcome.result.cells.length, outcome.wall, outcome.workers, outcome.estimateS)}${savedClause(outcome.result)}\nwrote ${join(outcome.dir, 'sweep.html')} and ${join(outcome.dir, 'sweep.json')}`)}\n`);
  return 0;
}

/** `lab sweep`'s screen, a run's or a merge's: the grids, the regions compared, then `footer`. */
export function sweepScreen(result: SweepResult, footer: string): string {
  return `${formatSweepSummary(result)}\n\n${footer}`;
}
