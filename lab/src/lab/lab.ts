import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type JudgedRun, type LabRun, type ScenarioRun, type StackOutcome, VARIANTS, type VariantName, type VariantSummary } from './judge/results.js';
import { ScenarioError, triggerEndS, triggerStartS } from './scenario.js';
import { originCapacity } from './judge/best-possible.js';
import { judge, verdict } from './judge/verdict.js';
import { realTimeError, withDamperConfig } from './damper-config.js';
import { type ScenarioSource, scenarioSource } from './scenario-source.js';
import { checkCalls, DEFAULT_MAX_CALLS } from './run-cost.js';
import { fileProblem } from './file-problem.js';
import { RealTimeInSimulationError } from 'damper';
import { type Scenario, worldOf } from './world/worlds.js';
import { type RunOptions } from './engine/clients.js';
import { runStack } from './world/service.js';
import { specName, type StackSpec } from './stacks/stack.js';
import { addedPeers, StackError, stackProblem } from './stacks/peers.js';

/** The package's root: the nearest folder above this module with a package.json (src/, dist/ and a test build all sit below it). */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('damper: cannot find the package root from the lab module');
    dir = up;
  }
  return dir;
}

/** The scenarios shipped with damper, one JSON file each. */
export const SCENARIO_DIR = join(packageRoot(), 'scenarios') + '/';

/** Names of the shipped scenarios, sorted. */
export async function shippedScenarios(): Promise<string[]> {
  const files = await readdir(SCENARIO_DIR);
  return files
    .filter((f) => f.endsWith('.json'))
    .map((f) => f.slice(0, -'.json'.length))
    .sort();
}

/**
 * Loads a scenario by shipped name (`facebook-2010`) or by path to a file
 * (anything containing a `/` or ending in `.json`).
 */
export async function loadScenario(ref: string): Promise<Scenario> {
  return (await loadScenarioSource(ref)).scenario;
}

/** Like {@link loadScenario}, with the document as written kept beside the scenario (what a sweep's field axes set). */
export async function loadScenarioSource(ref: string): Promise<ScenarioSource> {
  const isPath = ref.includes('/') || ref.endsWith('.json');
  const path = isPath ? ref : `${SCENARIO_DIR}${ref}.json`;
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if (isPath) throw new ScenarioError(ref, `cannot read this file: ${fileProblem(error)}`);
    throw new ScenarioError(ref, `unknown scenario (shipped: ${(await shippedScenarios()).join(', ')}; or give a path to a scenario file)`);
  }
  return scenarioSource(text, isPath ? ref : `${ref}.json`, path);
}

/** Progress of a lab run: which scenario and variant (or peer stack), and how far (0 to 1) through all of them. */
export type LabProgress = (p: { scenario: string; variant: string; fraction: number }) => void;

/** Runs one scenario under both variants, on the same seed and traffic. */
export async function runScenario(scenario: Scenario, seed: number, onProgress?: (variant: VariantName, fraction: number) => void): Promise<ScenarioRun> {
  const variants = {} as Record<VariantName, JudgedRun>;
  for (const variant of VARIANTS) variants[variant] = await runVariant(scenario, variant, seed, { onProgress: onProgress === undefined ? undefined : (f) => onProgress(variant, f) });
  return scenarioRun(scenario, variants);
}

/** A scenario's judged runs, one per variant, with what the report and results.json say of the scenario itself: simulated, or run on real processes (`damper lab real`). */
export function scenarioRun(scenario: Scenario, variants: Readonly<Record<VariantName, JudgedRun>>): ScenarioRun {
  const world = worldOf(scenario);
  return {
    name: scenario.name,
    title: scenario.title,
    description: scenario.description,
    durationS: scenario.durationS,
    originCapacityQps: world.originCapacityQps(scenario),
    originCapacity: originCapacity(scenario, Math.ceil(scenario.durationS)),
    cached: world.cached(scenario),
    objectiveP99Ms: scenario.objective.p99Ms,
    faults: scenario.faults.map((f) => ({ label: f.label, startS: f.startS, endS: f.endS, kind: f.trigger ? 'trigger' : 'operator' })),
    triggerEndS: triggerEndS(scenario),
    triggerStartS: triggerStartS(scenario),
    variants,
    verdict: verdict(scenario, variants),
  };
}

