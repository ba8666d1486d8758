import { Cache, type CacheOptions, CircuitBreaker, type Clock, ConcurrencyLimiter, type Guard, pipeline, RateLimiter, type SharedBackend, type VirtualClock } from 'damper';
import { cacheOptions, type DamperSettings } from '../damper-config.js';
import { type ServiceScenario } from '../schema/service.js';
import { sampleMs } from '../engine/delay.js';
import { type Network } from '../engine/network.js';
import { CacheCluster, type CacheNodesClient } from './cache-nodes.js';
import { CommandPool, PooledBackend } from './command-pool.js';
import { QueryError, type Row } from './database.js';
import { type CacheShape, damperCacheDefaults, type DatabaseAccess, damperRead, type DataTier, naiveQuery, type QueryCounts } from './service-data.js';
import { NaiveBreaker } from './naive-breaker.js';
import { PipelinedClient } from './pipelined-client.js';
import { type DataRead } from './service-server.js';
import { held, steadyState } from './steady-state.js';
import { queried } from './origin-waits.js';

/**
 * The service world's cache tier as a component of its own
 * (`cache.nodes`): Redis-like nodes on a consistent-hashing ring
 * (cache-nodes.ts), each with its capacity, its queue and a round trip per
 * call, shared by every server. Both variants read through the same nodes,
 * and the faults slow, degrade, stop, kill or eject them; the variants
 * differ in their clients.
 */

/** The nodes a scenario's cache tier has, the round trips drawn from `random`. */
export function cacheNodes(clock: VirtualClock, shape: CacheShape, network: Network, random: () => number): CacheCluster {
  const nodes = shape.nodes!;
  const latency = nodes.latency.kind === 'constant' ? undefined : (): number => sampleMs(nodes.latency, random);
  const latencyMs = nodes.latency.kind === 'constant' ? nodes.latency.ms : 0;
  return new CacheCluster(clock, nodes.count, { capacityOps: nodes.capacityOps, latencyMs, maxQueue: nodes.maxQueue }, nodes.vnodes, network, latency);
}

/**
 * Each simulated server's client to `cluster`: with no pool of connections
 * (`nodes.connections`), one pipelined connection per node, whose replies
 * come in the order sent (pipelined-client.ts), as ioredis's; with a pool,
 * the cluster itself, each command on a connection of its own.
 */
export function serverConnections(cluster: CacheCluster, shape: CacheShape): (server: number) => CacheNodesClient {
  if (shape.nodes!.connections !== undefined) return () => cluster;
  const clients = new Map<number, PipelinedClient>();
  return (server) => {
    let client = clients.get(server);
    if (client === undefined) clients.set(server, (client = new PipelinedClient(cluster)));
    return client;
  };
}

/** What naive's look-aside stores on a node: the row's validity is all a reader looks at. */
const VALID = '1';
const INVALID = '0';
const textOf = (row: Row): string => (row.valid ? VALID : INVALID);
/** A node call that failed, or that naive's command timeout cut. */
const FAILED = Symbol('cache call failed');

/**
 * naive's cache tier on nodes: each server a plain look-aside client (a
 * `GET`, and on a miss a query and a `SET`), no in-process copy, no
 * coalescing. A call that fails or outlasts `naive.commandTimeoutMs` (by
 * default it waits for ever, as ioredis does) is read as a miss: the
 * server queries the database and writes nothing back ("the cache is
 * down"), so a slow or dead node's keys all go to the database, each read
 * its own query. With `naive.breaker`, each server's breaker counts those
 * failures and, open, sends every read to the database without calling
 * the nodes (Discord 2019, naive-breaker.ts); with `naive.queryRetries`,
 * a failed query is tried again at once (service-data.ts); with
 * `nodes.connections`, each server's commands wait for one of its pool's
 * connections (command-pool.ts). With
 * `naive.deleteOnError`, an invalid value read is a miss, and a failed
 * query or an invalid value deletes the key (`DEL`). `counts(i)` counts
 * server `i`'s reads and queries.
 */
