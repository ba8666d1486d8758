import { DamperError } from '../index.js';

/**
 * A scenario is data: a JSON file that describes a system (its clients, its
 * cache, its origin…, per its `world`) and a timeline of faults. It says nothing about how a
 * variant behaves: naive and damper are code, and react to the same world.
 * The format is documented in docs/scenarios.md.
 */

/** A scenario file that cannot be used, with the path of the offending field. */
export class ScenarioError extends DamperError {
  constructor(where: string, message: string) {
    super('SCENARIO', `${where}: ${message}`);
  }
}

export type Priority = 'critical' | 'normal' | 'low' | 'background';
const PRIORITIES: readonly Priority[] = ['critical', 'normal', 'low', 'background'];

/**
 * How a naive client waits before retrying: `none`, at once; `fixed`, the
 * same delay each time; `exponential`, `min(maxMs, baseMs · 2^(n−1))` before
 * retry n; `full-jitter`, uniform in [0, that). Whole milliseconds.
 */
export type Backoff = { readonly kind: 'none' } | { readonly kind: 'fixed'; readonly delayMs: number } | { readonly kind: 'exponential'; readonly baseMs: number; readonly maxMs: number } | { readonly kind: 'full-jitter'; readonly baseMs: number; readonly maxMs: number };

/** A random (or constant) delay, ms: what one network hop costs. */
export type Delay = { readonly kind: 'constant'; readonly ms: number } | { readonly kind: 'exponential'; readonly meanMs: number } | { readonly kind: 'lognormal'; readonly medianMs: number; readonly sigma: number };

/** An open-loop client population: arrivals do not slow down when the system does. */
export interface Population {
  readonly name: string;
  /** Mean requests per second (Poisson arrivals). */
  readonly rate: number;
  /** The client gives up after this long, ms. */
  readonly timeoutMs: number;
  /** Further attempts after a failure or timeout. */
  readonly retries: number;
  /** Wait before each retry, ms (see `backoff`, which supersedes it). */
  readonly retryDelayMs: number;
  /** Wait before each retry. Default: `fixed` at `retryDelayMs` when that is above 0, else `none`. */
  readonly backoff: Backoff;
  readonly priority: Priority;
}

/** What every fault has: a span on the timeline, a label, and whether it is part of the incident's cause. */
export interface FaultSpanDoc {
  readonly kind: string;
  readonly startS: number;
  readonly endS: number;
  readonly label: string;
  /** Part of the incident's cause (recovery counts from the end of the last trigger); else an operator's action. */
  readonly trigger: boolean;
}

/**
 * The fields every scenario has, whatever its world. A world (see
 * src/lab/worlds.ts) adds its own: what the system is made of, and which
 * faults it knows.
 */