/** Runs one variant of a scenario and judges it. */
async function runVariant(scenario: Scenario, variant: VariantName, seed: number, options: RunOptions): Promise<JudgedRun> {
  let run;
  try {
    run = await worldOf(scenario).run(scenario, variant, seed, options);
  } catch (error) {
    // The lab's own code never reads real time (its tests run every world under the ban); a user's module may.
    const config = scenario.damper?.config;
    if (config !== undefined && error instanceof RealTimeInSimulationError) throw realTimeError(config, error);
    throw error;
  }
  return judge(scenario, run);
}

/**
 * The summaries of some variants of a scenario, in `variants`' order: what a
 * sweep cell keeps.
 */
export async function runSummaries(scenario: Scenario, seed: number, variants: readonly VariantName[]): Promise<Partial<Record<VariantName, VariantSummary>>> {
  const summaries: Partial<Record<VariantName, VariantSummary>> = {};
  // A cell keeps its verdict and figures, not its series: it ends once the verdict is decided (VerdictWatch).
  for (const variant of variants) summaries[variant] = (await runVariant(scenario, variant, seed, { end: 'verdict' })).summary;
  return summaries;
}

/**
 * Runs a scenario under a stack (issue 31: a peer's in place of naive's
 * client tiers or cache, or one of the lab's two) and judges it as a
 * variant is judged: what `damper lab --stack` and a sweep cell show
 * beside naive and damper.
 */
export async function runStackJudged(scenario: Scenario, spec: StackSpec, seed: number, options: RunOptions = {}): Promise<JudgedRun> {
  return judge(scenario, await runStack(scenario, spec, seed, options));
}

/** A stack's summary in a sweep cell: its run ends once its verdict is decided, as a variant's does ({@link runSummaries}). */
export async function runStackSummary(scenario: Scenario, spec: StackSpec, seed: number): Promise<VariantSummary> {
  return (await runStackJudged(scenario, spec, seed, { end: 'verdict' })).summary;
}

/** Runs scenarios (all shipped ones when `refs` is empty) and collects the results; with `stacks`, each peer stack beside naive and damper where it applies. */
export async function runLab(refs: readonly string[], options: { seed: number; onProgress?: LabProgress; damperConfig?: string; maxCalls?: number; stacks?: readonly StackSpec[] }): Promise<LabRun> {
  const names = refs.length > 0 ? refs : await shippedScenarios();
  // Load every scenario first: a typo in the last one should fail before minutes of simulation.
  const loaded = await Promise.all(names.map(loadScenario));
  // --damper-config: one configuration for every scenario of the run, over their own.
  const config = options.damperConfig;
  const scenarios = config === undefined ? loaded : loaded.map((s) => withDamperConfig(s, config));
  const stacks = addedPeers(options.stacks ?? []);
  // A peer that applies to none of the scenarios is a mistake said at once; one that applies to some runs there, and the others say why not.
  for (const spec of stacks) {
    if (scenarios.every((s) => stackProblem(s, spec.stack) !== undefined)) {
      throw new StackError(`the ${specName(spec)} stack applies to none of these scenarios: ${scenarios.map((s) => `${s.name} (${stackProblem(s, spec.stack)!.problem})`).join('; ')}`);
    }
  }
  const runs = (s: Scenario): number => VARIANTS.length + stacks.filter((spec) => stackProblem(s, spec.stack) === undefined).length;
  // Known before any simulation: a rate or load far past what the machine can simulate is refused at once.
  checkCalls('this run', scenarios.map((scenario) => ({ name: scenario.name, scenario })), ['scenario', 'scenarios'], Math.max(...scenarios.map(runs)), options.maxCalls ?? DEFAULT_MAX_CALLS);
  const results: ScenarioRun[] = [];
  const parts = scenarios.reduce((sum, s) => sum + runs(s), 0);
  let done = 0;
  for (const scenario of scenarios) {
    const progress = (variant: string, fraction: number): void => options.onProgress?.({ scenario: scenario.name, variant, fraction: (done + fraction) / parts });
    const run = await runScenario(scenario, options.seed, (variant, fraction) => progress(variant, VARIANTS.indexOf(variant) + fraction));
    done += VARIANTS.length;
    const outcomes: StackOutcome[] = [];
    for (const spec of stacks) {
      const name = specName(spec);
      const problem = stackProblem(scenario, spec.stack);
      if (problem !== undefined) {
        outcomes.push({ name, problem: problem.problem });
        continue;
      }
      outcomes.push({ name, run: await runStackJudged(scenario, spec, options.seed, { onProgress: (f) => progress(name, f) }) });
      done++;
    }
    results.push(stacks.length === 0 ? run : { ...run, stacks: outcomes });
  }
  return { seed: options.seed, scenarios: results };
}
