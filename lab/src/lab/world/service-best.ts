import { KeySets } from './key-sets.js';
import { meanMs } from '../engine/delay.js';
import type { ServiceScenario } from './service.js';
import { activeAt, ejectedAt, serviceState, type ServiceState } from './service-faults.js';
import { ringThroughput } from './hash-ring.js';

/**
 * The service world's best possible goodput and origin capacity (see
 * src/lab/judge/best-possible.ts and docs/lab.md), from the scenario's capacity
 * and the state its faults make (service-faults.ts), never from a run.
 */

/** Requests/s an ideal policy could answer at `t` (s), given `offered` requests/s. */
export function serviceBound(scenario: ServiceScenario): (t: number, offered: number) => number {
  const patience = Math.min(...scenario.clients.map((c) => c.timeoutMs));
  const keys = scenario.database === undefined || scenario.cache === undefined ? undefined : new KeySets(scenario.clients, scenario.keys);
  const tiers = tierServersBound(scenario);
  return (t, offered) => {
    const state = serviceState(scenario, activeAt(scenario, t), t);
    const servers = state.servers.reduce((sum, s) => sum + (s.hung ? 0 : patientThroughput(scenario, s.keep, s.slowdown, patience)), 0);
    const data = scenario.cache?.nodes === undefined ? dataBound(scenario, keys, t, offered, state.databaseSlowdown) : nodesBound(scenario, keys!, t, offered, state, patience);
    return Math.min(servers, data, tiers);
  };
}

/**
 * What the servers the client tiers run on let through (`tiers.each[t].servers`),
 * the least of them. A worker of tier t is held for its own work and at
 * least for the work of every pool below it (the servers' included), since
 * it waits for its call below; a core only for its own work. So a pool
 * carries at most `count × workers × 1000 ÷ (own + below)` calls/s, and with
 * cores `count × cores × 1000 ÷ own`, mean service times of idle servers. An
 * upper bound: it ignores queues, hops, and the faults' slowdowns below
 * (which hold the workers longer still).
 */
function tierServersBound(scenario: ServiceScenario): number {
  const each = scenario.tiers?.each ?? [];
  let below = meanService(scenario.servers);
  let bound = Infinity;
  for (let t = each.length - 1; t >= 0; t--) {
    const pool = each[t]!.servers;
    if (pool === undefined) continue;
    const own = meanService(pool);
    const threads = (pool.count * pool.workers * 1000) / (own + below);
    const cores = pool.cores === undefined ? Infinity : (pool.count * pool.cores * 1000) / own;
    bound = Math.min(bound, threads, cores);
    below += own;
  }
  return bound;
}

/**
 * One server's best throughput when an answer must come within `patience`.
 * A request's service time is fixed when it starts, `mean × (1 + k × n) ×
 * slowdown` with `n` the requests the server holds, so holding `n ≤ workers`
 * and queueing none gives `n × 1000 ÷ (mean × (1 + k × n) × slowdown)` per
 * second, which grows with `n`. The best policy holds as many as it can while
 * an answer still comes in time: `n* = min(workers, ⌊(patience ÷ (mean ×
 * slowdown) − 1) ÷ k⌋)` (all the workers when k = 0; none when even one
 * request takes longer than the patience). With few workers that is all of
 * them; with Brooker's 10,000 (1 s + 10 ms per request held, 3 s timeout) it
 * is 200, for 66.7 requests/s.
 */
