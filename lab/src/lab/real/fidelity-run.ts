import { availableParallelism } from 'node:os';
import { runScenario } from '../lab.js';
import { type VariantName, VARIANTS } from '../judge/results.js';
import { type Scenario } from '../world/worlds.js';
import { type Fidelity, type FidelityVariant, type Fitting, type RealRun } from './real-run.js';
import { runReal } from './real-runner.js';
import { hostLimitLines, hostLimits, lagBoundMs, limitedShare, MAX_LIMITED_SHARE } from './host-limits.js';
import { triggerEndS, triggerStartS } from '../scenario.js';

/** Options of {@link runFidelity}. */
export interface FidelityOptions {
  readonly seed: number;
  /** Real runs per variant (default 3: the machine is noisy, the spread is shown). */
  readonly runs?: number;
  /** The variants run for real (default both); the simulation runs both anyway. */
  readonly variants?: readonly VariantName[];
  /** Seconds of unmeasured traffic before each real run's time zero. */
  readonly warmS?: number;
  /** Told of progress: which variant and real run (1…), its second of its horizon. */
  readonly onProgress?: (p: { readonly variant: VariantName; readonly run: number; readonly second: number; readonly of: number }) => void;
}

/** The default number of real runs per variant. */
export const DEFAULT_REAL_RUNS = 3;

/**
 * Runs `scenario` (already fitted to the machine by `fitting`) both ways:
 * in the simulation at `seed`, and on real processes `runs` times per
 * variant. The real runs alternate between the variants (naive, damper,
 * naive…), so a host that speeds up or slows down through the session
 * touches both alike.
 */
export async function runFidelity(scenario: Scenario, fitting: Fitting, options: FidelityOptions): Promise<Fidelity> {
  const runs = options.runs ?? DEFAULT_REAL_RUNS;
  const chosen = options.variants ?? VARIANTS;
  const simulated = await runScenario(scenario, options.seed);
  const real = new Map<VariantName, RealRun[]>(chosen.map((v) => [v, []]));
  for (let run = 1; run <= runs; run++) {
    for (const variant of chosen) {
      const onProgress = options.onProgress;
      real.get(variant)!.push(
        await runReal(scenario, variant, {
          seed: options.seed,
          ...(options.warmS === undefined ? {} : { warmS: options.warmS }),
          ...(onProgress === undefined ? {} : { onProgress: (second, of) => onProgress({ variant, run, second, of }) }),
        }),
      );
    }
  }
  const variants: Partial<Record<VariantName, FidelityVariant>> = {};
  for (const variant of chosen) variants[variant] = { simulated: simulated.variants[variant], real: real.get(variant)! };
  return { scenario, fitting, seed: options.seed, cores: availableParallelism(), variants };
}

/**
 * What the host meter says of each real run, per variant: a line for each
 * way the machine itself may have limited it (host-limits.ts), and one
 * saying so plainly when that was more than {@link MAX_LIMITED_SHARE} of
 * the trigger window, where the verdict is read. The runner warns rather
 * than refuses: the run happened, and its figures are still worth a look
 * beside the warning.
 */
export function hostNotes(f: Fidelity): Partial<Record<VariantName, readonly string[]>> {
  const notes: Partial<Record<VariantName, readonly string[]>> = {};
  for (const [variant, v] of Object.entries(f.variants) as [VariantName, FidelityVariant][]) {
    const lines = realRunNotes(f.scenario, f.cores, v.real);
    if (lines.length > 0) notes[variant] = lines;
  }
  return notes;
}

/** What the host meter says of each of `runs` (real runs of `scenario` on `cores` cores), a line each way it may have limited one: see {@link hostNotes}. */
export function realRunNotes(scenario: Scenario, cores: number, runs: readonly RealRun[]): string[] {
  const from = Math.floor(triggerStartS(scenario));
  const to = Math.max(from + 1, Math.ceil(triggerEndS(scenario)));
  return runs.flatMap((run, i) => {
    const limits = hostLimits(run.host, cores, { lagP99Ms: lagBoundMs(scenario.objective.p99Ms) });
    const share = limitedShare(limits, from, to);
    const verdict = share > MAX_LIMITED_SHARE ? [`real run ${i + 1}: the host may have limited ${Math.round(share * 100)}% of the trigger window: read its figures as the machine's, not the scenario's`] : [];
    return [...verdict, ...hostLimitLines(limits).map((line) => `real run ${i + 1}: ${line}`)];
  });
}
