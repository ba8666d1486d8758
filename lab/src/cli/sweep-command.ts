import { join } from 'node:path';
import { loadScenarioSource } from '../lab/lab.js';
import { WORKERS } from '../lab/parallel.js';
import { sourceWithDamperConfig, type ScenarioSource } from '../lab/scenario-source.js';
import { runSweep, type SweepGrid, sweepJson, type SweepResult } from '../lab/sweep.js';
import { axisTick } from '../lab/sweep-axis.js';
import { renderSweepReport } from '../lab/sweep-report.js';
import { VARIANTS, type VariantName } from '../lab/results.js';
import { stopwatch } from './stopwatch.js';
import { writableDir, writeFiles } from './out-dir.js';
import { formatSweepSummary, progressBar } from './terminal.js';

/** What `lab sweep` and `lab check` share: where, how and with which configuration the grid runs. */
export interface GridRun {
  readonly seed: number;
  readonly out: string;
  readonly serial: boolean;
  /** `--damper-config`: over the scenario's own `damper.config`. */
  readonly damperConfig?: string;
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
  const workers = run.serial ? 1 : Math.min(WORKERS, cells);
  bar.update(0, `sweep: ${cells} cells on ${workers} ${workers === 1 ? 'thread' : 'threads'}`);
  const result = await runSweep(source, grid, {
    seed: run.seed,
    runner: run.serial ? 'serial' : 'threads',
    operators: run.operators,
    variants: run.variants,
    onCell: (cell, done, total) => bar.update(done / total, `sweep: ${done}/${total} cells done (last: ${axisTick({ kind: grid.across.axis.kind }, cell.across)}, ${axisTick({ kind: grid.up.axis.kind }, cell.up)})`),
  });
  bar.done();
  const wall = elapsed() / 1000;
  const json = sweepJson(result);
  await writeFiles(dir, { 'sweep.json': json, 'sweep.html': renderSweepReport(result) });
  return { result, dir, json, wall, workers };
}

/** The cost line: cells, wall time, threads. */
export function costLine(cells: number, wall: number, workers: number): string {
  return `${cells} cells in ${wall.toFixed(1)} s on ${workers} ${workers === 1 ? 'thread' : 'threads'} (${((wall * workers) / cells).toFixed(1)} s per cell per thread)`;
}

/** `damper lab sweep`. */
export async function sweep(ref: string, grid: SweepGrid, args: GridRun & { readonly operators: boolean; readonly json: boolean }): Promise<number> {
  const source = await sweepSource(ref, args.damperConfig);
  const { result, dir, json, wall, workers } = await sweepGrid(source, grid, { ...args, variants: VARIANTS });
  if (args.json) process.stdout.write(json);
  else process.stdout.write(`${formatSweepSummary(result)}\n\n${costLine(result.cells.length, wall, workers)}\nwrote ${join(dir, 'sweep.html')} and ${join(dir, 'sweep.json')}\n`);
  return 0;
}
