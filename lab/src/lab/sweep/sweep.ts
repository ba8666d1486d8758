import { runStackSummary, runSummaries } from '../lab.js';
import { runStackSummaryIsolated, runSummariesIsolated } from '../engine/parallel.js';
import { addedPeers, checkStackApplies, parseStackSpec } from '../stacks/peers.js';
import { type PeerSpecName, specName, type StackSpec } from '../stacks/stack.js';
import { VARIANTS, type VariantName, type VariantSummary } from '../judge/results.js';
import { triggerEndS } from '../scenario.js';
import { type ScenarioSource } from '../scenario-source.js';
import { type AxisRange, axisTick, axisTitle, cellScenarioAt, type SweepAxis, sweepAxis } from './sweep-axis.js';
import { checkCalls, DEFAULT_MAX_CALLS, simulatedCalls } from '../run-cost.js';
import { type Scenario } from '../world/worlds.js';
import { assemble, gridIdentity, PART_FORMAT, shardCells, type Shard, type SweepPart, WHOLE } from './shard.js';

/**
 * `damper lab sweep`: the vulnerable region. One scenario is replayed over a
 * grid of two axes (sweep-axis.ts: offered load, the trigger's length or
 * size, any numeric field of the file), both variants per cell, same seed
 * everywhere. A cell whose variant never becomes healthy again after the
 * trigger is *stuck*: the loop outlived its cause. The stuck
 * cells are that variant's vulnerable region.
 *
 * Cells are independent, so they run in worker threads, one per core
 * (`runner: 'threads'`), or one after the other in this thread
 * (`runner: 'serial'`); a cell's result depends on its scenario and seed only,
 * so both give the same `SweepResult`, and the same `sweep.json` bytes; so
 * does a grid run in shares on several machines and merged (shard.ts).
 */

/**
 * The variants a sweep's cell may run: the lab's two, and `damper-lab`, the
 * damper variant with the lab's own settings (the scenario's configuration
 * module set aside), beside a user's configuration. A name of its own, not a
 * field beside the cell's variants: a third heatmap, table and count then
 * come from the same code as the other two, and a sweep without a
 * configuration keeps the shape it had.
 */
export const SWEEP_VARIANTS = [...VARIANTS, 'damper-lab'] as const;

/**
 * What a cell runs: one of the lab's variants, or a peer stack (issue 31:
 * `lab sweep --stack cockatiel:bulkhead=24`), named as the command line
 * names it. The name is all a sweep keeps of a peer: `parseStackSpec` reads
 * the stack and its knobs back from it, so a part file, a merge and the
 * grid's identity carry a peer as they carry a variant.
 */
export type SweepVariant = (typeof SWEEP_VARIANTS)[number] | PeerSpecName;

/**
 * The variants a grid of `scenario` runs: naive and damper, the lab's own
 * settings beside a configuration module, then each peer stack asked for,
 * so a peer's vulnerable region is drawn beside damper's.
 */
export function gridVariants(scenario: Scenario, stacks: readonly StackSpec[] = []): readonly SweepVariant[] {
  const own = scenario.damper?.config === undefined ? VARIANTS : SWEEP_VARIANTS;
  return [...own, ...addedPeers(stacks).map((spec) => specName(spec) as PeerSpecName)];
}

/** Whether `text` (from a part file, say) names a variant a sweep can have run. */
export function isSweepVariant(text: unknown): text is SweepVariant {
  if (typeof text !== 'string') return false;
  if ((SWEEP_VARIANTS as readonly string[]).includes(text)) return true;
  try {
    return !(VARIANTS as readonly string[]).includes(parseStackSpec(text).stack);
  } catch {
    return false;
  }
}

/** The peer stack a sweep variant names; undefined for the lab's own variants. */
export function peerOf(variant: SweepVariant): StackSpec | undefined {
  return (SWEEP_VARIANTS as readonly string[]).includes(variant) ? undefined : parseStackSpec(variant);
}

/** The scenario with the lab's own damper settings: its configuration module set aside. */
function withLabSettings(scenario: Scenario): Scenario {
  const own = { ...scenario };
  delete own.damper;
  return own;
}

/** What a sweep keeps of one variant in one cell: the summary fields the heatmaps and tables show. */
export interface CellSummary {
  readonly recovered: boolean;
  /** From the trigger's end until healthy again, s; null: never (stuck). */
  readonly recoverySeconds: number | null;
  readonly amplification: number;
  readonly goodputRatio: number;
  /** Seconds of the cell's timeline its run simulated before its verdict was decided (at most `SweepCell.horizonS`). */
  readonly simulatedS: number;
}

/** How a cell reads on the heatmap. */
export type CellOutcome = 'quick' | 'slow' | 'stuck';