export function naiveCacheNodes(clock: Clock, db: DatabaseAccess, cluster: CacheNodesClient, shape: CacheShape, counts: (server: number) => QueryCounts, connectionOf: (server: number) => CacheNodesClient = () => cluster): DataTier {
  const ttlMs = shape.ttlS * 1000;
  const { commandTimeoutMs: timeoutMs, breaker: breakerShape, queryRetries } = shape.naive;
  const size = shape.nodes!.connections;
  // Through the server's pool of connections, when it has one: the command timeout runs over the wait too, as a client's does.
  const get = (nodes: CacheNodesClient, pool: CommandPool | undefined, key: string): Promise<string | undefined | typeof FAILED> => {
    const call = (pool === undefined ? nodes.get(key) : pool.run(() => nodes.get(key))).catch((): typeof FAILED => FAILED);
    if (timeoutMs === undefined) return call;
    return new Promise((resolve) => {
      const timer = clock.setTimer(() => resolve(FAILED), timeoutMs);
      void call.then((v) => {
        timer.cancel();
        resolve(v);
      });
    });
  };
  const fixer = shape.naive.deleteOnError === true;
  const reader = (server: number): DataRead => {
    const count = counts(server);
    const way = db.server(server);
    const nodes = connectionOf(server);
    const breaker = breakerShape === undefined ? undefined : new NaiveBreaker(breakerShape);
    const pool = size === undefined ? undefined : new CommandPool(size);
    const command = <T>(call: () => Promise<T>): Promise<T> => (pool === undefined ? call() : pool.run(call));
    const load = (key: string, fill: boolean, then: Parameters<DataRead>[2]): void => {
      naiveQuery(clock, way, key, shape.loadTimeoutMs, queryRetries, count, (outcome) => {
        if (fixer && (outcome instanceof QueryError || !outcome.valid)) {
          // Facebook 2010's fixer: a failure reads as a bad value, and the key is deleted.
          command(() => nodes.del(key)).catch(() => {});
          return then('error', 'origin');
        }
        if (outcome instanceof QueryError) return then('error', 'origin');
        if (fill) command(() => nodes.set(key, textOf(outcome), ttlMs)).catch(() => {});
        then(outcome.valid ? 'ok' : 'invalid', 'origin');
      });
    };
    return (key, _priority, then) => {
      count.cache.requests++;
      if (breaker?.isOpen(clock.now()) === true) return load(key, false, then);
      void get(nodes, pool, key).then((text) => {
        if (text === FAILED) {
          breaker?.failure(clock.now());
          return load(key, false, then);
        }
        breaker?.success();
        if (text === undefined || (fixer && text === INVALID)) return load(key, true, then);
        then(text === VALID ? 'ok' : 'invalid', 'cache');
      });
    };
  };
  return {
    reader,
    flush: () => cluster.flush(),
    // The write path's SET: a call like any other, which a down node refuses.
    push: (key, row) => void cluster.set(key, textOf(row), ttlMs).catch(() => {}),
    prewarm: (keys, row, freshMs) =>
      cluster.seed(async () => {
        await Promise.all(keys.keys.map((key) => cluster.set(key, textOf(row(key)), freshMs())));
      }),
  };
}

/**
 * damper's options for server `i`'s `Cache` over the nodes (`shared`): the
 * lab's (the in-process tier of `processEntries` keys, and the origin
 * budget: `cache.originRateQps` split over the servers as {@link rateBudget},
 * or a bound of concurrent loads), under the configuration's `cache(i)`.
 * `watch` hears of the budget's limiter when the user's configuration kept
 * it. The simulation and a real run's servers build them here alike.
 */
export function damperNodeOptions(clock: Clock, scenario: ServiceScenario, keyCount: number, settings: DamperSettings, watch: (limiter: ConcurrencyLimiter, server: number) => void = () => {}): (i: number, shared: NonNullable<CacheOptions<Row>['shared']>) => CacheOptions<Row> {
  const shape = scenario.cache!;
  const servers = scenario.servers.count;
  const workers = scenario.database!.workers;
  return (i, shared) => {
    const loads = Math.max(1, Math.ceil((2 * workers) / servers));
    const budget = shape.originRateQps === undefined ? undefined : rateBudget(clock, shape.originRateQps / servers, loads, shape.loadTimeoutMs);
    const own = { ...damperCacheDefaults(shape, keyCount, workers), maxEntries: Math.max(1, shape.processEntries ?? keyCount + 1), ...(budget === undefined ? { maxConcurrentLoads: loads } : { guard: budget.guard }) };
    const options = cacheOptions(settings, i, own, { clock, shared });
    // A user's own origin budget replaces the lab's: its limiter then sees nothing.
    if (budget !== undefined && options.guard === budget.guard) watch(budget.limiter, i);
    return options;
  };
}

