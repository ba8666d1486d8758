import { DamperError } from 'damper';
import { meanMs } from './engine/delay.js';
import { activeAt, serviceState } from './world/service-faults.js';
import { triggerEndS, triggerStartS } from './scenario.js';
import { type Scenario } from './world/worlds.js';
import { runStack } from './world/service.js';
import { type StackSpec } from './stacks/stack.js';

/**
 * What a run will cost, known before it starts (issue 29, part 3: know
 * before you wait). A simulation's time grows with the calls its users
 * send, so a grid whose cells add up to billions of calls (`--load
 * 1..10000`, a typo for 1..1.5) is refused at once rather than left running
 * for hours with no way to tell.
 */

/**
 * The calls a run sends by default at most, every cell and variant
 * together. A blunt bound, set to catch a typo rather than to budget time: a
 * simulated call costs from about 1 µs (facebook-2010's naive hits) to 70 µs
 * (a stuck two-tier storm) of one thread here, so 10⁹ calls are ten minutes
 * to hours. `--load 1..10000` on a 2,000 calls/s scenario of 600 s asks for
 * about 10¹¹.
 */
export const DEFAULT_MAX_CALLS = 1_000_000_000;

/**
 * The users' calls (first attempts) one variant of `scenario` sends: each
 * open population's rate × the load the faults set, second by second; a
 * closed population at most one call per user per think time (at least 1
 * ms). Retries come on top, and differ by variant: what is counted is what
 * the users send, the same for both.
 */
export function simulatedCalls(scenario: Scenario): number {
  let calls = 0;
  for (let s = 0; s < scenario.durationS; s++) {
    const load = serviceState(scenario, activeAt(scenario, s + 0.5), s + 0.5).load;
    const seconds = Math.min(1, scenario.durationS - s);
    for (const p of scenario.clients) {
      const perSecond = p.closed === undefined ? p.rate : (Math.round(p.closed.users * load) * 1000) / Math.max(1, meanMs(p.closed.thinkTime));
      calls += (p.closed === undefined ? perSecond * load : perSecond) * seconds;
    }
  }
  return calls;
}

/** How `--max-calls` is described, for a run over `scope` ("every cell and variant"). */
export function maxCallsHelp(scope: string): string {
  return `the simulated calls ${scope} may send together (default 1e9: minutes to hours here, by what a call costs); past it the run is refused before it starts`;
}

/** A run, a sweep or a check whose calls pass the limit: refused before anything runs (exit 2). */
export class RunTooLargeError extends DamperError {
  constructor(message: string) {
    super('RUN_TOO_LARGE', message);
  }
}

/** Calls as a reader takes them in: 312,000, 1.20 million, 3.40 billion. */
export function formatCalls(calls: number): string {
  if (calls >= 1e9) return `${(calls / 1e9).toPrecision(3)} billion`;
  if (calls >= 1e6) return `${(calls / 1e6).toPrecision(3)} million`;
  return Math.round(calls).toLocaleString('en-US');
}

/**
 * Refuses `what` ("this grid", "this run") when the calls of its `parts`,
 * each run once per variant, pass `limit`, saying what it would have cost,
 * where most of it comes from, and how to go on; else returns the calls.
 * `unit` names a part, singular and plural (cell, cells).
 */
export function checkCalls(what: string, parts: readonly { readonly name: string; readonly scenario: Scenario }[], unit: readonly [string, string], variants: number, limit: number): number {
  const costs = parts.map((p) => simulatedCalls(p.scenario) * variants);
  const calls = costs.reduce((a, b) => a + b, 0);
  if (calls <= limit) return calls;
  const most = Math.max(...costs);
  const largest = parts[costs.indexOf(most)]!.name;
  const detail = `${parts.length} ${parts.length === 1 ? unit[0] : unit[1]} × ${variants} ${variants === 1 ? 'variant' : 'variants'}; the largest, ${largest}: ${formatCalls(most)}`;
  throw new RunTooLargeError(`${what} would simulate ${formatCalls(calls)} calls (${detail}), past the limit of ${formatCalls(limit)}: narrow it, or raise the limit with --max-calls N`);
}

/**
 * The calls a calibration times per variant: about half a second to two of
 * one thread here, by what a call costs, so the estimate comes in seconds
 * before a grid that may take an hour.
 */
export const CALIBRATION_CALLS = 10_000;

/**
 * What a calibration runs to time a call of `scenario` on this machine: its
 * first seconds, enough for about {@link CALIBRATION_CALLS} calls (at least
 * two), with its trigger moved into them, taking the same share of the
 * slice as of the whole run (at least a second), so the calls timed mix a
 * healthy system's and a triggered one's as the run does (a retry storm's
 * call costs several of a healthy one's). The system starts in the steady
 * state a run starts in; operator actions are dropped. A guess, said as one:
 * a cell that gets stuck costs more per call than its trigger's share
 * shows, and one a sweep ends at its verdict costs less.
 */
export function calibrationSlice(scenario: Scenario): Scenario {
  const perSecond = Math.max(1, simulatedCalls(scenario) / scenario.durationS);
  const seconds = Math.min(scenario.durationS, Math.max(2, Math.ceil(CALIBRATION_CALLS / perSecond)));
  const from = triggerStartS(scenario);
  const share = (triggerEndS(scenario) - from) / scenario.durationS;
  const at = seconds - Math.min(seconds / 2, Math.max(1, share * seconds));
  const faults = scenario.faults.filter((f) => f.trigger).map((f) => ({ ...f, startS: at + (f.startS - from) * (seconds / scenario.durationS), endS: seconds }));
  return { ...scenario, durationS: seconds, baseline: { fromS: 0, toS: at }, faults } as Scenario;
}

/**
 * Runs `stack` (a variant, or a peer's) over {@link calibrationSlice} of
 * `scenario`; returns the calls the slice sent. The caller times it, and runs it once before it
 * times it: the first run of a thread pays for compiling the code (ten
 * times a warm call's cost here), which a whole cell spreads thin.
 */
export async function runCalibration(scenario: Scenario, stack: StackSpec, seed: number): Promise<number> {
  const slice = calibrationSlice(scenario);
  await runStack(slice, stack, seed);
  return simulatedCalls(slice);
}

/** A time, as a reader takes it in: "40 s", "3 min 20 s", "2 h 5 min". */
export function formatDuration(seconds: number): string {
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

/** The estimated wall time past which a grid is refused by default, minutes: a CI job's patience, not a machine's limit. */
export const DEFAULT_MAX_MINUTES = 60;

/**
 * Refuses `what` when its estimated wall time passes `maxMinutes`, saying
 * what it would take, from what, and how to go on.
 */
export function checkEstimate(what: string, estimateS: number, basis: string, maxMinutes: number): void {
  if (estimateS <= maxMinutes * 60) return;
  throw new RunTooLargeError(`${what} would take about ${formatDuration(estimateS)} here (${basis}), past the limit of ${maxMinutes} min: narrow it, spread it over machines with --shard, or raise the limit with --max-minutes M`);
}