export interface SweepCell {
  /** The value on the across axis. */
  readonly across: number;
  /** The value on the up axis. */
  readonly up: number;
  /** How long the run watched after the trigger ended, s: "stuck" means not healthy in all that time. */
  readonly watchedS: number;
  /** The cell's timeline, whole seconds: what a variant's run to the horizon would simulate. */
  readonly horizonS: number;
  /** The summaries of the variants the sweep ran (`SweepResult.variants`). */
  readonly variants: Readonly<Partial<Record<SweepVariant, CellSummary>>>;
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
  /** The variants every cell ran ({@link gridVariants}). */
  readonly variants: readonly SweepVariant[];
  /** The heatmap's horizontal axis. */
  readonly across: SweepAxis;
  /** The heatmap's vertical axis. */
  readonly up: SweepAxis;
  /** Row-major: `cells[u * across.values.length + a]` is up value u, across value a. */
  readonly cells: readonly SweepCell[];
}

export interface SweepGrid {
  /** The horizontal axis and its range. */
  readonly across: AxisRange;
  /** The vertical axis and its range. */
  readonly up: AxisRange;
  /** Values per axis (≥ 2): the grid has steps × steps cells (fewer on a whole-number field's axis). */
  readonly steps: number;
}

export interface SweepOptions {
  readonly seed: number;
  /** Where cells run: worker threads, one per core (default), or one after the other in this thread. */
  readonly runner?: 'threads' | 'serial';
  /** Keep the scenario's operator actions (default false: they are removed, so "stuck" means the system does not recover by itself). */
  readonly operators?: boolean;
  /** Which variants each cell runs (default naive and damper). */
  readonly variants?: readonly SweepVariant[];
  /** Which share of the grid's cells to run (shard.ts); default all of them. */
  readonly shard?: Shard;
  /** Called as each cell finishes (in any order with threads), with how many (of this shard's) are done. */
  readonly onCell?: (cell: SweepCell, done: number, total: number) => void;
  /** The users' calls every cell and variant may send together (run-cost.ts); past it the sweep is refused before any cell runs. Default {@link DEFAULT_MAX_CALLS}. */
  readonly maxCalls?: number;
  /**
   * Called once the grid is known and within its limit, before any cell
   * runs (and awaited: it may time a calibration, or refuse by throwing):
   * the cells (this shard's), the calls they will send, and the cell that
   * sends the most.
   */
  readonly onPlan?: (plan: SweepPlan) => void | Promise<void>;
}

/** What a sweep (or its shard) will run, known before it runs (see {@link SweepOptions.onPlan}). */
export interface SweepPlan {
  readonly cells: number;
  /** The users' calls of every cell and variant together (run-cost.ts). */
  readonly calls: number;
  /** The cell whose users send the most calls, the one a calibration times; undefined for a shard with no cells. */
  readonly largest: Scenario | undefined;
}

export const MAX_STEPS = 12;

/**
 * Checks a grid; a problem is a RangeError saying what is wrong. Load and
 * trigger axes take positive ranges; a field's range is the schema's to judge.
 */
export function checkGrid(grid: SweepGrid): void {
  if (!Number.isInteger(grid.steps) || grid.steps < 2 || grid.steps > MAX_STEPS) throw new RangeError(`steps must be an integer from 2 to ${MAX_STEPS}, got ${grid.steps}`);
  for (const { axis, from, to } of [grid.across, grid.up]) {
    const name = axisTitle(axis);
    if (!(Number.isFinite(from) && Number.isFinite(to))) throw new RangeError(`${name}: both ends must be numbers, got ${from}..${to}`);
    if (axis.kind !== 'field' && !(from > 0 && to > 0)) throw new RangeError(`${name}: both ends must be positive numbers, got ${from}..${to}`);
    if (!(to > from)) throw new RangeError(`${name}: the range must go up (${from}..${to})`);
  }
  if (axisTitle(grid.across.axis) === axisTitle(grid.up.axis)) throw new RangeError(`the two axes must differ, got ${axisTitle(grid.up.axis)} twice`);
}

/** A cell's summary of `variant`, which the sweep ran. */
export function summaryOf(cell: SweepCell, variant: SweepVariant): CellSummary {
  const s = cell.variants[variant];
  if (s === undefined) throw new Error(`damper: the sweep did not run the ${variant} variant`);
  return s;
}

/** The cell at across index `a`, up index `u`. */
export function cellAt(result: SweepResult, a: number, u: number): SweepCell {
  return result.cells[u * result.across.values.length + a]!;
}

/** What a sweep keeps of a variant's summary. */
export function cellSummary(s: VariantSummary): CellSummary {
  return { recovered: s.recovered, recoverySeconds: s.recoverySeconds, amplification: s.amplification, goodputRatio: s.goodputRatio, simulatedS: s.simulatedS };
}