/**
 * The origin budget of one server's `Cache` when the scenario gives the
 * servers a rate (`cache.originRateQps`, split over them: `rate` each):
 * a `RateLimiter` whose queue serves higher priorities first and sheds a
 * load that waited half the load timeout (the rest is the query's), a
 * `ConcurrencyLimiter` of `loads`, and a `CircuitBreaker`, composed as a
 * service composes them. Each server decides alone how much of the
 * database it takes, so only a rate bounds their sum (discord-2019: a
 * few reads per server that miss memory and a degraded node add up over
 * the fleet). A queue that outlasted the load timeout would refuse at the
 * load's deadline instead, which the cache holds against the key (its
 * backoff), not against the budget: discord-2019's push settings then
 * failed for minutes after the nodes recovered (measured: recovery 94 and
 * 141 s at seeds 2 and 4).
 */
function rateBudget(clock: Clock, rate: number, loads: number, loadTimeoutMs: number): { readonly guard: Guard; readonly limiter: ConcurrencyLimiter } {
  const limiter = new ConcurrencyLimiter({ clock, limit: loads });
  const queueTimeout = Math.max(1, Math.floor(loadTimeoutMs / 2));
  return { guard: pipeline(new RateLimiter({ rate, burst: Math.max(1, Math.ceil(rate / 4)), queueTimeout, clock }), limiter, new CircuitBreaker({ clock })), limiter };
}

/**
 * damper's cache tier on nodes: each server runs its own `Cache` (the
 * in-process tier, `processEntries` keys) over the nodes as its shared tier
 * (leases, the store's timeout and breaker, the bus), with `options(i)`:
 * the lab's, under the configuration's `cache(i)`. At the start the nodes
 * hold every key in damper's own envelopes, written by a `Cache` of their
 * own (steady-state.ts), and each server holds `processEntries` of them,
 * those an LRU of that size would hold (steady-state.ts's `held`).
 * `servers`: the ids of the servers this tier serves, `reader(k)` the
 * `k`-th's (the simulation: all of them; a real server's process: its own).
 * `options(i, shared)` must keep `shared`'s store and namespace.
 */
export function damperCacheNodes(clock: Clock, db: DatabaseAccess, cluster: CacheNodesClient, shape: CacheShape, servers: readonly number[], options: (server: number, shared: { readonly store: SharedBackend; readonly namespace: string }) => CacheOptions<Row>, connectionOf: (server: number) => CacheNodesClient = () => cluster): DataTier & { readonly caches: readonly Cache<Row>[] } {
  const namespace = 'lab';
  const size = shape.nodes!.connections;
  // Each server's client to the nodes, through a pool of its own when the scenario gives one.
  const store = (server: number): SharedBackend => (size === undefined ? connectionOf(server) : new PooledBackend(cluster, new CommandPool(size)));
  const caches = servers.map((id) => new Cache<Row>(options(id, { store: store(id), namespace })));
  const reads = caches.map((cache, k) => damperRead(clock, cache, queried(db.server(servers[k]!))));
  return {
    caches,
    reader: (server) => reads[server]!,
    flush: () => cluster.flush(),
    // Written through server 0's cache: the nodes and its bus tell the others. An invalid row is refused by validation, and the last known good stays.
    push: (key, row) => void caches[0]!.set(key, row).catch(() => {}),
    async prewarm(keys, row, freshMs, seed) {
      const freshness = keys.keys.map(() => freshMs());
      const steady = await steadyState(cluster, { ttlMs: shape.ttlS * 1000, staleForMs: shape.staleForS * 1000 }, namespace, keys.keys, freshness, row);
      // The steady state replaces what a server held: `restore` keeps a value a key already has, and a real server's
      // warm-up traffic left it values gone stale by time zero (its in-process tier stale at the start: half the loads).
      for (const cache of caches) cache.clear();
      await Promise.all(caches.map((cache, k) => cache.restore(held(steady, shape.processEntries, keys, seed, servers[k]!))));
    },
  };
}
