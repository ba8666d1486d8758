import { ScenarioError } from '../scenario.js';
import { type ScenarioSource } from '../scenario-source.js';
import { type AxisName, axisName, axisTick, ownValue } from './sweep-axis.js';
import { type SweepGrid } from './sweep.js';

/**
 * What `damper lab check` sweeps: the grid a scenario declares in its
 * `check` section, or a default one around its own point, and the margin
 * wanted along each axis.
 *
 * The default: offered load and the trigger's length, each from ×0.5 to
 * ×2.5 of the scenario's own value in 5 steps (×0.5, ×1, ×1.5, ×2, ×2.5), so
 * the scenario's own point is a grid point, with one step below it and three
 * above (overload and longer triggers are where a loop forms), margin 0:
 * the check then passes when the scenario's own cell is not stuck, and the
 * distances it prints say how far the nearest stuck cells are.
 */
export interface CheckPlan {
  readonly grid: SweepGrid;
  /** The margin along the across and the up axis, in each axis's unit (signed: negative looks downwards). */
  readonly margins: readonly [number, number];
  /** Whether the scenario declared the grid (its `check` section) or the default was taken. */
  readonly origin: 'declared' | 'default';
}

/** The default grid's span around the scenario's own value, × that value, and its steps. */
export const DEFAULT_SPAN = { from: 0.5, to: 2.5, steps: 5 } as const;

function defaultPlan(source: ScenarioSource): CheckPlan {
  const around = (axis: AxisName) => {
    const own = ownValue(source, axis);
    return { axis, from: own * DEFAULT_SPAN.from, to: own * DEFAULT_SPAN.to };
  };
  return { grid: { across: around({ kind: 'load' }), up: around({ kind: 'trigger' }), steps: DEFAULT_SPAN.steps }, margins: [0, 0], origin: 'default' };
}

/**
 * The check's plan for `source`. A declared grid must hold, on each axis,
 * the scenario's own value and its own value + margin (a ScenarioError naming
 * `check.axes[i]` otherwise): a margin outside the grid would be a check of
 * nothing.
 */
export function checkPlan(source: ScenarioSource): CheckPlan {
  const section = source.scenario.check;
  if (section === undefined) return defaultPlan(source);
  const ranges = section.axes.map((a, i) => {
    const axis = axisName(a.axis);
    const own = ownValue(source, axis);
    const [lo, hi] = [Math.min(own, own + a.margin), Math.max(own, own + a.margin)];
    if (lo < a.from || hi > a.to) {
      const tick = (v: number): string => axisTick({ kind: axis.kind }, v);
      throw new ScenarioError(source.where, [
        { field: `check.axes[${i}]`, problem: `the grid ${tick(a.from)}..${tick(a.to)} must hold the scenario's own value ${tick(own)} and its own value + margin ${tick(own + a.margin)}` },
      ]);
    }
    return { axis, from: a.from, to: a.to, margin: a.margin };
  });
  const [across, up] = ranges as [(typeof ranges)[number], (typeof ranges)[number]];
  return { grid: { across, up, steps: section.steps }, margins: [across.margin, up.margin], origin: 'declared' };
}
