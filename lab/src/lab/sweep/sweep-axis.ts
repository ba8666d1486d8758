import { exact, factor } from '../format.js';
import { type FieldStep, formatFieldPath, numberAt, parseFieldPath, withNumberAt } from './field-path.js';
import { type Json, ScenarioError } from '../scenario.js';
import { reparse, type ScenarioSource } from '../scenario-source.js';
import { scenarioSchema } from '../schema/index.js';
import { scaleLoad, type Scenario, worldOf } from '../world/worlds.js';

/**
 * What a sweep (or a check) can vary, one kind per axis:
 * - `load`: every client population's rate × the value (`--load`);
 * - `trigger`: how long the world's main trigger lasts (`--trigger`), in the
 *   unit its `trigger.axis` names;
 * - `trigger-size`: how hard it hits (`--trigger-size`), a factor or a share;
 * - `field`: any numeric field of the scenario file as written (`--axis
 *   servers.workers=2..8`), the cell's document checked again by the world's
 *   schema. A field the schema wants whole takes whole values: the grid's
 *   values rounded to the nearest integer and repeats dropped, so such an
 *   axis may have fewer values than `steps`.
 */
export type AxisKind = 'load' | 'trigger' | 'trigger-size' | 'field';

/** Which axis: a kind, and for a field its path in the file. */
export type AxisName = { readonly kind: Exclude<AxisKind, 'field'> } | { readonly kind: 'field'; readonly field: string };

/** An axis and the range of values a grid takes on it, both ends included. */
export interface AxisRange {
  readonly axis: AxisName;
  readonly from: number;
  readonly to: number;
}

/** One axis of a swept grid, as `sweep.json` has it. */
export interface SweepAxis {
  readonly kind: AxisKind;
  /** A field axis's path in the scenario file (`servers.workers`). */
  readonly field?: string;
  /** What the axis measures, with its unit. */
  readonly label: string;
  /** The grid's values, ascending. */
  readonly values: readonly number[];
  /** The scenario's own value on this axis. */
  readonly scenarioValue: number;
}

const KINDS: readonly string[] = ['load', 'trigger', 'trigger-size'];

/** An axis as a check section or `--axis` writes it: one of the three kinds' names, else a field path. */
export function axisName(text: string): AxisName {
  return KINDS.includes(text) ? { kind: text as Exclude<AxisKind, 'field'> } : { kind: 'field', field: text };
}

/** The axis as a person names it: `load`, `trigger`, `trigger-size`, or the field's path. */
export function axisTitle(axis: AxisName): string {
  return axis.kind === 'field' ? axis.field : axis.kind;
}

/** A value on an axis, for people: loads as factors (`1.5×`), the rest as set (`30`). */
export function axisTick(axis: Pick<SweepAxis, 'kind'>, v: number): string {
  return axis.kind === 'load' ? factor(v) : exact(v);
}

/** The axis in a sentence: `load` (its values carry the ×), else its label, unit in brackets: `trigger held (s)`. */
export function axisWord(axis: Pick<SweepAxis, 'kind' | 'label'>): string {
  return axis.kind === 'load' ? 'load' : axis.label;
}

/** A value on an axis, named: `load = 1.5×`, `trigger held (s) = 30`. */
export function axisAt(axis: Pick<SweepAxis, 'kind' | 'label'>, v: number): string {
  return `${axisWord(axis)} = ${axisTick(axis, v)}`;
}

/** The axis and the grid's range on it: `load, 0.5× to 1.5×`, `trigger held (s), 1 to 30`; `between` the ends (`..` in the terminal). */
export function axisSpan(axis: SweepAxis, between = ' to '): string {
  return `${axisWord(axis)}, ${axisTick(axis, axis.values[0]!)}${between}${axisTick(axis, axis.values[axis.values.length - 1]!)}`;
}

