import assert from 'node:assert/strict';
import { type Fidelity, type FidelityVariant, type RealRun } from '../real/real-run.js';
import { type Scenario } from '../world/worlds.js';
import { round } from './metrics.js';
import { type JudgedRun, VARIANTS, type VariantName, type VariantSummary } from './results.js';
import { type Aftermath, aftermath } from './verdict.js';

/**
 * Does the simulation say what the real processes did (issue 30, item 4)?
 * One variant's simulated run is set beside its real runs, figure by figure,
 * each held to a bar: the same verdict; goodput during the trigger within 10
 * points; recovery within max(3 s, 25 %); origin amplification within 25 %.
 * Where they disagree, one of the two is wrong: the model or the real setup.
 *
 * How several real runs are judged (the machine is noisy, so there are three
 * by default): the simulation is the reference, and each real run is held to
 * the bar around the simulated value, not to the others. A figure agrees
 * when every real run lies within its bar; the comparison says how many do,
 * so one noisy run out of three reads "2 of 3", not a bare ✗. Their spread
 * is given as the lowest, the median and the highest real value.
 *
 * A recovery of null (never healthy again) is not a long time: it agrees
 * only with another null, whatever the bar (a real run stuck where the
 * simulation recovered at 500 s disagrees, and so does the reverse). In the
 * spread it ranks after every number, so three runs of 12 s, 40 s and never
 * have a median of 40 s and a highest of "never".
 */

/** Goodput during the trigger (served ÷ offered): each real run within this many percentage points of the simulation, as a share (10 points). */
export const TRIGGER_GOODPUT_BAR = 0.1;

/** Recovery: each real run within the larger of this many seconds and {@link RECOVERY_BAR_SHARE} of the simulated recovery; the seconds keep a recovery of 0–2 s from failing on one second of noise. */
export const RECOVERY_BAR_S = 3;

/** Recovery: each real run within this share of the simulated recovery, or {@link RECOVERY_BAR_S}, whichever is larger (25 %). */
export const RECOVERY_BAR_SHARE = 0.25;

/** Origin amplification (peak ÷ baseline origin queries/s): each real run within this share of the simulation's (25 %). */
export const AMPLIFICATION_BAR_SHARE = 0.25;

/**
 * Below this baseline, origin queries/s, amplification divides by noise (a
 * cache that serves nearly everything: a baseline of 0.2 q/s is a query
 * every 5 s, and the world computes peak ÷ 10⁻⁹ at 0). When the simulation
 * or any real run has a baseline under it, the peak origin queries/s is
 * compared instead, within the same {@link AMPLIFICATION_BAR_SHARE}, and
 * never more finely than this many q/s.
 */
export const BASELINE_FLOOR_QPS = 1;

/** Differences are of figures rounded to 4 decimals: a difference of exactly the bar (0.4 − 0.3) must not fail on float noise. */
const EPSILON = 1e-9;

/**
 * A run's verdict as the fidelity page compares it: an {@link Aftermath}
 * with "healthy again as soon as the trigger ended" counted as recovered (in
 * 0 s), for a real run's noise can make one second of the trigger window
 * unhealthy where the simulation's was not, and the recovery figure already
 * compares when it became healthy.
 */
export type VerdictClass = 'stayed healthy' | 'recovered' | 'operator-forced' | 'stuck';

const CLASS_OF: Record<Aftermath, VerdictClass> = {
  stuck: 'stuck',
  'operator-forced': 'operator-forced',
  recovered: 'recovered',
  'healthy at once': 'recovered',
  'stayed healthy': 'stayed healthy',
};

/** The {@link VerdictClass} of a run, read from its summary as the verdict's words read it (verdict.ts, `aftermath`). */
export function verdictClass(scenario: Scenario, run: JudgedRun): VerdictClass {
  return CLASS_OF[aftermath(scenario, run)];
}

/** The figures compared, in the order the page and the terminal list them. */
export type Figure = 'verdict' | NumberFigure;

/**
 * The figures with a number: the three held to a bar (`peakOriginQps` stands
 * in for `amplification` when a baseline is under {@link BASELINE_FLOOR_QPS}),
 * and two shown for information only.
 */
