import { runScenario } from './lab.js';
import { runSummariesIsolated } from './parallel.js';
import { VARIANTS, type VariantName, type VariantSummary } from './results.js';
import { type TriggerAxis, triggerEndS } from './scenario.js';
import { scaleLoad, type Scenario, worldOf } from './worlds.js';

/**
 * `damper lab sweep`: the vulnerable region. One scenario is replayed over a
 * grid of offered load (× its client rates, `scaleLoad`) × trigger size (its
 * world's `trigger.resize`, in the unit `trigger.axis` names), both variants
 * per cell, same seed everywhere. A cell whose variant never becomes healthy
 * again after the trigger is *stuck*: the loop outlived its cause. The stuck
 * cells are that variant's vulnerable region.
 *
 * Cells are independent, so they run in worker threads, one per core
 * (`runner: 'threads'`), or one after the other in this thread
 * (`runner: 'serial'`); a cell's result depends on its scenario and seed only,
 * so both give the same `SweepResult`, and the same `sweep.json` bytes.
 */

/** What a sweep keeps of one variant in one cell: the summary fields the heatmaps and tables show. */
export interface CellSummary {
  readonly recovered: boolean;
  /** From the trigger's end until healthy again, s; null: never (stuck). */
  readonly recoverySeconds: number | null;
  readonly amplification: number;
  readonly goodputRatio: number;
}

/** How a cell reads on the heatmap. */
export type CellOutcome = 'quick' | 'slow' | 'stuck';

export interface SweepCell {
  /** Offered load, × the scenario's client rates. */
  readonly load: number;
  /** Trigger size, in the unit of the trigger axis. */
  readonly trigger: number;
  /** How long the run watched after the trigger ended, s: "stuck" means not healthy in all that time. */
  readonly watchedS: number;
  readonly variants: Readonly<Record<VariantName, CellSummary>>;
}

export interface SweepAxis {
  /** What the axis measures, with its unit. */
  readonly label: string;
  /** The grid's values, ascending. */
  readonly values: readonly number[];
  /** The scenario's own value on this axis. */
  readonly scenarioValue: number;
}

export interface SweepResult {
  readonly scenario: string;
  readonly title: string;
  readonly seed: number;
  /** Whether the scenario's operator actions (non-trigger faults) were kept; by default they are not: the question is whether the system recovers by itself. */
  readonly operators: boolean;
  /** Recovered within this many seconds of the trigger's end: "quickly" (2 × the objective's hold). */
  readonly quickS: number;
  /** The scenario's total client rate at load × 1, requests/s. */
  readonly baseRate: number;
  readonly load: SweepAxis;
  readonly trigger: SweepAxis;
  /** Row-major: `cells[t * load.values.length + l]` is trigger value t, load value l. */
  readonly cells: readonly SweepCell[];
}

export interface SweepGrid {
  /** Offered load range, × the scenario's client rates: [from, to]. */
  readonly load: readonly [number, number];
  /** Trigger range, in the unit of the world's trigger axis: [from, to]. */
  readonly trigger: readonly [number, number];
  /**
   * Which of the trigger's sizes the up axis resizes: how long it lasts
   * (`duration`, the default: `trigger`) or how hard it hits (`size`, a factor
   * or a share: `triggerSize`).
   */
  readonly triggerAxis?: TriggerAxisKind;
  /** Values per axis (≥ 2): the grid has steps × steps cells. */
  readonly steps: number;
}

export interface SweepOptions {
  readonly seed: number;
  /** Where cells run: worker threads, one per core (default), or one after the other in this thread. */
  readonly runner?: 'threads' | 'serial';
  /** Keep the scenario's operator actions (default false: they are removed, so "stuck" means the system does not recover by itself). */
  readonly operators?: boolean;
  /** Called as each cell finishes (in any order with threads), with how many are done. */
  readonly onCell?: (cell: SweepCell, done: number, total: number) => void;
}

export const MAX_STEPS = 12;

/** The sweep's two kinds of trigger axis: how long the trigger lasts, or how hard it hits. */
export type TriggerAxisKind = 'duration' | 'size';

/** The world's axis of that kind. */
function axisOf(scenario: Scenario, kind: TriggerAxisKind): TriggerAxis<Scenario> {
  const world = worldOf(scenario);
  return kind === 'duration' ? world.trigger : world.triggerSize;
}

/** `steps` evenly spaced values from `from` to `to`, both included, rounded to 6 significant digits so they print cleanly. */
export function axisValues(from: number, to: number, steps: number): number[] {
  return Array.from({ length: steps }, (_, i) => (i === steps - 1 ? to : Number((from + ((to - from) * i) / (steps - 1)).toPrecision(6))));
}

/** Checks a grid; a problem is a RangeError saying what is wrong. */
export function checkGrid(grid: SweepGrid): void {
  if (!Number.isInteger(grid.steps) || grid.steps < 2 || grid.steps > MAX_STEPS) throw new RangeError(`steps must be an integer from 2 to ${MAX_STEPS}, got ${grid.steps}`);
  for (const [name, [from, to]] of [['load', grid.load], ['trigger', grid.trigger]] as const) {
    if (!(Number.isFinite(from) && Number.isFinite(to) && from > 0 && to > 0)) throw new RangeError(`${name}: both ends must be positive numbers, got ${from}..${to}`);
    if (!(to > from)) throw new RangeError(`${name}: the range must go up (${from}..${to})`);
  }
}

