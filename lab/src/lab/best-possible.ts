import { serviceBound, serviceOriginCapacity } from './world/service-best.js';
import type { WebFarmScenario } from './world/web-farm.js';
import type { Scenario } from './worlds.js';

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
  const at = (t: number): number => {
    if (scenario.world === 'service') return serviceOriginCapacity(scenario, t);
    return scenario.origin.capacityQps;
  };
  return Array.from({ length: seconds }, (_, s) => {
    let sum = 0;
    for (let i = 0; i < SAMPLES; i++) sum += at(s + (i + 0.5) / SAMPLES);
    return round(sum / SAMPLES);
  });
}

function boundOf(scenario: Scenario): Bound {
  switch (scenario.world) {
    case 'web-farm':
      return farmBound(scenario);
    case 'service':
      return serviceBound(scenario);
  }
}

/** Faults of `scenario` active at `t` (s). */
function active<F extends { readonly startS: number; readonly endS: number }>(faults: readonly F[], t: number): F[] {
  return faults.filter((f) => f.startS <= t && t < f.endS);
}

/**
 * web-farm: each server that is not hung answers cached pages at
 * `cores × 1000 / hitMs` per second (its CPU, the bottleneck; its workers
 * allow more). An ideal policy serves a page past its ttl stale and renders
 * it again within spare capacity, so renders are left out; so is a restarted
 * server's cold cache (an ideal balancer sends its traffic to the warm one
 * while it warms).
 */
function farmBound(scenario: WebFarmScenario): Bound {
  const perServer = (scenario.servers.cores * 1000) / scenario.servers.hitMs;
  return (t) => {
    const hung = new Set(active(scenario.faults, t).flatMap((f) => (f.kind === 'hang-server' ? [f.server] : [])));
    return (scenario.servers.count - hung.size) * perServer;
  };
}

/** Four decimals, as every other series value: stable across platforms' float printing. */
function round(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}
