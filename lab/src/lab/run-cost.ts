import { DamperError } from 'damper';
import { meanMs } from './engine/delay.js';
import { activeAt, serviceState } from './world/service-faults.js';
import { type Scenario } from './world/worlds.js';

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
