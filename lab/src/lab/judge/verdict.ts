import { alertStates } from './alerts.js';
import { characteristicAlerts } from 'damper/otel';
import { bestGoodput } from './best-possible.js';
import { percent } from '../format.js';
import { healthySecond, round } from './metrics.js';
import { type JudgedRun, type TriggerWindow, type VariantName, type VariantRun, type VariantSummary } from './results.js';
import { triggerEndS, triggerStartS } from '../scenario.js';
import type { Scenario } from '../world/worlds.js';

/**
 * Judging a run: against the best any policy could have done with the
 * capacity left (during the trigger), by its recovery (after it), and by
 * whether the operators had to act. A world only measures; this is the one
 * place that says what the measurements mean, so no world can judge itself
 * more kindly than another.
 */

/** The world's measurements of one variant, with the best possible and the judgement added. */
export function judge(scenario: Scenario, run: VariantRun): JudgedRun {
  const best = bestGoodput(scenario, run.series.offered);
  const series = { ...run.series, bestGoodput: best };
  const m = run.summary;
  const summary: VariantSummary = {
    recovered: m.recovered,
    recoverySeconds: m.recoverySeconds,
    operatorForced: operatorForced(scenario, run),
    baselineOriginQps: m.baselineOriginQps,
    peakOriginQps: m.peakOriginQps,
    amplification: m.amplification,
    errorRate: m.errorRate,
    goodputRatio: m.goodputRatio,
    p99Ms: m.p99Ms,
    trigger: triggerWindow(scenario, series.offered, series.goodput, best),
    alerts: alertStates(characteristicAlerts, run.characteristics),
    invalidServed: m.invalidServed,
    simulatedRequests: m.simulatedRequests,
    simulatedS: m.simulatedS,
  };
  return { ...run, summary, series };
}

/** The whole seconds of the trigger window: from the first trigger's start to the last one's end. */
function windowOf(scenario: Scenario): { from: number; to: number } {
  const from = Math.floor(triggerStartS(scenario));
  return { from, to: Math.max(from + 1, Math.ceil(triggerEndS(scenario))) };
}

function triggerWindow(scenario: Scenario, offered: readonly number[], goodput: readonly number[], best: readonly number[]): TriggerWindow {
  const { from, to } = windowOf(scenario);
  let o = 0;
  let g = 0;
  let b = 0;
  for (let s = from; s < to && s < offered.length; s++) {
    o += offered[s]!;
    g += goodput[s]!;
    b += best[s]!;
  }
  return {
    goodputRatio: o === 0 ? 1 : round(g / o),
    bestGoodputRatio: o === 0 ? 1 : round(b / o),
    // A request counts in the second it was sent: one sent in the window's
    // last seconds may be answered after it, with the capacity back, and
    // lift goodput a hair above the bound; the quotient is capped at 1.
    efficiency: b === 0 ? 1 : round(Math.min(1, g / b)),
  };
}

/**
 * An operator action that happened to this variant, began after the trigger
 * ended and no later than the recovery: the recovery came only after it.
 * (An action during the trigger, such as Discord's ejection, is part of the
 * incident; recovery counts from the trigger's end anyway.)
 */
function operatorForced(scenario: Scenario, run: VariantRun): boolean {
  const { recoverySeconds } = run.summary;
  if (recoverySeconds === null) return false;
  const end = triggerEndS(scenario);
  const recoveredAt = Math.floor(end) + recoverySeconds;
  return scenario.faults.some((f, i) => !f.trigger && !run.skippedFaults.includes(i) && f.startS >= end && f.startS <= recoveredAt);
}

/** Every second of the trigger window healthy by the scenario's objective. */
export function triggerHealthy(scenario: Scenario, run: JudgedRun): boolean {
  const { from, to } = windowOf(scenario);
  for (let s = from; s < to && s < run.series.offered.length; s++) if (!healthySecond(scenario.objective, run.series, s)) return false;
  return true;
}

/**
 * What became of a variant once its trigger ended, read from its summary:
 * never healthy again; healthy again only after the operators acted; by
 * itself some seconds later; at once, though the trigger window was not
 * healthy; or healthy throughout. The one reading of a summary's recovery:
 * the verdict's words and `damper lab real`'s comparison (fidelity.ts) both
 * take it from here.
 */
export type Aftermath = 'stuck' | 'operator-forced' | 'recovered' | 'healthy at once' | 'stayed healthy';

/** The {@link Aftermath} of one judged run. */
export function aftermath(scenario: Scenario, run: JudgedRun): Aftermath {
  const s = run.summary;
  if (s.recoverySeconds === null) return 'stuck';
  if (s.operatorForced) return 'operator-forced';
  if (s.recoverySeconds > 0) return 'recovered';
  return triggerHealthy(scenario, run) ? 'stayed healthy' : 'healthy at once';
}

/**
 * What happened to one variant, in the three parts an SRE asks about: during
 * the trigger (against the best possible), after it (recovery), and whether
 * the operators had to act. "Stayed healthy" only when the trigger window was
 * healthy too.
 */
export function describeVariant(scenario: Scenario, name: VariantName, run: JudgedRun): string {
  const s = run.summary;
  const t = s.trigger;
  const during = `during the trigger ${percent(t.efficiency)} of the best possible (${percent(t.goodputRatio)} of offered served, ${percent(t.bestGoodputRatio)} possible)`;
  const after: Record<Aftermath, () => string> = {
    stuck: () => 'never recovered',
    'operator-forced': () => `recovered only after the operators acted, ${s.recoverySeconds} s after the trigger ended`,
    recovered: () => `recovered by itself ${s.recoverySeconds} s after the trigger ended`,
    'stayed healthy': () => 'stayed healthy throughout',
    'healthy at once': () => 'healthy again as soon as the trigger ended',
  };
  return `${name}: ${during}; ${after[aftermath(scenario, run)]()}`;
}

/** One line per scenario: both variants, naive first. */
export function verdict(scenario: Scenario, variants: Readonly<Record<VariantName, JudgedRun>>): string {
  return `${describeVariant(scenario, 'naive', variants.naive)}. ${describeVariant(scenario, 'damper', variants.damper)}.`;
}
