/**
 * What a lab run produces: per-second series for the report's charts, and the
 * summary fields that the lab's contract (docs/design.md) names for `results.json`.
 * Everything here is derived from virtual time only, so the same scenario and
 * seed give the same values, byte for byte.
 */

import { type AlertState } from './alerts.js';
import { type CharacteristicSeries } from './characteristic.js';

/** The two ways each scenario is replayed. */
export const VARIANTS = ['naive', 'damper'] as const;
export type VariantName = (typeof VARIANTS)[number];

/** One sample per simulated second; index i covers [i s, i+1 s). */
export interface Series {
  /** Requests clients sent in that second (first attempts and retries). */
  offered: number[];
  /** Of those, the ones that ended with a valid value within the client's timeout (whenever the answer came: a request counts in the second it was sent). */
  goodput: number[];
  /** Of those, the ones that ended otherwise: error, timeout, invalid value, refused. */
  errors: number[];
  /** Queries that reached the origin (database) in that second, whether or not it could serve them. */
  originQps: number[];
  /** 99th percentile latency of the requests sent in that second, ms; null when none was sent. */
  p99Ms: (number | null)[];
  /** Share of that second's requests answered with a fresh value without waiting for the origin (a cache hit, as a dashboard counts it); null when none was sent. */
  hitRatio: (number | null)[];
  /** Share of that second's requests answered at once with a value past its ttl while it is refreshed (damper's stale window): not hits; null when none was sent. */
  staleRatio: (number | null)[];
  /** Requests in flight at the end of that second: sent so far, not ended yet. */
  inFlight: number[];
}

/** A run's series with what it is judged against. */
export interface JudgedSeries extends Series {
  /**
   * What an ideal policy could have answered that second with the capacity
   * the faults left (src/lab/judge/best-possible.ts): never more than offered.
   */
  bestGoodput: number[];
}

/** What a world measures of one variant's run; the lab adds the judgement (`VariantSummary`). */
export interface MeasuredSummary {
  /** Healthy again after the trigger ended (see `recoverySeconds`). */
  recovered: boolean;
  /**
   * Seconds from the trigger's end until the start of the first window of
   * `objective.holdS` seconds in which every second is healthy (goodput ≥
   * the objective's share of offered, p99 within the objective); null if
   * that never happens.
   */
  recoverySeconds: number | null;
  /** Mean origin queries/s over the baseline window before the trigger. */
  baselineOriginQps: number;
  /** Highest origin queries/s, averaged over a sliding window, from the trigger's start on. */
  peakOriginQps: number;
  /** peakOriginQps / baselineOriginQps. */
  amplification: number;
  /** Failed requests / requests ended, over the whole run. */
  errorRate: number;
  /** Goodput / offered, over the whole run. */
  goodputRatio: number;
  /** 99th percentile latency over the whole run, ms. */
  p99Ms: number;
  /** Valid-looking but invalid values handed to clients (must be 0 for damper). */
  invalidServed: number;
  /** Requests simulated, for the speed figure. */
  simulatedRequests: number;
  /**
   * Whole seconds of the scenario's timeline simulated: its length, or fewer
   * when the run ended at its verdict (a sweep's cell: `RunOptions.end`).
   */
  simulatedS: number;
}

/** Goodput over the trigger window, against what was offered and what was possible. */
export interface TriggerWindow {
  /** Goodput ÷ offered, from the first trigger's start to the last one's end. */
  goodputRatio: number;
  /** Best possible goodput ÷ offered over the same window: what the capacity left allowed. */
  bestGoodputRatio: number;
  /** Goodput ÷ best possible (at most 1): how much of what could be served was. */
  efficiency: number;
}

/**
 * The summary of one variant of one scenario (docs/design.md, "The lab's
 * contract"): what the world measured, how it did during the trigger against
 * the best possible, and whether it recovered only because operators acted.
 */
export interface VariantSummary extends MeasuredSummary {
  /**
   * Recovered only after an operator action: one that happened to this
   * variant (it was not skipped as unnecessary) and began after the trigger
   * ended and before the recovery. Such a recovery is the operators', not the
   * system's.
   */
  operatorForced: boolean;
  trigger: TriggerWindow;
  /**
   * Each shipped alert rule (damper/otel's `characteristicAlerts`) whose
   * gauge this variant has, by name: when it first fired on the sampled
   * gauges (s from the run's start; null: never) and whether it was still
   * firing at the end (src/lab/judge/alerts.ts).
   */
  alerts: Readonly<Record<string, AlertState>>;
}

