import { Cache, type CacheOptions, type SharedBackend, type VirtualClock } from 'damper';
import { sampleMs } from '../engine/delay.js';
import { type Network } from '../engine/network.js';
import { CacheCluster } from './cache-nodes.js';
import { CommandPool, PooledBackend } from './command-pool.js';
import { QueryError, type Row } from './database.js';
import { type CacheShape, type DatabaseAccess, damperRead, type DataTier, naiveQuery, type QueryCounts } from './service-data.js';
import { NaiveBreaker } from './naive-breaker.js';
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
export function naiveCacheNodes(clock: VirtualClock, db: DatabaseAccess, cluster: CacheCluster, shape: CacheShape, counts: (server: number) => QueryCounts): DataTier {
  const ttlMs = shape.ttlS * 1000;
  const { commandTimeoutMs: timeoutMs, breaker: breakerShape, queryRetries } = shape.naive;
  const size = shape.nodes!.connections;
  // Through the server's pool of connections, when it has one: the command timeout runs over the wait too, as a client's does.
  const get = (pool: CommandPool | undefined, key: string): Promise<string | undefined | typeof FAILED> => {
    const call = (pool === undefined ? cluster.get(key) : pool.run(() => cluster.get(key))).catch((): typeof FAILED => FAILED);
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
    const breaker = breakerShape === undefined ? undefined : new NaiveBreaker(breakerShape);
    const pool = size === undefined ? undefined : new CommandPool(size);
    const command = <T>(call: () => Promise<T>): Promise<T> => (pool === undefined ? call() : pool.run(call));
    const load = (key: string, fill: boolean, then: Parameters<DataRead>[2]): void => {
      naiveQuery(clock, way, key, shape.loadTimeoutMs, queryRetries, count, (outcome) => {
        if (fixer && (outcome instanceof QueryError || !outcome.valid)) {
          // Facebook 2010's fixer: a failure reads as a bad value, and the key is deleted.
          command(() => cluster.remove(key)).catch(() => {});
          return then('error', 'origin');
        }
        if (outcome instanceof QueryError) return then('error', 'origin');
        if (fill) command(() => cluster.set(key, textOf(outcome), ttlMs)).catch(() => {});
        then(outcome.valid ? 'ok' : 'invalid', 'origin');
      });
    };
    return (key, _priority, then) => {
      count.cache.requests++;
      if (breaker?.isOpen(clock.now()) === true) return load(key, false, then);
      void get(pool, key).then((text) => {
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
 * damper's cache tier on nodes: each server runs its own `Cache` (the
 * in-process tier, `processEntries` keys) over the nodes as its shared tier
 * (leases, the store's timeout and breaker, the bus), with `options(i)`:
 * the lab's, under the configuration's `cache(i)`. At the start the nodes
 * hold every key in damper's own envelopes, written by a `Cache` of their
 * own (steady-state.ts), and each server holds `processEntries` of them,
 * those an LRU of that size would hold (steady-state.ts's `held`). `options(i, shared)` must keep `shared`'s
 * store and namespace.
 */
export function damperCacheNodes(clock: VirtualClock, db: DatabaseAccess, cluster: CacheCluster, shape: CacheShape, servers: number, options: (server: number, shared: { readonly store: SharedBackend; readonly namespace: string }) => CacheOptions<Row>): DataTier & { readonly caches: readonly Cache<Row>[] } {
  const namespace = 'lab';
  const size = shape.nodes!.connections;
  // Each server's client to the nodes, through a pool of its own when the scenario gives one.
  const store = (): SharedBackend => (size === undefined ? cluster : new PooledBackend(cluster, new CommandPool(size)));
  const caches = Array.from({ length: servers }, (_, i) => new Cache<Row>(options(i, { store: store(), namespace })));
  const reads = caches.map((cache, i) => damperRead(clock, cache, queried(db.server(i))));
  return {
    caches,
    reader: (server) => reads[server]!,
    flush: () => cluster.flush(),
    // Written through server 0's cache: the nodes and its bus tell the others. An invalid row is refused by validation, and the last known good stays.
    push: (key, row) => void caches[0]!.set(key, row).catch(() => {}),
    async prewarm(keys, row, freshMs, seed) {
      const freshness = keys.keys.map(() => freshMs());
      const steady = await steadyState(cluster, { ttlMs: shape.ttlS * 1000, staleForMs: shape.staleForS * 1000 }, namespace, keys.keys, freshness, row);
      await Promise.all(caches.map((cache, i) => cache.restore(held(steady, shape.processEntries, keys, seed, i))));
    },
  };
}
