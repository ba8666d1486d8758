import { DamperError } from '../errors.js';

/**
 * A scenario is data: a JSON file that describes a system (its clients, its
 * cache, its origin) and a timeline of faults. It says nothing about how a
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

/** An open-loop client population: arrivals do not slow down when the system does. */
export interface Population {
  readonly name: string;
  /** Mean requests per second (Poisson arrivals). */
  readonly rate: number;
  /** The client gives up after this long, ms. */
  readonly timeoutMs: number;
  /** Further attempts after a failure or timeout. */
  readonly retries: number;
  /** Wait before each retry, ms. */
  readonly retryDelayMs: number;
  readonly priority: Priority;
}

/** A fault on the timeline. Each has an end. */
export type Fault =
  /** The origin's copy of `key` becomes invalid at `startS` and is fixed at `endS`; the write also reaches the cache tier. */
  | { readonly kind: 'invalid-value'; readonly key: string; readonly startS: number; readonly endS: number; readonly label: string }
  /**
   * Operators turn traffic away at the front door from `startS` to `endS`. With
   * `when: "unhealthy"` they do so only if, at `startS`, goodput over the last
   * `holdS` seconds is below the objective: an operator reacts to what the
   * dashboards show, not to which code is running. From `endS` traffic is let
   * back in linearly over `rampS` seconds (the rest is still turned away).
   */
  | { readonly kind: 'cut-traffic'; readonly startS: number; readonly endS: number; readonly label: string; readonly when: 'always' | 'unhealthy'; readonly rampS: number };

export const TRIGGER_KINDS: ReadonlySet<Fault['kind']> = new Set(['invalid-value']);

export interface Scenario {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  /** Where the numbers come from. */
  readonly source: string;
  /** How the real numbers were scaled to what one core simulates in seconds. */
  readonly scaling: string;
  /** The simulated system. One kind for now: clients → cache tier → database. */
  readonly world: 'cache-aside';
  readonly durationS: number;
  /** Window before the trigger whose mean origin rate is the baseline, s. */
  readonly baseline: { readonly fromS: number; readonly toS: number };
  /** What "healthy" means: goodput ≥ goodputRatio × offered and p99 ≤ p99Ms, every second for holdS. */
  readonly objective: { readonly p99Ms: number; readonly goodputRatio: number; readonly holdS: number };
  /** The database: `workers` queries at a time, each taking workers/capacityQps s; beyond `maxQueue` waiting, refused at once. */
  readonly origin: { readonly capacityQps: number; readonly workers: number; readonly maxQueue: number };
  /** Freshness of cached values, s, and how long past it a value may be served stale (damper). */
  readonly cache: { readonly ttlS: number; readonly staleForS: number };
  /** Key popularity: named hot keys with their share of requests, the rest spread over `tailCount` keys. */
  readonly keys: { readonly hot: readonly { readonly key: string; readonly share: number }[]; readonly tailCount: number };
  readonly clients: readonly Population[];
  readonly faults: readonly Fault[];
}

type Json = unknown;

/** Parses and checks a scenario document; every problem is a ScenarioError naming its field. */
export function parseScenario(text: string, where = 'scenario'): Scenario {
  let doc: Json;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    throw new ScenarioError(where, `not valid JSON (${(error as Error).message})`);
  }
  return checkScenario(doc, where);
}