/** A time span on the scenario's timeline, shaded in the report. */
export interface FaultSpan {
  readonly label: string;
  readonly startS: number;
  readonly endS: number;
  /** `trigger`: part of the incident's cause; `operator`: a human action. */
  readonly kind: 'trigger' | 'operator';
}

/** One variant's run as a world returns it: measured, not yet judged. */
export interface VariantRun {
  readonly summary: MeasuredSummary;
  readonly series: Series;
  /** The characteristic metrics, sampled once a simulated second (src/lab/judge/characteristic.ts): only the gauges the variant has. */
  readonly characteristics: CharacteristicSeries;
  /** Indices into the scenario's faults that did not happen in this run (an operator action its health made unnecessary). */
  readonly skippedFaults: readonly number[];
  /**
   * Per client population, counts over the trigger's span (from its start to
   * its end), in worlds that keep them: for the tests, not part of
   * `results.json` or of the report.
   */
  readonly populations?: Readonly<Record<string, PopulationCounts>>;
}

/** What one client population saw over the trigger's span (see `VariantRun.populations`). */
export interface PopulationCounts {
  /** Requests (attempts) started in the span that ended. */
  readonly requests: number;
  /** Of those, answered with a valid value within the client's timeout. */
  readonly good: number;
  /** Of those, refused by the origin budget (an `OverloadedError`): shed. */
  readonly shed: number;
}

/** One variant's run with its judgement: the full summary, and the best possible beside its series. */
export interface JudgedRun extends VariantRun {
  readonly summary: VariantSummary;
  readonly series: JudgedSeries;
}

export interface ScenarioRun {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly durationS: number;
  /** The origin's healthy capacity in queries/s. */
  readonly originCapacityQps: number;
  /** The origin's capacity each second, queries/s (a slowdown cuts it): the line on the origin chart. */
  readonly originCapacity: readonly number[];
  /** The world has a cache, so a hit ratio means something (the report draws it only then). */
  readonly cached: boolean;
  /** The latency objective for "healthy", ms. */
  readonly objectiveP99Ms: number;
  readonly faults: readonly FaultSpan[];
  /** When the trigger ended, s: recovery counts from here. */
  readonly triggerEndS: number;
  /** When the trigger began, s: the trigger window runs from here to `triggerEndS`. */
  readonly triggerStartS: number;
  readonly variants: Readonly<Record<VariantName, JudgedRun>>;
  /** The peer stacks `damper lab --stack` ran beside the two (issue 31), in the order given; none without it. */
  readonly stacks?: readonly StackOutcome[];
  /** One line saying what happened, for the report and the terminal. */
  readonly verdict: string;
}

/**
 * A peer stack in a `damper lab` run (`--stack cockatiel:bulkhead=24`): its
 * run, judged as a variant's, or why it could not run in this scenario (a
 * cache peer where the system has no cache), said where its column would be.
 */
export type StackOutcome = { readonly name: string; readonly run: JudgedRun } | { readonly name: string; readonly problem: string };

/** The stacks of a scenario that ran: what the tables and the charts show beside naive and damper. */
export function stacksRan(s: ScenarioRun): { readonly name: string; readonly run: JudgedRun }[] {
  return (s.stacks ?? []).filter((o): o is { name: string; run: JudgedRun } => 'run' in o);
}

/** A scenario's runs as its tables show them: naive, the peer stacks that ran, damper (as `lab stacks` orders its rows). */
export function columnsOf(s: ScenarioRun): { readonly name: string; readonly run: JudgedRun }[] {
  return [{ name: 'naive', run: s.variants.naive }, ...stacksRan(s), { name: 'damper', run: s.variants.damper }];
}

export interface LabRun {
  readonly seed: number;
  readonly scenarios: readonly ScenarioRun[];
}

/**
 * The `results.json` document: summaries only, no wall-clock figures, so it
 * is byte-identical per seed. A peer stack that ran (`--stack`) is one more
 * key beside naive and damper, named as given; one that could not run in a
 * scenario has none there.
 */
export function resultsJson(run: LabRun): string {
  const scenarios: Record<string, Record<string, VariantSummary>> = {};
  for (const s of run.scenarios) scenarios[s.name] = { naive: s.variants.naive.summary, damper: s.variants.damper.summary, ...Object.fromEntries(stacksRan(s).map((o) => [o.name, o.run.summary])) };
  return `${JSON.stringify({ seed: run.seed, scenarios }, null, 2)}\n`;
}
