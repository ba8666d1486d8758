import { ZipfKeys } from '../zipf.js';
import { meanMs } from '../delay.js';
import type { ServiceScenario } from './service.js';
import { activeAt, serviceState } from './service-faults.js';

/**
 * The service world's best possible goodput and origin capacity (see
 * src/lab/best-possible.ts and docs/lab.md), from the scenario's capacity
 * and the state its faults make (service-faults.ts), never from a run.
 */

/** Requests/s an ideal policy could answer at `t` (s), given `offered` requests/s. */
export function serviceBound(scenario: ServiceScenario): (t: number, offered: number) => number {
  const patience = Math.min(...scenario.clients.map((c) => c.timeoutMs));
  const keys = scenario.keys === undefined || scenario.cache === undefined ? undefined : new ZipfKeys(scenario.keys.count, scenario.keys.exponent);
  return (t, offered) => {
    const state = serviceState(scenario, activeAt(scenario, t), t);
    const servers = state.servers.reduce((sum, s) => sum + (s.hung ? 0 : patientThroughput(scenario, s.keep, s.slowdown, patience)), 0);
    return Math.min(servers, dataBound(scenario, keys, t, offered, state.databaseSlowdown));
  };
}

/**
 * One server's best throughput when an answer must come within `patience`:
 * the most requests it can hold while each still finishes in time (the
 * service time grows with what it holds), as retry-storm's bound.
 */
function patientThroughput(scenario: ServiceScenario, keep: number, slowdown: number, patience: number): number {
  const { slowdownPerInFlight: k } = scenario.servers;
  const mean = meanService(scenario);
  if (mean * slowdown > patience) return 0;
  const full = serverThroughput(scenario, keep, slowdown, mean);
  if (k === 0) return full;
  const fit = Math.floor((patience / (mean * slowdown) - 1) / k);
  const { workers, cores } = scenario.servers;
  const held = Math.min(Math.max(1, Math.round(workers * keep)), cores === undefined ? Infinity : cores * keep);
  return fit >= held ? full : (fit * 1000) / (mean * (1 + k * fit) * slowdown);
}

/**
 * What the data tier lets through: no database, no limit; a database alone,
 * its capacity (÷ its slowdown); a cache in front of it, everything for keys
 * cached, plus the database's capacity for the rest. After a cache flush an
 * ideal policy reloads the most popular keys first, one query each, at the
 * database's capacity: `m` seconds × capacity keys are back `m` s after the
 * flush, serving their Zipf share of reads.
 */
function dataBound(scenario: ServiceScenario, keys: ZipfKeys | undefined, t: number, offered: number, databaseSlowdown: number): number {
  const db = scenario.database;
  if (db === undefined) return Infinity;
  const capacity = db.capacityQps / databaseSlowdown;
  if (keys === undefined) return capacity;
  const flushes = scenario.faults.filter((f) => f.kind === 'cache-flush' && f.startS <= t).map((f) => f.startS);
  if (flushes.length === 0) return Infinity;
  const since = t - Math.max(...flushes);
  return offered * keys.shareOfTop(since * capacity) + capacity;
}

/** The origin's capacity at `t` (s): the database's (÷ its slowdown), or without one the servers' together. */
export function serviceOriginCapacity(scenario: ServiceScenario, t: number): number {
  const state = serviceState(scenario, activeAt(scenario, t), t);
  if (scenario.database !== undefined) return scenario.database.capacityQps / state.databaseSlowdown;
  return state.servers.reduce((sum, s) => sum + (s.hung ? 0 : serverThroughput(scenario, s.keep, s.slowdown)), 0);
}

/** The healthy throughput of every server together, requests/s: each at its best number held (all workers, or as many as cores), nothing queued. */
export function serverCapacityQps(scenario: ServiceScenario): number {
  return scenario.servers.count * serverThroughput(scenario, 1, 1);
}

/**
 * One server's throughput, requests/s, keeping `keep` of its workers and
 * cores, at `slowdown`: `n × 1000 ÷ (mean service × (1 + k × n) × slowdown)`
 * with `n` its workers kept (at least 1), or with processor sharing the
 * cores kept when fewer (`min(workers, cores)` requests in service get all
 * the cores: more only share them).
 */
export function serverThroughput(scenario: ServiceScenario, keep: number, slowdown: number, mean = meanService(scenario)): number {
  const { workers, cores, slowdownPerInFlight: k } = scenario.servers;
  const threads = Math.max(1, Math.round(workers * keep));
  const n = cores === undefined ? threads : Math.min(threads, cores * keep);
  return (n * 1000) / (mean * (1 + k * n) * slowdown);
}

/** The servers' mean service time on an idle server, ms (at least 1: service times are whole ms). */
export function meanService(scenario: ServiceScenario): number {
  return Math.max(1, meanMs(scenario.servers.service));
}
