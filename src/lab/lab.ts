import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type JudgedRun, type LabRun, type ScenarioRun, VARIANTS, type VariantName } from './results.js';
import { ScenarioError, triggerEndS, triggerStartS } from './scenario.js';
import { originCapacity } from './best-possible.js';
import { judge, verdict } from './verdict.js';
import { realTimeError, resolveDamperConfig } from './damper-config.js';
import { RealTimeInSimulationError } from '../index.js';
import { parseScenario, type Scenario, worldOf } from './worlds.js';

/** The package's root: the nearest folder above this module with a package.json (src/, dist/ and a test build all sit below it). */
function packageRoot(): string {
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
  const isPath = ref.includes('/') || ref.endsWith('.json');
  const path = isPath ? ref : `${SCENARIO_DIR}${ref}.json`;
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    if (isPath) throw new ScenarioError(ref, 'cannot read this file');
    throw new ScenarioError(ref, `unknown scenario (shipped: ${(await shippedScenarios()).join(', ')}; or give a path to a scenario file)`);
  }
  return resolveDamperConfig(parseScenario(text, isPath ? ref : `${ref}.json`), path);
}

/** Progress of a lab run: which scenario and variant, and how far (0 to 1) through all of them. */
export type LabProgress = (p: { scenario: string; variant: VariantName; fraction: number }) => void;

/** Runs one scenario under both variants, on the same seed and traffic. */
export async function runScenario(scenario: Scenario, seed: number, onProgress?: (variant: VariantName, fraction: number) => void): Promise<ScenarioRun> {
  const world = worldOf(scenario);
  const variants = {} as Record<VariantName, JudgedRun>;
  for (const variant of VARIANTS) {
    let run;
    try {
      run = await world.run(scenario, variant, seed, onProgress === undefined ? undefined : (f) => onProgress(variant, f));
    } catch (error) {
      // The lab's own code never reads real time (its tests run every world under the ban); a user's module may.
      const config = scenario.damper?.config;
      if (config !== undefined && error instanceof RealTimeInSimulationError) throw realTimeError(config, error);
      throw error;
    }
    variants[variant] = judge(scenario, run);
  }
  return {
    name: scenario.name,
    title: scenario.title,
    description: scenario.description,
    durationS: scenario.durationS,
    originCapacityQps: world.originCapacityQps(scenario),
    originCapacity: originCapacity(scenario, Math.ceil(scenario.durationS)),
    cached: world.cached,
    objectiveP99Ms: scenario.objective.p99Ms,
    faults: scenario.faults.map((f) => ({ label: f.label, startS: f.startS, endS: f.endS, kind: f.trigger ? 'trigger' : 'operator' })),
    triggerEndS: triggerEndS(scenario),
    triggerStartS: triggerStartS(scenario),
    variants,
    verdict: verdict(scenario, variants),
  };
}

/** Runs scenarios (all shipped ones when `refs` is empty) and collects the results. */
export async function runLab(refs: readonly string[], options: { seed: number; onProgress?: LabProgress }): Promise<LabRun> {
  const names = refs.length > 0 ? refs : await shippedScenarios();
  // Load every scenario first: a typo in the last one should fail before minutes of simulation.
  const scenarios = await Promise.all(names.map(loadScenario));
  const runs: ScenarioRun[] = [];
  const parts = scenarios.length * VARIANTS.length;
  for (const [i, scenario] of scenarios.entries()) {
    runs.push(
      await runScenario(scenario, options.seed, (variant, fraction) =>
        options.onProgress?.({ scenario: scenario.name, variant, fraction: (i * VARIANTS.length + VARIANTS.indexOf(variant) + fraction) / parts }),
      ),
    );
  }
  return { seed: options.seed, scenarios: runs };
}