/** quick: healthy again within `quickS` of the trigger's end; slow: later; stuck: never. */
export function outcome(cell: CellSummary, quickS: number): CellOutcome {
  if (cell.recoverySeconds === null) return 'stuck';
  return cell.recoverySeconds <= quickS ? 'quick' : 'slow';
}

/** Runs the grid and collects every cell's summaries. */
export async function runSweep(source: ScenarioSource, grid: SweepGrid, options: SweepOptions): Promise<SweepResult> {
  const part = await runSweepPart(source, grid, { ...options, shard: WHOLE });
  return assemble(part.sweep, part.cells.map((c) => c.cell));
}

/**
 * Runs the cells of the grid that `options.shard` takes (all by default) and
 * returns them as a part of the sweep (shard.ts): the sweep's heading, the
 * grid's identity and the cells with their indices.
 */
export async function runSweepPart(source: ScenarioSource, grid: SweepGrid, options: SweepOptions): Promise<SweepPart> {
  checkGrid(grid);
  const operators = options.operators ?? false;
  const variants = options.variants ?? VARIANTS;
  const shard = options.shard ?? WHOLE;
  const base = source.scenario;
  const across = sweepAxis(source, grid.across, grid.steps);
  const up = sweepAxis(source, grid.up, grid.steps);
  // Every cell's scenario first, the other shards' too: a value a field cannot take fails before minutes of simulation, and every shard names the same grid.
  const specs = up.values.flatMap((u) =>
    across.values.map((a) => ({ across: a, up: u, scenario: cellScenarioAt(source, [[across, a], [up, u]], operators ? 'kept' : 'removed') })),
  );
  const sweep = {
    scenario: base.name,
    title: base.title,
    seed: options.seed,
    operators,
    quickS: 2 * base.objective.holdS,
    baseRate: base.clients.reduce((sum, c) => sum + c.rate, 0),
    variants,
    across,
    up,
  };
  // A peer that cannot run in a cell (a cache peer where there is no cache) is refused before any cell runs, naming the field it needs.
  for (const variant of variants) {
    const peer = peerOf(variant);
    if (peer !== undefined) for (const spec of specs) checkStackApplies(spec.scenario, peer.stack);
  }
  const mine = shardCells(specs.length, shard);
  // What it will cost, before any cell runs: a typo in a range (1..10000 for 1..1.5) is refused at once. A shard counts its own cells.
  const named = mine.map((k) => ({ name: `the cell at ${axisTick(across, specs[k]!.across)}, ${axisTick(up, specs[k]!.up)}`, scenario: specs[k]!.scenario }));
  const calls = checkCalls('this grid', named, ['cell', 'cells'], variants.length, options.maxCalls ?? DEFAULT_MAX_CALLS);
  const largest = mine.map((k) => specs[k]!.scenario).reduce<Scenario | undefined>((a, b) => (a === undefined || simulatedCalls(b) > simulatedCalls(a) ? b : a), undefined);
  await options.onPlan?.({ cells: mine.length, calls, largest });
  let done = 0;
  const runCell = async (k: number): Promise<{ index: number; cell: SweepCell }> => {
    const spec = specs[k]!;
    const summaries = await cellSummaries(spec.scenario, options.seed, variants, options.runner ?? 'threads');
    const cell: SweepCell = { across: spec.across, up: spec.up, watchedS: spec.scenario.durationS - triggerEndS(spec.scenario), horizonS: Math.ceil(spec.scenario.durationS), variants: summaries };
    options.onCell?.(cell, ++done, mine.length);
    return { index: k, cell };
  };
  let cells: { index: number; cell: SweepCell }[];
  if (options.runner === 'serial') {
    cells = [];
    for (const k of mine) cells.push(await runCell(k));
  } else {
    // The pool in parallel.ts runs at most one worker per core; results keep the grid's order.
    cells = await Promise.all(mine.map(runCell));
  }
  return { format: PART_FORMAT, shard, grid: gridIdentity(sweep, specs.map((s) => s.scenario)), sweep, cells };
}

/**
 * One cell's summaries, in the order of `variants`: naive and damper in one
 * run of the scenario, `damper-lab` in another with the lab's own settings,
 * each peer stack in a run of its own.
 */