function patientThroughput(scenario: ServiceScenario, keep: number, slowdown: number, patience: number): number {
  const { slowdownPerInFlight: k } = scenario.servers;
  const mean = meanService(scenario.servers);
  if (mean * slowdown > patience) return 0;
  const full = serverThroughput(scenario.servers, keep, slowdown, mean);
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
function dataBound(scenario: ServiceScenario, keys: KeySets | undefined, t: number, offered: number, databaseSlowdown: number): number {
  const db = scenario.database;
  if (db === undefined) return Infinity;
  const capacity = db.capacityQps / databaseSlowdown;
  if (keys === undefined) return capacity;
  const cached = cachedShare(scenario, keys, t, capacity);
  if (cached === 1) return Infinity;
  return offered * cached + capacity;
}

/**
 * The share of reads whose key the cache tier holds at `t`: all of them,
 * or, `m` s after a flush, the `m × capacity` most popular keys (an ideal
 * policy reloads them first, one query each, at the database's capacity).
 */
function cachedShare(scenario: ServiceScenario, keys: KeySets, t: number, capacity: number): number {
  const flushes = scenario.faults.filter((f) => f.kind === 'cache-flush' && f.startS <= t).map((f) => f.startS);
  if (flushes.length === 0) return 1;
  return keys.shareOfTop((t - Math.max(...flushes)) * capacity);
}

/**
 * With the cache tier on nodes: a read of a key the server holds in memory
 * (an ideal policy keeps the `processEntries` most read there, by default
 * all) needs nothing else.
 * The rest of the cached keys' reads need a node ({@link ringThroughput}:
 * `capacityOps × keep` each, none while stopped or killed, none when its
 * round trip alone (mean latency × slow) outlasts the users' patience,
 * out of the ring while ejected; and no more than the servers' pools of
 * connections to them carry, {@link poolsThroughput}); what the nodes cannot answer, and the
 * reads of keys no tier holds (after a flush), the database can, up to its
 * capacity. A flush empties the nodes, not the servers' memory.
 */
function nodesBound(scenario: ServiceScenario, keys: KeySets, t: number, offered: number, state: ServiceState, patience: number): number {
  const cache = scenario.cache!;
  const nodes = cache.nodes!;
  const capacity = scenario.database!.capacityQps / state.databaseSlowdown;
  const inProcess = keys.shareOfTop(cache.processEntries ?? keys.keys.length);
  const onNodes = Math.max(0, cachedShare(scenario, keys, t, capacity) - inProcess);
  const ejected = ejectedAt(scenario, t);
  const capacities = state.cacheNodes.map((n, i) => (ejected.has(i) ? null : n.hung || n.down || meanMs(nodes.latency) * n.slow > patience ? 0 : nodes.capacityOps * n.keep));
  const byNodes = Math.min(ringThroughput(capacities, offered * onNodes), poolsThroughput(scenario, state, ejected));
  return offered * inProcess + byNodes + Math.min(offered * (1 - inProcess) - byNodes, capacity);
}

/**
 * What the servers' pools of connections to the nodes let through
 * (`nodes.connections`): each connection held for a round trip per command,
 * the mean over the nodes in the ring (× their slowdown), so at most
 * `servers × connections × 1000 ÷ round trip` reads a second reach them. No
 * pool, no limit.
 */
function poolsThroughput(scenario: ServiceScenario, state: ServiceState, ejected: ReadonlySet<number>): number {
  const nodes = scenario.cache!.nodes!;
  if (nodes.connections === undefined) return Infinity;
  const inRing = state.cacheNodes.filter((_, i) => !ejected.has(i));
  if (inRing.length === 0) return Infinity;
  const roundTrip = Math.max(1e-9, meanMs(nodes.latency)) * (inRing.reduce((sum, n) => sum + n.slow, 0) / inRing.length);
  return (scenario.servers.count * nodes.connections * 1000) / roundTrip;
}

/** The origin's capacity at `t` (s): the database's (÷ its slowdown), or without one the servers' together. */
export function serviceOriginCapacity(scenario: ServiceScenario, t: number): number {
  const state = serviceState(scenario, activeAt(scenario, t), t);
  if (scenario.database !== undefined) return scenario.database.capacityQps / state.databaseSlowdown;
  return state.servers.reduce((sum, s) => sum + (s.hung ? 0 : serverThroughput(scenario.servers, s.keep, s.slowdown)), 0);
}

/** The healthy throughput of every server together, requests/s: each at its best number held (all workers, or as many as cores), nothing queued. */
export function serverCapacityQps(scenario: ServiceScenario): number {
  return scenario.servers.count * serverThroughput(scenario.servers, 1, 1);
}

/**
 * One server's throughput, requests/s, keeping `keep` of its workers and
 * cores, at `slowdown`: `n × 1000 ÷ (mean service × (1 + k × n) × slowdown)`
 * with `n` its workers kept (at least 1), or with processor sharing the
 * cores kept when fewer (`min(workers, cores)` requests in service get all
 * the cores: more only share them).
 */
export function serverThroughput(pool: Pool, keep: number, slowdown: number, mean = meanService(pool)): number {
  const { workers, cores, slowdownPerInFlight: k } = pool;
  const threads = Math.max(1, Math.round(workers * keep));
  const n = cores === undefined ? threads : Math.min(threads, cores * keep);
  return (n * 1000) / (mean * (1 + k * n) * slowdown);
}

/** A pool's mean service time on an idle server, ms (at least 1: service times are whole ms). */
export function meanService(pool: Pool): number {
  return Math.max(1, meanMs(pool.service));
}

/** A pool of servers: the scenario's, or the ones a client tier runs on. */
type Pool = Pick<ServiceScenario['servers'], 'workers' | 'cores' | 'slowdownPerInFlight' | 'service'>;
