/**
 * The lab's modules, loaded from a built `dist` folder given at run time
 * (`lab/dist` by default), so that one script measures this tree and an
 * older commit's build alike (`npm run bench:lab -- /work/wt-before/lab/dist`).
 * Only the types come from this tree's sources: an older build must have the
 * entry points used here (they have been there since the sweep began).
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

import type * as LabModule from '../../lab/src/lab/lab.js';
import type * as ParallelModule from '../../lab/src/lab/engine/parallel.js';
import type * as SweepModule from '../../lab/src/lab/sweep/sweep.js';
import type * as SweepAxisModule from '../../lab/src/lab/sweep/sweep-axis.js';
import type * as CheckPlanModule from '../../lab/src/lab/sweep/check-plan.js';
import type * as SourceModule from '../../lab/src/lab/scenario-source.js';
import type * as ResultsModule from '../../lab/src/lab/judge/results.js';
import type * as DamperConfigModule from '../../lab/src/lab/damper-config.js';

type Lab = typeof LabModule;
type Parallel = typeof ParallelModule;
type Sweep = typeof SweepModule;
type SweepAxis = typeof SweepAxisModule;
type CheckPlan = typeof CheckPlanModule;
type Source = typeof SourceModule;
type Results = typeof ResultsModule;
type DamperConfig = typeof DamperConfigModule;

export interface LabDist {
  /** The folder, absolute. */
  readonly dir: string;
  readonly lab: Lab;
  readonly parallel: Parallel;
  readonly sweep: Sweep;
  readonly axis: SweepAxis;
  readonly checkPlan: CheckPlan;
  readonly source: Source;
  readonly results: Results;
  readonly damperConfig: DamperConfig;
}

/** Loads the lab from `dir` (a `lab/dist` folder: `npm run build:lab` makes it). */
export async function labDist(dir = 'lab/dist'): Promise<LabDist> {
  const abs = resolve(dir);
  if (!existsSync(join(abs, 'lab', 'lab.js'))) throw new Error(`${abs}: no lab/lab.js here; build it with \`npm run build:lab\``);
  const load = <T>(path: string): Promise<T> => import(pathToFileURL(join(abs, path)).href) as Promise<T>;
  return {
    dir: abs,
    lab: await load<Lab>('lab/lab.js'),
    parallel: await load<Parallel>('lab/engine/parallel.js'),
    sweep: await load<Sweep>('lab/sweep/sweep.js'),
    axis: await load<SweepAxis>('lab/sweep/sweep-axis.js'),
    checkPlan: await load<CheckPlan>('lab/sweep/check-plan.js'),
    source: await load<Source>('lab/scenario-source.js'),
    results: await load<Results>('lab/judge/results.js'),
    damperConfig: await load<DamperConfig>('lab/damper-config.js'),
  };
}