export function checkScenario(doc: Json, where = 'scenario'): Scenario {
  const o = object(doc, where);
  const durationS = num(o, 'durationS', where, { min: 1, max: 86_400 });
  const at = (field: string): string => `${where}.${field}`;
  const baselineDoc = object(o.baseline, at('baseline'));
  const baseline = { fromS: num(baselineDoc, 'fromS', at('baseline'), { min: 0 }), toS: num(baselineDoc, 'toS', at('baseline'), { min: 0 }) };
  if (baseline.toS <= baseline.fromS) throw new ScenarioError(at('baseline'), 'toS must be after fromS');
  const objectiveDoc = object(o.objective, at('objective'));
  const originDoc = object(o.origin, at('origin'));
  const cacheDoc = object(o.cache, at('cache'));
  const keysDoc = object(o.keys, at('keys'));
  const hot = array(keysDoc.hot, at('keys.hot')).map((h, i) => {
    const ho = object(h, at(`keys.hot[${i}]`));
    return { key: str(ho, 'key', at(`keys.hot[${i}]`)), share: num(ho, 'share', at(`keys.hot[${i}]`), { min: 0, max: 1 }) };
  });
  const hotShare = hot.reduce((s, h) => s + h.share, 0);
  if (hotShare > 1 + 1e-9) throw new ScenarioError(at('keys.hot'), `shares add up to ${hotShare}, more than 1`);
  const tailCount = num(keysDoc, 'tailCount', at('keys'), { min: 0, integer: true, max: 10_000_000 });
  if (tailCount === 0 && hotShare < 1 - 1e-9) throw new ScenarioError(at('keys'), 'hot shares must add up to 1 when tailCount is 0');
  const clients = array(o.clients, at('clients')).map((c, i) => population(c, at(`clients[${i}]`)));
  if (clients.length === 0) throw new ScenarioError(at('clients'), 'needs at least one population');
  const faults = array(o.faults, at('faults')).map((f, i) => fault(f, at(`faults[${i}]`), durationS, new Set(hot.map((h) => h.key))));
  if (!faults.some((f) => TRIGGER_KINDS.has(f.kind))) throw new ScenarioError(at('faults'), `needs a trigger (one of: ${[...TRIGGER_KINDS].join(', ')})`);
  const world = str(o, 'world', where);
  if (world !== 'cache-aside') throw new ScenarioError(at('world'), `unknown world "${world}" (known: cache-aside)`);
  const origin = {
    capacityQps: num(originDoc, 'capacityQps', at('origin'), { min: 1 }),
    workers: num(originDoc, 'workers', at('origin'), { min: 1, integer: true, max: 10_000 }),
    maxQueue: num(originDoc, 'maxQueue', at('origin'), { min: 0, integer: true }),
  };
  return {
    name: str(o, 'name', where),
    title: str(o, 'title', where),
    description: str(o, 'description', where),
    source: str(o, 'source', where),
    scaling: str(o, 'scaling', where),
    world,
    durationS,
    baseline,
    objective: {
      p99Ms: num(objectiveDoc, 'p99Ms', at('objective'), { min: 1 }),
      goodputRatio: num(objectiveDoc, 'goodputRatio', at('objective'), { min: 0, max: 1 }),
      holdS: num(objectiveDoc, 'holdS', at('objective'), { min: 1, integer: true }),
    },
    origin,
    cache: { ttlS: num(cacheDoc, 'ttlS', at('cache'), { min: 0.001 }), staleForS: num(cacheDoc, 'staleForS', at('cache'), { min: 0 }) },
    keys: { hot, tailCount },
    clients,
    faults,
  };
}

function population(doc: Json, where: string): Population {
  const o = object(doc, where);
  const priority = o.priority === undefined ? 'normal' : str(o, 'priority', where);
  if (!PRIORITIES.includes(priority as Priority)) throw new ScenarioError(`${where}.priority`, `must be one of ${PRIORITIES.join(', ')}, got "${priority}"`);
  return {
    name: str(o, 'name', where),
    rate: num(o, 'rate', where, { min: 0, max: 1_000_000 }),
    timeoutMs: num(o, 'timeoutMs', where, { min: 1, integer: true, max: 600_000 }),
    retries: o.retries === undefined ? 0 : num(o, 'retries', where, { min: 0, integer: true, max: 10 }),
    retryDelayMs: o.retryDelayMs === undefined ? 0 : num(o, 'retryDelayMs', where, { min: 0, integer: true, max: 600_000 }),
    priority: priority as Priority,
  };
}

function fault(doc: Json, where: string, durationS: number, hotKeys: ReadonlySet<string>): Fault {
  const o = object(doc, where);
  const kind = str(o, 'kind', where);
  const startS = num(o, 'startS', where, { min: 0, max: durationS });
  const endS = num(o, 'endS', where, { min: 0, max: durationS });
  if (endS <= startS) throw new ScenarioError(where, `endS (${endS}) must be after startS (${startS})`);
  const label = str(o, 'label', where);
  switch (kind) {
    case 'invalid-value': {
      const key = str(o, 'key', where);
      if (!hotKeys.has(key)) throw new ScenarioError(`${where}.key`, `"${key}" is not one of keys.hot`);
      return { kind, key, startS, endS, label };
    }
    case 'cut-traffic': {
      const when = o.when === undefined ? 'always' : str(o, 'when', where);
      if (when !== 'always' && when !== 'unhealthy') throw new ScenarioError(`${where}.when`, `must be "always" or "unhealthy", got "${when}"`);
      const rampS = o.rampS === undefined ? 0 : num(o, 'rampS', where, { min: 0, max: durationS });
      return { kind, startS, endS, label, when, rampS };
    }
    default:
      throw new ScenarioError(`${where}.kind`, `unknown fault kind "${kind}" (known: invalid-value, cut-traffic)`);
  }
}

function object(v: Json, where: string): Record<string, Json> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ScenarioError(where, `must be an object, got ${kindOf(v)}`);
  return v as Record<string, Json>;
}

function array(v: Json, where: string): Json[] {
  if (!Array.isArray(v)) throw new ScenarioError(where, `must be an array, got ${kindOf(v)}`);
  return v;
}

function str(o: Record<string, Json>, field: string, where: string): string {
  const v = o[field];
  if (typeof v !== 'string' || v.length === 0) throw new ScenarioError(`${where}.${field}`, `must be a non-empty string, got ${kindOf(v)}`);
  return v;
}

function num(o: Record<string, Json>, field: string, where: string, range: { min?: number; max?: number; integer?: boolean }): number {
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