/** `steps` evenly spaced values from `from` to `to`, both included, rounded to 6 significant digits so they print cleanly. */
export function axisValues(from: number, to: number, steps: number): number[] {
  return Array.from({ length: steps }, (_, i) => (i === steps - 1 ? to : Number((from + ((to - from) * i) / (steps - 1)).toPrecision(6))));
}

/**
 * Whether the schema wants the field whole: the document with a value half
 * a unit off the written one is refused as "not an integer" at that field.
 * The schema decides, not a list kept here that a new field would escape.
 */
function isIntegerField(doc: Json, steps: readonly FieldStep[], written: number): boolean {
  const probe = scenarioSchema.safeParse(withNumberAt(doc, steps, written + 0.5));
  const at = formatFieldPath(steps);
  return !probe.success && probe.error.issues.some((i) => i.code === 'invalid_type' && i.expected === 'int' && formatFieldPath(i.path as FieldStep[]) === at);
}

/** The scenario's own value on an axis: load 1, its trigger's length or size, the field as written (a ScenarioError naming a field that is not a number in the file). */
export function ownValue(source: ScenarioSource, axis: AxisName): number {
  if (axis.kind === 'load') return 1;
  if (axis.kind === 'field') return numberAt(source.doc, parseFieldPath(axis.field, source.where), source.where);
  const world = worldOf(source.scenario);
  return (axis.kind === 'trigger' ? world.trigger : world.triggerSize).size(source.scenario);
}

/** The axis over `source`: its label, values and the scenario's own value. */
export function sweepAxis(source: ScenarioSource, range: AxisRange, steps: number): SweepAxis {
  const { axis } = range;
  const values = axisValues(range.from, range.to, steps);
  const scenarioValue = ownValue(source, axis);
  if (axis.kind === 'load') return { kind: 'load', label: 'offered load (× the scenario’s client rates)', values, scenarioValue };
  if (axis.kind !== 'field') {
    const world = worldOf(source.scenario);
    return { kind: axis.kind, label: (axis.kind === 'trigger' ? world.trigger : world.triggerSize).label(source.scenario), values, scenarioValue };
  }
  if (!isIntegerField(source.doc, parseFieldPath(axis.field, source.where), scenarioValue)) return { kind: 'field', field: axis.field, label: axis.field, values, scenarioValue };
  const whole = [...new Set(values.map(Math.round))];
  if (whole.length < 2) throw new ScenarioError(source.where, [{ field: axis.field, problem: `takes whole numbers: ${range.from}..${range.to} holds fewer than two (widen the range)` }]);
  return { kind: 'field', field: axis.field, label: axis.field, values: whole, scenarioValue };
}

/**
 * The scenario of one cell: the source's document with its field axes set
 * (and checked again by the world's schema), operator actions removed unless
 * kept, then the load scaled and the trigger resized as the other axes say.
 */
export function cellScenarioAt(source: ScenarioSource, at: readonly (readonly [Pick<SweepAxis, 'kind' | 'field'>, number])[], operators: 'kept' | 'removed'): Scenario {
  const fields = at.filter(([axis]) => axis.kind === 'field');
  let base = source.scenario;
  if (fields.length > 0) {
    const doc = fields.reduce<Json>((d, [axis, v]) => withNumberAt(d, parseFieldPath(axis.field!, source.where), v), source.doc);
    base = reparse(doc, `${source.where} with ${fields.map(([axis, v]) => `${axis.field} = ${v}`).join(', ')}`, source.path);
  }
  // The same world's scenario with fewer faults (the spread loses which member of the union it is).
  let scenario = operators === 'kept' ? base : ({ ...base, faults: base.faults.filter((f) => f.trigger) } as Scenario);
  for (const [axis, v] of at) {
    if (axis.kind === 'load') scenario = scaleLoad(scenario, v);
    else if (axis.kind === 'trigger') scenario = worldOf(scenario).trigger.resize(scenario, v);
    else if (axis.kind === 'trigger-size') scenario = worldOf(scenario).triggerSize.resize(scenario, v);
  }
  return scenario;
}
