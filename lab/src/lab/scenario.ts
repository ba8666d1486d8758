import { DamperError } from 'damper';
import { type FaultSpanDoc, type ScenarioCommon } from './schema/common.js';

/**
 * A scenario is data: a JSON file that describes a system (its clients, its
 * cache, its origin…, per its `world`) and a timeline of faults. It says nothing about how a
 * variant behaves: naive and damper are code, and react to the same world.
 * The format is documented in docs/lab.md ("Scenario files") and checked
 * by the schemas in src/lab/schema/; a parsed section's type is the one its
 * schema infers (`ScenarioCommon`, `Population`… in schema/common.ts).
 */

/** One thing wrong with a scenario file: the path of its field (`clients[0].rate`; empty for the file as a whole) and what is wrong. */
export interface ScenarioProblem {
  readonly field: string;
  readonly problem: string;
}

/**
 * A scenario file that cannot be used: every problem found in it, one line
 * each, `<file>: <field>: <problem>` (`my.json: clients[0].rate: must be ≥ 0,
 * got -5`). The file and the field are kept apart: a file's path may hold dots.
 */
export class ScenarioError extends DamperError {
  readonly file: string;
  readonly problems: readonly ScenarioProblem[];

  constructor(file: string, problems: string | readonly ScenarioProblem[]) {
    const list = typeof problems === 'string' ? [{ field: '', problem: problems }] : problems;
    if (list.length === 0) throw new Error('damper: a ScenarioError needs a problem');
    super('SCENARIO', list.map((p) => [file, p.field, p.problem].filter((part) => part !== '').join(': ')).join('\n'));
    this.file = file;
    this.problems = list;
  }
}

export type Json = unknown;

/** Parses a scenario document's JSON text; every problem is a ScenarioError naming its field. */
export function parseJson(text: string, where: string): Json {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ScenarioError(where, `not valid JSON (${(error as Error).message})`);
  }
}

/** A world's trigger axis for the sweep: what it measures, a scenario's size on it, and the scenario resized. */
export interface TriggerAxis<S> {
  /** What it measures, its unit in brackets: `trigger held (s)`, `trigger factor (×)`; pages and the terminal put values after it. */
  readonly axis: string;
  /** What it measures for this scenario: `axis`, unless the scenario's trigger says more (a hot key's share of reads, not a factor). */
  label(scenario: S): string;
  size(scenario: S): number;
  resize(scenario: S, size: number): S;
}

/**
 * The trigger axis most worlds share: the span of one fault (`pick`, by
 * default the first trigger) resized to `size` s. Every instant at or after
 * its end moves with it, so what followed the trigger (its other faults'
 * ends, operator actions) keeps its offset from it, and the run keeps its
 * time after its last fault (the sweep's "stuck" needs the same watch after
 * the trigger in every cell).
 */
export function spanAxis<S extends ScenarioCommon>(axis: string, pick: (scenario: S) => S['faults'][number] = (s) => s.faults.find((f) => f.trigger)!): TriggerAxis<S> {
  return {
    axis,
    label: () => axis,
    size: (scenario) => {
      const f = pick(scenario);
      return f.endS - f.startS;
    },
    resize: (scenario, size) => {
      const picked = pick(scenario);
      const shift = picked.startS + size - picked.endS;
      const move = (t: number): number => (t >= picked.endS ? t + shift : t);
      const faults = scenario.faults.map((f) => (f === picked ? { ...f, endS: f.startS + size } : { ...f, startS: move(f.startS), endS: Math.max(move(f.endS), move(f.startS) + 0.001) }));
      const tail = scenario.durationS - Math.max(...scenario.faults.map((f) => f.endS));
      return { ...scenario, faults, durationS: Math.max(scenario.durationS, Math.ceil(Math.max(...faults.map((f) => f.endS)) + tail)) };
    },
  };
}

/**
 * A trigger's magnitude axis (`damper lab sweep --trigger-size A..B`): how
 * hard the trigger hits, not how long — OSDI'22's experiments vary the
 * capacity drop. `pick` finds the fault to resize (the world's main
 * trigger), `get` reads its size and `set` returns it resized; the timeline
 * stays as it is. A scenario without such a fault, or a size the fault cannot
 * take, is a ScenarioError.
 */
export function sizeAxis<S extends ScenarioCommon, F extends S['faults'][number]>(
  axis: string,
  pick: (scenario: S) => F | undefined,
  get: (fault: F, scenario: S) => number,
  set: (scenario: S, fault: F, size: number) => S,
  label: (fault: F) => string = () => axis,
): TriggerAxis<S> {
  const fault = (scenario: S): F => {
    const f = pick(scenario);
    if (f === undefined) throw new ScenarioError(scenario.name, `has no trigger whose size is "${axis}"`);
    return f;
  };
  return {
    axis,
    label: (scenario) => label(fault(scenario)),
    size: (scenario) => get(fault(scenario), scenario),
    resize: (scenario, size) => set(scenario, fault(scenario), size),
  };
}

/** The scenario with `fault` replaced by `resized`. */
export function replaceFault<S extends ScenarioCommon>(scenario: S, fault: S['faults'][number], resized: S['faults'][number]): S {
  return { ...scenario, faults: scenario.faults.map((f) => (f === fault ? resized : f)) };
}

/** A fault's start or end on the timeline, ms. */
export interface FaultEvent<F> {
  readonly at: number;
  readonly starts: boolean;
  readonly fault: F;
}

/** The faults' starts and ends, in time order: what a world's `step` consumes. */
export function faultTimeline<F extends FaultSpanDoc>(faults: readonly F[]): FaultEvent<F>[] {
  return faults
    .flatMap((fault) => [
      { at: fault.startS * 1000, starts: true, fault },
      { at: fault.endS * 1000, starts: false, fault },
    ])
    .sort((a, b) => a.at - b.at);
}

/** When the incident's cause ended, s: recovery counts from here. */
export function triggerEndS(scenario: ScenarioCommon): number {
  return Math.max(...scenario.faults.filter((f) => f.trigger).map((f) => f.endS));
}

/** When the incident's cause began, s. */
export function triggerStartS(scenario: ScenarioCommon): number {
  return Math.min(...scenario.faults.filter((f) => f.trigger).map((f) => f.startS));
}