async function cellSummaries(scenario: Scenario, seed: number, variants: readonly SweepVariant[], runner: 'threads' | 'serial'): Promise<Partial<Record<SweepVariant, CellSummary>>> {
  const own = variants.filter((v): v is VariantName => v === 'naive' || v === 'damper');
  const isolated = runner === 'threads';
  const ofVariants = (s: Scenario, vs: readonly VariantName[]) => (isolated ? runSummariesIsolated(s, seed, vs) : runSummaries(s, seed, vs));
  const runs: CellRun[] = variants.flatMap((v): CellRun[] => {
    if (v === 'damper-lab') return [async () => [['damper-lab', (await ofVariants(withLabSettings(scenario), ['damper'])).damper!]]];
    const peer = peerOf(v);
    return peer === undefined ? [] : [async () => [[v, await (isolated ? runStackSummaryIsolated(scenario, peer, seed) : runStackSummary(scenario, peer, seed))]]];
  });
  if (own.length > 0) runs.unshift(async () => ofVariants(scenario, own).then((s) => own.map((v) => [v, s[v]!])));
  // In this thread one run after the other, as with one variant after the other; in the pool, side by side.
  const found: [SweepVariant, VariantSummary][][] = [];
  if (isolated) found.push(...(await Promise.all(runs.map((run) => run()))));
  else for (const run of runs) found.push(await run());
  const byName = new Map(found.flat());
  // The order of `variants`, whichever run finished first.
  return Object.fromEntries(variants.map((v) => [v, cellSummary(byName.get(v)!)]));
}

/** One run a cell makes (some of the lab's variants in one run of the scenario, or a peer stack), with what it found named as the sweep names it. */
type CellRun = () => Promise<[SweepVariant, VariantSummary][]>;

/**
 * What ending cells at their verdict saved: the simulated seconds of every
 * cell and variant, against the same runs to their horizons. Deterministic
 * (virtual seconds, not wall time), so it is the same on any machine.
 */
export function earlyStopSaving(result: SweepResult): { readonly simulatedS: number; readonly horizonS: number; readonly share: number } {
  let simulatedS = 0;
  let horizonS = 0;
  for (const cell of result.cells) {
    for (const v of result.variants) {
      simulatedS += summaryOf(cell, v).simulatedS;
      horizonS += cell.horizonS;
    }
  }
  return { simulatedS, horizonS, share: horizonS === 0 ? 0 : 1 - simulatedS / horizonS };
}

/** A variant's vulnerable region: the cells where it is stuck. */
export function vulnerableCells(result: SweepResult, variant: SweepVariant): SweepCell[] {
  return result.cells.filter((c) => outcome(summaryOf(c, variant), result.quickS) === 'stuck');
}

/** Counts of each outcome for a variant. */
export function outcomeCounts(result: SweepResult, variant: SweepVariant): Record<CellOutcome, number> {
  const counts: Record<CellOutcome, number> = { quick: 0, slow: 0, stuck: 0 };
  for (const c of result.cells) counts[outcome(summaryOf(c, variant), result.quickS)]++;
  return counts;
}

/**
 * The grid cell (indices into the axes) that stands for the scenario's own
 * setting: the nearest value on each axis, when the setting lies within the
 * axis's range (half a step of slack on each side); null otherwise.
 */
export function scenarioCell(result: SweepResult): { across: number; up: number } | null {
  return onBothAxes(result, nearestIndex);
}

/** `where` on each axis of the grid; null when either is. */
function onBothAxes(result: SweepResult, where: (axis: SweepAxis) => number | null): { across: number; up: number } | null {
  const across = where(result.across);
  const up = where(result.up);
  return across === null || up === null ? null : { across, up };
}

/** The index of the axis value nearest the scenario's own, when that lies within the axis's range (half a step of slack on each side); null otherwise. */
export function nearestIndex(axis: SweepAxis): number | null {
  const v = axis.values;
  const half = (v[v.length - 1]! - v[0]!) / (v.length - 1) / 2;
  if (axis.scenarioValue < v[0]! - half || axis.scenarioValue > v[v.length - 1]! + half) return null;
  let best = 0;
  for (let i = 1; i < v.length; i++) if (Math.abs(v[i]! - axis.scenarioValue) < Math.abs(v[best]! - axis.scenarioValue)) best = i;
  return best;
}

/**
 * Where the scenario's own setting lies on the grid, in fractional indices
 * (`{ across: 1.4, up: 2 }`: four tenths of the way from the second value
 * across to the third, on the third up), for a page to mark it where it is
 * rather than on the nearest cell; null when it lies outside the grid's
 * cells (more than half a step beyond an end).
 */
export function scenarioPoint(result: SweepResult): { across: number; up: number } | null {
  return onBothAxes(result, axisPosition);
}

/** The scenario's value as a fractional index: linear between the two values around it, beyond an end by the end step. */
export function axisPosition(axis: SweepAxis): number | null {
  const v = axis.values;
  const own = axis.scenarioValue;
  const last = v.length - 1;
  let i = 0;
  while (i < last - 1 && own > v[i + 1]!) i++;
  const at = i + (own - v[i]!) / (v[i + 1]! - v[i]!);
  return at < -0.5 || at > last + 0.5 ? null : at;
}

/** The `sweep.json` document: no wall-clock figure, so the same grid and seed give the same bytes. */
export function sweepJson(result: SweepResult): string {
  return `${JSON.stringify(result, null, 2)}\n`;
}
