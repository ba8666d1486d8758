import { type SweepAxis } from './sweep-axis.js';
import { cellAt, nearestIndex, outcome, summaryOf, type SweepCell, type SweepResult, type SweepVariant } from './sweep.js';
import { type WorseCell, worseThanNaive } from './worse.js';

/**
 * `damper lab check`'s verdict on a swept grid (the damper variant's cells,
 * beside naive's).
 *
 * The margin, precisely: per axis a signed headroom `m` in the axis's own
 * unit, from the scenario's own value `p`. The **margin box** is the product
 * of the two intervals [min(p, p + m), max(p, p + m)]. The grid samples it
 * conservatively: along each axis, from the last grid value at or below the
 * interval's low end to the first at or above its high end, so a box that
 * falls between grid values is judged by the cells around it, never by none.
 * The check passes when no cell of that cover is stuck (never healthy again
 * after the trigger ended), and when in no cell of the whole grid does
 * damper do worse than naive (worse.ts); with margins 0 the box is the scenario's point,
 * judged by its own cell when it is a grid value, else by the 2 or 4 around it.
 *
 * Beside the verdict, per axis, the nearest stuck cells along the line
 * through the scenario's point (the other axis at the grid value nearest its
 * own): the first at or above the own value, and the first below it.
 */
export interface AxisReach {
  readonly axis: SweepAxis;
  readonly margin: number;
  /** The nearest stuck value at or above the scenario's own along this axis; null: none on the grid. */
  readonly stuckFrom: number | null;
  /** The nearest stuck value below the scenario's own; null: none on the grid. */
  readonly stuckBelow: number | null;
}

export interface CheckVerdict {
  /** No stuck cell in the margin box's cover, and no cell of the grid worse than naive: exit 0. */
  readonly safe: boolean;
  /** The cover's ranges, across and up: [first value, last value]. */
  readonly box: { readonly across: readonly [number, number]; readonly up: readonly [number, number] };
  /** The cells the cover holds. */
  readonly boxCells: readonly SweepCell[];
  /** Those that are stuck. */
  readonly stuck: readonly SweepCell[];
  /** The cells of the whole grid where damper does worse than naive. */
  readonly worse: readonly WorseCell[];
  readonly reach: readonly [AxisReach, AxisReach];
}

/** The variant `damper lab check` judges. */
export const CHECKED: SweepVariant = 'damper';

/** Float slack for comparing a computed own value (+ margin) with a grid value rounded to 6 digits. */
function near(a: number, b: number): boolean {
  return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
}

/** The indices of the grid values covering [lo, hi]: from the last at or below lo to the first at or above hi (clamped to the grid). */
export function cover(values: readonly number[], lo: number, hi: number): readonly [number, number] {
  let from = 0;
  for (let i = 0; i < values.length; i++) if (values[i]! <= lo || near(values[i]!, lo)) from = i;
  let to = values.length - 1;
  for (let i = values.length - 1; i >= 0; i--) if (values[i]! >= hi || near(values[i]!, hi)) to = i;
  return [from, Math.max(from, to)];
}

function isStuck(result: SweepResult, cell: SweepCell): boolean {
  return outcome(summaryOf(cell, CHECKED), result.quickS) === 'stuck';
}

/** The nearest stuck values above (or at) and below the scenario's own along one axis, the other held at `at`. */
function reach(result: SweepResult, which: 'across' | 'up', at: number, margin: number): AxisReach {
  const axis = result[which];
  const stuck = axis.values.filter((_, i) => isStuck(result, which === 'across' ? cellAt(result, i, at) : cellAt(result, at, i)));
  const own = axis.scenarioValue;
  const above = stuck.filter((v) => v >= own || near(v, own));
  const below = stuck.filter((v) => v < own && !near(v, own));
  return { axis, margin, stuckFrom: above[0] ?? null, stuckBelow: below[below.length - 1] ?? null };
}

/** Judges a check's sweep with its margins (across, up). */
export function judgeCheck(result: SweepResult, margins: readonly [number, number]): CheckVerdict {
  const interval = (axis: SweepAxis, m: number) => cover(axis.values, Math.min(axis.scenarioValue, axis.scenarioValue + m), Math.max(axis.scenarioValue, axis.scenarioValue + m));
  const [a0, a1] = interval(result.across, margins[0]);
  const [u0, u1] = interval(result.up, margins[1]);
  const boxCells: SweepCell[] = [];
  for (let u = u0; u <= u1; u++) for (let a = a0; a <= a1; a++) boxCells.push(cellAt(result, a, u));
  const stuck = boxCells.filter((c) => isStuck(result, c));
  const worse = worseThanNaive(result, CHECKED);
  const homeAcross = nearestIndex(result.across);
  const homeUp = nearestIndex(result.up);
  if (homeAcross === null || homeUp === null) throw new RangeError('damper: a check grid must hold the scenario’s own point');
  return {
    safe: stuck.length === 0 && worse.length === 0,
    box: { across: [result.across.values[a0]!, result.across.values[a1]!], up: [result.up.values[u0]!, result.up.values[u1]!] },
    boxCells,
    stuck,
    worse,
    reach: [reach(result, 'across', homeUp, margins[0]), reach(result, 'up', homeAcross, margins[1])],
  };
}