export type NumberFigure = 'triggerGoodput' | 'recoverySeconds' | 'amplification' | 'peakOriginQps' | 'errorRate' | 'p99Ms';

/** The real values' lowest, (upper) median and highest; null is a recovery that never came, ranked after every number. */
export interface Spread {
  readonly min: number | null;
  readonly median: number | null;
  readonly max: number | null;
}

/** The verdicts: the simulation's, each real run's, and how many real runs had the simulation's. */
export interface VerdictComparison {
  readonly figure: 'verdict';
  readonly role: 'judged';
  readonly simulated: VerdictClass;
  readonly real: readonly VerdictClass[];
  /** Per real run, whether it had the simulation's verdict. */
  readonly within: readonly boolean[];
  /** How many did. */
  readonly agreeing: number;
  /** Every real run had the simulation's verdict. */
  readonly agrees: boolean;
}

/** One figure with a number: the simulation's, each real run's, their spread and, when it is judged, how many real runs lie within its bar. */
export interface NumberComparison {
  readonly figure: NumberFigure;
  /** `judged`: held to its bar (item 4); `shown`: for information, with no bar. */
  readonly role: 'judged' | 'shown';
  readonly simulated: number | null;
  readonly real: readonly (number | null)[];
  readonly spread: Spread;
  /** Per real run, whether it lies within the bar; null when the figure is only shown. */
  readonly within: readonly boolean[] | null;
  /** How many do; null when the figure is only shown. */
  readonly agreeing: number | null;
  /** Every real run within the bar; null when the figure is only shown. */
  readonly agrees: boolean | null;
}

/** One figure of a variant compared: the verdict, or a figure with a number. */
export type FigureComparison = VerdictComparison | NumberComparison;

/** One variant compared: each figure, and whether every judged one agrees. */
export interface FidelityRow {
  /** Real runs compared with the simulation. */
  readonly runs: number;
  readonly figures: readonly FigureComparison[];
  /** Every judged figure agrees. */
  readonly agrees: boolean;
}

/** Goodput during the trigger (served ÷ offered, shares): within {@link TRIGGER_GOODPUT_BAR}. */
export function triggerGoodputAgrees(simulated: number, real: number): boolean {
  return Math.abs(real - simulated) <= TRIGGER_GOODPUT_BAR + EPSILON;
}

/** The recovery bar around a simulated recovery, s: max({@link RECOVERY_BAR_S}, {@link RECOVERY_BAR_SHARE} of it). */
export function recoveryBarS(simulatedS: number): number {
  return Math.max(RECOVERY_BAR_S, RECOVERY_BAR_SHARE * simulatedS);
}

/** Recoveries, s after the trigger's end (null: never): both never, or within {@link recoveryBarS} of the simulated one. */
export function recoveryAgrees(simulated: number | null, real: number | null): boolean {
  if (simulated === null || real === null) return simulated === real;
  return Math.abs(real - simulated) <= recoveryBarS(simulated) + EPSILON;
}

/** Origin amplifications: within {@link AMPLIFICATION_BAR_SHARE} of the simulated one. */
export function amplificationAgrees(simulated: number, real: number): boolean {
  return Math.abs(real - simulated) <= AMPLIFICATION_BAR_SHARE * simulated + EPSILON;
}

/** Peak origin queries/s, where a baseline is too small to divide by: within {@link AMPLIFICATION_BAR_SHARE}, and never more finely than {@link BASELINE_FLOOR_QPS}. */
export function peakOriginAgrees(simulated: number, real: number): boolean {
  return Math.abs(real - simulated) <= Math.max(AMPLIFICATION_BAR_SHARE * simulated, BASELINE_FLOOR_QPS) + EPSILON;
}

/** The spread of real values: lowest, upper median (a value a run produced, never the mean of two: that of "never" and 12 s means nothing) and highest. */
export function spreadOf(values: readonly (number | null)[]): Spread {
  assert.ok(values.length > 0, 'a spread needs at least one value');
  const rank = (v: number | null): number => v ?? Infinity;
  const sorted = [...values].sort((a, b) => rank(a) - rank(b));
  return { min: sorted[0]!, median: sorted[Math.floor(sorted.length / 2)]!, max: sorted.at(-1)! };
}