/** The scenario one cell runs: operator actions removed (unless kept), load scaled, trigger resized. */
export function cellScenario(base: Scenario, load: number, trigger: number, operators = false, axis: TriggerAxisKind = 'duration'): Scenario {
  // The same world's scenario with fewer faults (the spread loses which member of the union it is).
  const kept = operators ? base : ({ ...base, faults: base.faults.filter((f) => f.trigger) } as Scenario);
  return axisOf(base, axis).resize(scaleLoad(kept, load), trigger);
}

/** What a sweep keeps of a variant's summary. */
export function cellSummary(s: VariantSummary): CellSummary {
  return { recovered: s.recovered, recoverySeconds: s.recoverySeconds, amplification: s.amplification, goodputRatio: s.goodputRatio };
}

/** quick: healthy again within `quickS` of the trigger's end; slow: later; stuck: never. */
export function outcome(cell: CellSummary, quickS: number): CellOutcome {
  if (cell.recoverySeconds === null) return 'stuck';
  return cell.recoverySeconds <= quickS ? 'quick' : 'slow';
}

/** Runs the grid and collects every cell's summaries. */
export async function runSweep(base: Scenario, grid: SweepGrid, options: SweepOptions): Promise<SweepResult> {
  checkGrid(grid);
  const axis = grid.triggerAxis ?? 'duration';
  const operators = options.operators ?? false;
  const loads = axisValues(grid.load[0], grid.load[1], grid.steps);
  const triggers = axisValues(grid.trigger[0], grid.trigger[1], grid.steps);
  const specs = triggers.flatMap((trigger) => loads.map((load) => ({ load, trigger, scenario: cellScenario(base, load, trigger, operators, axis) })));
  let done = 0;
  const runCell = async (spec: (typeof specs)[number]): Promise<SweepCell> => {
    const summaries =
      options.runner === 'serial'
        ? await runScenario(spec.scenario, options.seed).then((run) => ({ naive: run.variants.naive.summary, damper: run.variants.damper.summary }))
        : await runSummariesIsolated(spec.scenario, options.seed);
    const variants = {} as Record<VariantName, CellSummary>;
    for (const v of VARIANTS) variants[v] = cellSummary(summaries[v]);
    const cell: SweepCell = { load: spec.load, trigger: spec.trigger, watchedS: spec.scenario.durationS - triggerEndS(spec.scenario), variants };
    options.onCell?.(cell, ++done, specs.length);
    return cell;
  };
  let cells: SweepCell[];
  if (options.runner === 'serial') {
    cells = [];
    for (const spec of specs) cells.push(await runCell(spec));
  } else {
    // The pool in parallel.ts runs at most one worker per core; results keep the grid's order.
    cells = await Promise.all(specs.map(runCell));
  }
  return {
    scenario: base.name,
    title: base.title,
    seed: options.seed,
    operators,
    quickS: 2 * base.objective.holdS,
    baseRate: base.clients.reduce((sum, c) => sum + c.rate, 0),
    load: { label: 'offered load, × the scenario’s client rates', values: loads, scenarioValue: 1 },
    trigger: { label: axisOf(base, axis).axis, values: triggers, scenarioValue: axisOf(base, axis).size(base) },
    cells,
  };
}

/** A variant's vulnerable region: the cells where it is stuck. */
export function vulnerableCells(result: SweepResult, variant: VariantName): SweepCell[] {
  return result.cells.filter((c) => outcome(c.variants[variant], result.quickS) === 'stuck');
}

/** Counts of each outcome for a variant. */
export function outcomeCounts(result: SweepResult, variant: VariantName): Record<CellOutcome, number> {
  const counts: Record<CellOutcome, number> = { quick: 0, slow: 0, stuck: 0 };
  for (const c of result.cells) counts[outcome(c.variants[variant], result.quickS)]++;
  return counts;
}

/**
 * The grid cell (indices into the axes) that stands for the scenario's own
 * setting: the nearest value on each axis, when the setting lies within the
 * axis's range (half a step of slack on each side); null otherwise.
 */
export function scenarioCell(result: SweepResult): { load: number; trigger: number } | null {
  const nearest = (axis: SweepAxis): number | null => {
    const v = axis.values;
    const half = (v[v.length - 1]! - v[0]!) / (v.length - 1) / 2;
    if (axis.scenarioValue < v[0]! - half || axis.scenarioValue > v[v.length - 1]! + half) return null;
    let best = 0;
    for (let i = 1; i < v.length; i++) if (Math.abs(v[i]! - axis.scenarioValue) < Math.abs(v[best]! - axis.scenarioValue)) best = i;
    return best;
  };
  const load = nearest(result.load);
  const trigger = nearest(result.trigger);
  return load === null || trigger === null ? null : { load, trigger };
}

/** The `sweep.json` document: no wall-clock figure, so the same grid and seed give the same bytes. */
export function sweepJson(result: SweepResult): string {
  return `${JSON.stringify(result, null, 2)}\n`;
}
