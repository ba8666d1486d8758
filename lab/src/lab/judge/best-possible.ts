import { serviceBound, serviceOriginCapacity } from '../world/service-best.js';
import type { Scenario } from '../world/worlds.js';

/**
 * The best possible goodput, per simulated second: what an ideal policy could
 * have answered with the capacity the scenario's faults left, given what was
 * offered. A variant's goodput is judged against it during the trigger
 * (`trigger.efficiency`), so "damper served half the requests" reads as
 * "damper served 95 % of what could be served" when half the capacity was
 * gone, and as a miss when it was not.
 *
 * It depends on the scenario alone (capacity, fault timeline) and on the
 * offered series, never on what a variant did: both variants are held to the
 * same bound. Each world's formula is written beside it and in docs/lab.md.
 * Capacity is averaged over each second in `SAMPLES` steps, so a fault that
 * starts mid-second counts for its part of that second.
 */

const SAMPLES = 10;

/** Requests/s an ideal policy could answer at instant `t` (s), given `offered` requests/s then. */
type Bound = (t: number, offered: number) => number;

/** The best possible goodput of each second of `offered`. */
export function bestGoodput(scenario: Scenario, offered: readonly number[]): number[] {
  const bound = boundOf(scenario);
  return offered.map((o, s) => {
    let sum = 0;
    for (let i = 0; i < SAMPLES; i++) sum += Math.min(o, bound(s + (i + 0.5) / SAMPLES, o));
    return round(sum / SAMPLES);
  });
}

/**
 * The origin's capacity each second, queries/s: the line drawn on the
 * report's origin chart. The database's capacity is fixed; a service world's
 * servers' (the origin when it has no database) is their best throughput,
 * which a slowdown cuts.
 */
export function originCapacity(scenario: Scenario, seconds: number): number[] {
  const at = (t: number): number => serviceOriginCapacity(scenario, t);
  return Array.from({ length: seconds }, (_, s) => {
    let sum = 0;
    for (let i = 0; i < SAMPLES; i++) sum += at(s + (i + 0.5) / SAMPLES);
    return round(sum / SAMPLES);
  });
}

function boundOf(scenario: Scenario): Bound {
  return serviceBound(scenario);
}

/** Four decimals, as every other series value: stable across platforms' float printing. */
function round(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}
