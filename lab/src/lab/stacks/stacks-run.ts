import { systemClock } from 'damper';
import { availableParallelism } from 'node:os';
import { type JudgedRun } from '../judge/results.js';
import { judge } from '../judge/verdict.js';
import { type Fitting, type RealRun } from '../real/real-run.js';
import { runRealStack } from '../real/real-runner.js';
import { type ServiceScenario } from '../schema/service.js';
import { runStack } from '../world/service.js';
import { checkStackApplies, loadCachePeer, loadPolicyPeer } from './peers.js';
import { KeySets } from '../world/key-sets.js';
import { cachePlan } from '../world/peer-cache-tier.js';
import { type PeerSetting, specName, type StackSpec } from './stack.js';
import { peerPlan } from './tier-plan.js';
import { undiciSettings } from './undici-stack.js';

/**
 * One scenario under several stacks, side by side (issue 31): naive, the
 * peers, damper, each simulated at the same seed, and with `real`, each run
 * on real processes `runs` times, the stacks taking turns (naive, undici, …,
 * damper, naive…) so a host that speeds up or slows down touches every
 * stack alike.
 */

/** What {@link runStacks} is asked. */
export interface StacksOptions {
  readonly seed: number;
  readonly specs: readonly StackSpec[];
  /** Real runs per stack and how the scenario was fitted; absent: the simulation only. */
  readonly real?: { readonly runs: number; readonly fitting: Fitting };
  /** Told of progress: which stack, which real run (0 for its simulation), its second of its horizon (real runs only). */
  readonly onProgress?: (p: { readonly stack: string; readonly run: number; readonly second?: number; readonly of?: number }) => void;
}

/** One stack's row: its name, its settings (per client tier; a cache peer's under tier -1), its simulation and its real runs. */
export interface StackRow {
  readonly name: string;
  readonly spec: StackSpec;
  readonly settings: readonly { readonly tier: number; readonly settings: readonly PeerSetting[] }[];
  readonly simulated: JudgedRun;
  readonly real: readonly RealRun[];
}

/** A scenario run under stacks: the rows in the order asked. */
export interface StacksRun {
  readonly scenario: ServiceScenario;
  readonly seed: number;
  readonly fitting: Fitting | undefined;
  readonly cores: number;
  readonly rows: readonly StackRow[];
}

export async function runStacks(scenario: ServiceScenario, options: StacksOptions): Promise<StacksRun> {
  // Every stack checked before the first runs: a peer that does not apply is refused in a line, not after minutes.
  for (const spec of options.specs) checkStackApplies(scenario, spec.stack);
  const timeScale = options.real?.fitting.timeScale ?? 1;
  const simulated: JudgedRun[] = [];
  for (const spec of options.specs) {
    options.onProgress?.({ stack: specName(spec), run: 0 });
    simulated.push(judge(scenario, await runStack(scenario, spec, options.seed, { timeScale })));
  }
  const real: RealRun[][] = options.specs.map(() => []);
  for (let run = 1; run <= (options.real?.runs ?? 0); run++) {
    for (const [i, spec] of options.specs.entries()) {
      const stack = specName(spec);
      real[i]!.push(await runRealStack(scenario, spec, { seed: options.seed, timeScale, onProgress: (second, of) => options.onProgress?.({ stack, run, second, of }) }));
    }
  }
  const rows: StackRow[] = [];
  for (const [i, spec] of options.specs.entries()) {
    rows.push({ name: specName(spec), spec, settings: await settingsOf(scenario, spec, timeScale), simulated: simulated[i]!, real: real[i]! });
  }
  return { scenario, seed: options.seed, fitting: options.real?.fitting, cores: availableParallelism(), rows };
}

/** A stack's settings per client tier, each with its source: a peer's (the scenario's tiers), none for naive and damper (docs/lab.md has theirs). */
async function settingsOf(scenario: ServiceScenario, spec: StackSpec, timeScale: number): Promise<StackRow['settings']> {
  const tiers = Array.from({ length: scenario.tiers?.count ?? 0 }, (_, t) => t);
  switch (spec.stack) {
    case 'naive':
    case 'damper':
      return [];
    case 'undici':
      return tiers.map((tier) => ({ tier, settings: undiciSettings() }));
    case 'cockatiel':
    case 'opossum': {
      const peer = await loadPolicyPeer(spec.stack);
      return tiers.map((tier) => ({ tier, settings: peer.settings(peerPlan(scenario, tier, spec.knobs, timeScale, systemClock)) }));
    }
    default: {
      const peer = await loadCachePeer(spec.stack);
      const keys = new KeySets(scenario.clients, scenario.keys).keys.length;
      return [{ tier: -1, settings: peer.settings(cachePlan(scenario.cache!, keys, spec.knobs, timeScale)) }];
    }
  }
}

/**
 * `stacks.json`: each stack's settings and summaries (the simulation's,
 * each real run's), and per second what is needed to tell why two of them
 * differ: the calls sent, served and failed, their p99, and the queries
 * that reached the origin.
 */
export function stacksJson(run: StacksRun): string {
  return `${JSON.stringify(
    {
      scenario: run.scenario.name,
      seed: run.seed,
      ...(run.fitting === undefined ? {} : { fitting: run.fitting, cores: run.cores }),
      stacks: run.rows.map((row) => ({ name: row.name, stack: row.spec.stack, knobs: row.spec.knobs, settings: row.settings, simulated: row.simulated.summary, real: row.real.map((r) => r.summary), perSecond: { simulated: perSecond(row.simulated), real: row.real.map(perSecond) } })),
    },
    null,
    2,
  )}\n`;
}

/** A run's calls sent, served and failed, their p99, and the origin's queries, per second. */
function perSecond(run: JudgedRun): Pick<JudgedRun['series'], 'offered' | 'goodput' | 'errors' | 'p99Ms' | 'originQps'> {
  const { offered, goodput, errors, p99Ms, originQps } = run.series;
  return { offered, goodput, errors, p99Ms, originQps };
}