interface FigureRule {
  readonly figure: NumberFigure;
  readonly read: (s: VariantSummary) => number | null;
  /** Whether a real value lies within the bar of the simulated one; absent: shown only. */
  readonly agrees?: (simulated: number | null, real: number | null) => boolean;
}

/** A rule for figures that are never null: a null here is a broken summary, not a disagreement. */
function numeric(check: (simulated: number, real: number) => boolean): (simulated: number | null, real: number | null) => boolean {
  return (simulated, real) => {
    assert.ok(simulated !== null && real !== null, 'only a recovery may be null');
    return check(simulated, real);
  };
}

const TRIGGER_GOODPUT: FigureRule = { figure: 'triggerGoodput', read: (s) => s.trigger.goodputRatio, agrees: numeric(triggerGoodputAgrees) };
const RECOVERY: FigureRule = { figure: 'recoverySeconds', read: (s) => s.recoverySeconds, agrees: recoveryAgrees };
const AMPLIFICATION: FigureRule = { figure: 'amplification', read: (s) => s.amplification, agrees: numeric(amplificationAgrees) };
const PEAK_ORIGIN: FigureRule = { figure: 'peakOriginQps', read: (s) => s.peakOriginQps, agrees: numeric(peakOriginAgrees) };
const SHOWN: readonly FigureRule[] = [
  { figure: 'errorRate', read: (s) => s.errorRate },
  { figure: 'p99Ms', read: (s) => s.p99Ms },
];

/** Amplification, or the peak origin rate where a baseline is under {@link BASELINE_FLOOR_QPS}. */
function originRule(v: FidelityVariant): FigureRule {
  const runs: readonly JudgedRun[] = [v.simulated, ...v.real];
  return runs.every((r) => r.summary.baselineOriginQps >= BASELINE_FLOOR_QPS) ? AMPLIFICATION : PEAK_ORIGIN;
}

function compareNumbers(rule: FigureRule, v: FidelityVariant): NumberComparison {
  const simulated = rule.read(v.simulated.summary);
  const real = v.real.map((r) => rule.read(r.summary));
  const spread = spreadOf(real);
  if (rule.agrees === undefined) return { figure: rule.figure, role: 'shown', simulated, real, spread, within: null, agreeing: null, agrees: null };
  const within = real.map((x) => rule.agrees!(simulated, x));
  const agreeing = within.filter(Boolean).length;
  return { figure: rule.figure, role: 'judged', simulated, real, spread, within, agreeing, agrees: agreeing === real.length };
}

function compareVerdicts(scenario: Scenario, v: FidelityVariant): VerdictComparison {
  const simulated = verdictClass(scenario, v.simulated);
  const real = v.real.map((r) => verdictClass(scenario, r));
  const within = real.map((c) => c === simulated);
  const agreeing = within.filter(Boolean).length;
  return { figure: 'verdict', role: 'judged', simulated, real, within, agreeing, agrees: agreeing === real.length };
}

/** One variant, simulated against real, figure by figure (see the top of this file for how several runs and a null recovery are judged). */
export function compareVariant(scenario: Scenario, v: FidelityVariant): FidelityRow {
  assert.ok(v.real.length > 0, 'a fidelity comparison needs at least one real run');
  const figures: FigureComparison[] = [compareVerdicts(scenario, v), ...[TRIGGER_GOODPUT, RECOVERY, originRule(v), ...SHOWN].map((rule) => compareNumbers(rule, v))];
  return { runs: v.real.length, figures, agrees: figures.every((c) => c.agrees !== false) };
}

/** Each variant the fidelity run has, in {@link VARIANTS}' order, compared. */
export function compareFidelity(f: Fidelity): readonly { readonly variant: VariantName; readonly row: FidelityRow }[] {
  return VARIANTS.flatMap((variant) => {
    const v = f.variants[variant];
    return v === undefined ? [] : [{ variant, row: compareVariant(f.scenario, v) }];
  });
}

/** What one process of a real run took of the host at its worst: what fidelity.json keeps of the host series. */
export interface HostPeak {
  readonly name: string;
  /** Mean CPU over the run, cores. */
  readonly cpuMeanCores: number;
  /** Highest CPU in one second, cores. */
  readonly cpuMaxCores: number;
  /** Highest per-second event-loop delay p99, ms; null: not a Node process, or never sampled. */
  readonly lagP99MaxMs: number | null;
}

