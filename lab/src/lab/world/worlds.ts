import { type RunOptions } from '../engine/clients.js';
import { type VariantName, type VariantRun } from '../judge/results.js';
import { type Json, parseJson, type TriggerAxis } from '../scenario.js';
import { type ScenarioCommon } from '../schema/common.js';
import { scenarioSchema } from '../schema/index.js';
import { check } from '../schema/problems.js';
import { service, type ServiceScenario } from './service.js';

/**
 * The kinds of simulated system a scenario can describe. Each world parses
 * its own part of a scenario file (what the system is made of, which faults
 * it knows) and runs a variant of it on the engine. The lab, the sweep and
 * the report only see what every world has: the common fields
 * (`ScenarioCommon`) and a `VariantRun`.
 */
export interface WorldKind<S extends ScenarioCommon & { readonly world: string }> {
  /** Checks a whole scenario document of this world; every problem is a ScenarioError naming its field. */
  parse(doc: Record<string, Json>, where: string): S;
  /** Runs one variant of the scenario at `seed`. Same scenario and seed, same result (to the horizon, or to the verdict: see `RunOptions`). */
  run(scenario: S, variant: VariantName, seed: number, options?: RunOptions): Promise<VariantRun>;
  /** The origin's healthy capacity, queries/s. */
  originCapacityQps(scenario: S): number;
  /** Whether the scenario's system has a cache: without one, the report draws no hit ratio and no stale answers. */
  cached(scenario: S): boolean;
  /**
   * The sweep's trigger axis (`damper lab sweep --trigger C..D`): what it
   * measures (`axis`, e.g. "invalid value held, s"), the scenario's own size on
   * it, and the scenario with the trigger resized (the rest of the timeline
   * moved so that what followed the trigger still follows it).
   */
  readonly trigger: TriggerAxis<S>;
  /** The sweep's trigger-size axis (`--trigger-size A..B`): the main trigger's magnitude (a factor, a share), its timeline unchanged. */
  readonly triggerSize: TriggerAxis<S>;
}

/**
 * The scenario with every client population's load × `factor`: the sweep's
 * load axis (`--load A..B`), the same for every world. An open population's
 * rate is scaled; a closed one's users are, rounded to whole users and at
 * least one (its think time stays: a user thinks as long at any load, so
 * more users is what more load means), as a load spike scales them.
 */
export function scaleLoad<S extends ScenarioCommon>(scenario: S, factor: number): S {
  return {
    ...scenario,
    clients: scenario.clients.map((c) => (c.closed === undefined ? { ...c, rate: c.rate * factor } : { ...c, closed: { ...c.closed, users: Math.max(1, Math.round(c.closed.users * factor)) } })),
  };
}

/** Every scenario the lab can run, by world. */
export type Scenario = ServiceScenario;

type AnyWorld = WorldKind<Scenario>;

/** The registry: a scenario's `world` field names one of these. */
export const WORLDS: Readonly<Record<Scenario['world'], AnyWorld>> = {
  service,
};

/** The world a scenario runs in. */
export function worldOf(scenario: Scenario): AnyWorld {
  return WORLDS[scenario.world];
}

/** Parses and checks a scenario document; every problem is a ScenarioError naming its field. */
export function parseScenario(text: string, where = 'scenario'): Scenario {
  return checkScenario(parseJson(text, where), where);
}

/** Checks a scenario document against the schema of its `world` (src/lab/schema/); every problem is a ScenarioError naming its field. */
export function checkScenario(doc: Json, where = 'scenario'): Scenario {
  return check(scenarioSchema, doc, where);
}