export interface ScenarioCommon {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  /** Where the numbers come from. */
  readonly source: string;
  /** How the real numbers were scaled to what one core simulates in seconds. */
  readonly scaling: string;
  readonly durationS: number;
  /** Window before the trigger whose mean origin rate is the baseline, s. */
  readonly baseline: { readonly fromS: number; readonly toS: number };
  /** What "healthy" means: goodput ≥ goodputRatio × offered and p99 ≤ p99Ms, every second for holdS. */
  readonly objective: { readonly p99Ms: number; readonly goodputRatio: number; readonly holdS: number };
  readonly clients: readonly Population[];
  readonly faults: readonly FaultSpanDoc[];
  /** What a hop between two tiers costs (each world says which hops its requests make). Default: a constant 0. */
  readonly network: { readonly hopDelay: Delay };
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

/**
 * Checks the fields every scenario has. Faults are checked for their span and
 * label here; `fault` (the world's) checks the rest of each and says whether
 * it is a trigger. At least one trigger is required.
 */
export function checkCommon(
  o: Record<string, Json>,
  where: string,
  fault: (doc: Record<string, Json>, span: { kind: string; startS: number; endS: number; label: string }, where: string) => FaultSpanDoc,
): ScenarioCommon {
  const durationS = num(o, 'durationS', where, { min: 1, max: 86_400 });
  const at = (field: string): string => `${where}.${field}`;
  const baselineDoc = object(o.baseline, at('baseline'));
  const baseline = { fromS: num(baselineDoc, 'fromS', at('baseline'), { min: 0 }), toS: num(baselineDoc, 'toS', at('baseline'), { min: 0 }) };
  if (baseline.toS <= baseline.fromS) throw new ScenarioError(at('baseline'), 'toS must be after fromS');
  const objectiveDoc = object(o.objective, at('objective'));
  const clients = array(o.clients, at('clients')).map((c, i) => population(c, at(`clients[${i}]`)));
  if (clients.length === 0) throw new ScenarioError(at('clients'), 'needs at least one population');
  const faults = array(o.faults, at('faults')).map((f, i) => {
    const w = at(`faults[${i}]`);
    const fo = object(f, w);
    const kind = str(fo, 'kind', w);
    const startS = num(fo, 'startS', w, { min: 0, max: durationS });
    const endS = num(fo, 'endS', w, { min: 0, max: durationS });
    if (endS <= startS) throw new ScenarioError(w, `endS (${endS}) must be after startS (${startS})`);
    return fault(fo, { kind, startS, endS, label: str(fo, 'label', w) }, w);
  });
  if (!faults.some((f) => f.trigger)) throw new ScenarioError(at('faults'), 'needs a trigger');
  return {
    name: str(o, 'name', where),
    title: str(o, 'title', where),
    description: str(o, 'description', where),
    source: str(o, 'source', where),
    scaling: str(o, 'scaling', where),
    durationS,
    baseline,
    objective: {
      p99Ms: num(objectiveDoc, 'p99Ms', at('objective'), { min: 1 }),
      goodputRatio: num(objectiveDoc, 'goodputRatio', at('objective'), { min: 0, max: 1 }),
      holdS: num(objectiveDoc, 'holdS', at('objective'), { min: 1, integer: true }),
    },
    clients,
    faults,
    network: { hopDelay: { kind: 'constant', ms: 0 } },
  };
}

/** A world's trigger axis for the sweep: what it measures, a scenario's size on it, and the scenario resized. */
export interface TriggerAxis<S> {
  readonly axis: string;
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

/** A simulated database's shape (`Database` in world/database.ts): the `origin` section of several worlds. */
export function parseOrigin(o: Record<string, Json>, where: string): { readonly capacityQps: number; readonly workers: number; readonly maxQueue: number } {
  const doc = object(o.origin, `${where}.origin`);
  const at = `${where}.origin`;
  return {
    capacityQps: num(doc, 'capacityQps', at, { min: 1 }),
    workers: num(doc, 'workers', at, { min: 1, integer: true, max: 10_000 }),
    maxQueue: num(doc, 'maxQueue', at, { min: 0, integer: true }),
  };
}

/** A cache's windows: fresh for `ttlS`, then servable stale for `staleForS` (damper). */
export function parseCacheWindows(doc: Record<string, Json>, where: string): { readonly ttlS: number; readonly staleForS: number } {
  return { ttlS: num(doc, 'ttlS', where, { min: 0.001 }), staleForS: num(doc, 'staleForS', where, { min: 0 }) };
}

/** When the incident's cause ended, s: recovery counts from here. */
export function triggerEndS(scenario: ScenarioCommon): number {
  return Math.max(...scenario.faults.filter((f) => f.trigger).map((f) => f.endS));
}

/** When the incident's cause began, s. */
export function triggerStartS(scenario: ScenarioCommon): number {
  return Math.min(...scenario.faults.filter((f) => f.trigger).map((f) => f.startS));
}

export function population(doc: Json, where: string): Population {
  const o = object(doc, where);
  const priority = o.priority === undefined ? 'normal' : str(o, 'priority', where);
  if (!PRIORITIES.includes(priority as Priority)) throw new ScenarioError(`${where}.priority`, `must be one of ${PRIORITIES.join(', ')}, got "${priority}"`);
  const retryDelayMs = o.retryDelayMs === undefined ? 0 : num(o, 'retryDelayMs', where, { min: 0, integer: true, max: 600_000 });
  return {
    name: str(o, 'name', where),
    rate: num(o, 'rate', where, { min: 0, max: 1_000_000 }),
    timeoutMs: num(o, 'timeoutMs', where, { min: 1, integer: true, max: 600_000 }),
    retries: o.retries === undefined ? 0 : num(o, 'retries', where, { min: 0, integer: true, max: 10 }),
    retryDelayMs,
    backoff: defaultBackoff(retryDelayMs),
    priority: priority as Priority,
  };
}

/** The backoff a scenario without one means: its `retryDelayMs`, fixed, or none. */
export function defaultBackoff(retryDelayMs: number): Backoff {
  return retryDelayMs > 0 ? { kind: 'fixed', delayMs: retryDelayMs } : { kind: 'none' };
}

export function object(v: Json, where: string): Record<string, Json> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ScenarioError(where, `must be an object, got ${kindOf(v)}`);
  return v as Record<string, Json>;
}

export function array(v: Json, where: string): Json[] {
  if (!Array.isArray(v)) throw new ScenarioError(where, `must be an array, got ${kindOf(v)}`);
  return v;
}

export function str(o: Record<string, Json>, field: string, where: string): string {
  const v = o[field];
  if (typeof v !== 'string' || v.length === 0) throw new ScenarioError(`${where}.${field}`, `must be a non-empty string, got ${kindOf(v)}`);
  return v;
}

export function num(o: Record<string, Json>, field: string, where: string, range: { min?: number; max?: number; integer?: boolean }): number {
  const v = o[field];
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new ScenarioError(`${where}.${field}`, `must be a number, got ${kindOf(v)}`);
  if (range.integer === true && !Number.isInteger(v)) throw new ScenarioError(`${where}.${field}`, `must be an integer, got ${v}`);
  if (range.min !== undefined && v < range.min) throw new ScenarioError(`${where}.${field}`, `must be ≥ ${range.min}, got ${v}`);
  if (range.max !== undefined && v > range.max) throw new ScenarioError(`${where}.${field}`, `must be ≤ ${range.max}, got ${v}`);
  return v;
}

function kindOf(v: Json): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return JSON.stringify(v);
  return typeof v === 'object' ? 'an object' : String(v);
}