/** Per process of a real run, its mean and highest CPU and its worst second's event-loop delay. */
export function hostPeaks(run: RealRun): HostPeak[] {
  return run.host.map((p) => {
    const lags = p.lagP99Ms.filter((x): x is number => x !== null);
    const cpuSum = p.cpu.reduce((a, b) => a + b, 0);
    return {
      name: p.name,
      cpuMeanCores: round(cpuSum / Math.max(1, p.cpu.length)),
      cpuMaxCores: round(Math.max(0, ...p.cpu)),
      lagP99MaxMs: lags.length === 0 ? null : round(Math.max(...lags)),
    };
  });
}

/** A summary's fields in results.json's order, numbers rounded: fidelity.json is diffed run against run. */
function summaryJson(scenario: Scenario, run: JudgedRun): object {
  const s = run.summary;
  return {
    verdict: verdictClass(scenario, run),
    recovered: s.recovered,
    recoverySeconds: s.recoverySeconds === null ? null : round(s.recoverySeconds),
    operatorForced: s.operatorForced,
    baselineOriginQps: round(s.baselineOriginQps),
    peakOriginQps: round(s.peakOriginQps),
    amplification: round(s.amplification),
    errorRate: round(s.errorRate),
    goodputRatio: round(s.goodputRatio),
    p99Ms: round(s.p99Ms),
    trigger: { goodputRatio: round(s.trigger.goodputRatio), bestGoodputRatio: round(s.trigger.bestGoodputRatio), efficiency: round(s.trigger.efficiency) },
    invalidServed: s.invalidServed,
  };
}

function figureJson(c: FigureComparison): object {
  if (c.figure === 'verdict') return { simulated: c.simulated, real: c.real, agreeing: c.agreeing, agrees: c.agrees };
  const r = (x: number | null): number | null => (x === null ? null : round(x));
  const judged = c.role === 'judged' ? { agreeing: c.agreeing, agrees: c.agrees } : {};
  return { role: c.role, simulated: r(c.simulated), real: c.real.map(r), min: r(c.spread.min), median: r(c.spread.median), max: r(c.spread.max), ...judged };
}

/**
 * The `fidelity.json` document: the bars, and per variant each figure
 * compared, the simulated and real summaries and each real run's host
 * peaks. Keys in a fixed order and numbers rounded to 4 decimals, so two
 * runs' files diff line by line.
 */
export function fidelityJson(f: Fidelity): string {
  const rows = compareFidelity(f);
  const variants: Record<string, object> = {};
  for (const { variant, row } of rows) {
    const v = f.variants[variant]!;
    variants[variant] = {
      agrees: row.agrees,
      runs: row.runs,
      figures: Object.fromEntries(row.figures.map((c) => [c.figure, figureJson(c)])),
      simulated: summaryJson(f.scenario, v.simulated),
      // With a database, what a query held its slot beyond its sleep, taken off (database-calibration.ts): the run's own measure.
      real: v.real.map((r) => ({ ...summaryJson(f.scenario, r), host: hostPeaks(r), ...(r.database === undefined ? {} : { database: { serviceMs: r.database.serviceMs, measuredMs: round(r.database.measuredMs), overheadMs: round(r.database.overheadMs) } }) })),
    };
  }
  const doc = {
    scenario: f.scenario.name,
    seed: f.seed,
    cores: f.cores,
    fitting: { scale: round(f.fitting.scale), timeScale: round(f.fitting.timeScale), ...(f.fitting.rounded === undefined || f.fitting.rounded.length === 0 ? {} : { rounded: f.fitting.rounded.map((r) => ({ ...r, fitted: round(r.fitted) })) }) },
    bars: { triggerGoodputPoints: round(TRIGGER_GOODPUT_BAR * 100), recoveryS: RECOVERY_BAR_S, recoveryShare: RECOVERY_BAR_SHARE, amplificationShare: AMPLIFICATION_BAR_SHARE, baselineFloorQps: BASELINE_FLOOR_QPS },
    agrees: rows.every((r) => r.row.agrees),
    variants,
  };
  return `${JSON.stringify(doc, null, 2)}\n`;
}
