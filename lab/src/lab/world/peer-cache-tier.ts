import { type Clock } from 'damper';
import { type CachePeer, type CachePlan, type PeerCache } from '../stacks/stack.js';
import { type Row } from './database.js';
import { type CacheNodesClient } from './cache-nodes.js';
import { OriginWaits, queried, type RowOrigin } from './origin-waits.js';
import { type CacheShape, type DatabaseAccess, type DataTier, eachKey } from './service-data.js';
import { heldKeys } from './steady-state.js';
import { type DataRead } from './service-server.js';

/**
 * The servers' in-process cache made by a peer library (issue 31):
 * lru-cache, bentocache or cache-manager in damper's place, read through
 * with the peer's own get-or-load, one for the tier (`scope: tier`) or one
 * per server, a restart's new process starting with an empty one (none of
 * them warms). Every peer gets the same loader, the one a user writes: the
 * query (given up on at the scenario's load timeout) and a check of the
 * row, so that an invalid value is a failed load, as damper's `validate`
 * makes it. The write path's push is a plain `set`: a peer validates
 * nothing it is given. One composition for the simulation and a real run's
 * server (real/server-data.ts), as `inProcessTier`.
 */

/** An invalid row from the database, as the user's loader rejects it. */
export class InvalidRowError extends Error {
  constructor(readonly key: string) {
    super(`invalid value of ${key} from the database`);
  }
}

export function peerCacheTier(clock: Clock, shape: CacheShape, servers: number, origin: { server(i: number): RowOrigin; readonly tier: RowOrigin }, peer: CachePeer, plan: CachePlan): DataTier {
  const own = shape.scope === 'server' ? servers : 1;
  const caches: PeerCache<Row>[] = Array.from({ length: own }, () => peer.cache<Row>(plan));
  const reads = caches.map((_, i) => peerRead(clock, () => caches[i]!, shape.scope === 'server' ? origin.server(i) : origin.tier, plan.loadTimeoutMs));
  const ownOf = (server: number): number => (shape.scope === 'server' ? server : 0);
  return {
    reader: (server) => reads[ownOf(server)]!,
    flush: () => caches.forEach((c) => void c.clear()),
    push: (key, row) => caches.forEach((c) => void c.set(key, row, plan.ttlMs)),
    restart(server) {
      if (shape.scope !== 'server') return;
      void caches[server]!.close();
      caches[server] = peer.cache<Row>(plan);
    },
    close: () => caches.forEach((c) => void c.close()),
    prewarm: async (keys, row, freshMs) => {
      for (const c of caches) await eachKey(keys.keys, row, freshMs, (key, r, ms) => c.prime(key, r, ms));
    },
  };
}

/**
 * A peer's cache of two levels on the lab's nodes (discord-2019's
 * `cache.nodes`; bentocache and cache-manager): each server in `servers`
 * holds its own, its memory (`processEntries` keys) in front of the nodes,
 * reached through the server's own client to them (`connectionOf`, as
 * naive's and damper's), loading from the database alone. The steady state
 * is written at no cost to the nodes, as damper's: every key on the nodes,
 * through a peer cache of the nodes' own, and each server holding in
 * memory the keys an LRU of its size holds (steady-state.ts's `heldKeys`,
 * the draw damper's servers use). One composition for the simulation and
 * a real run's server (real/server-data.ts).
 */
export function peerCacheNodes(clock: Clock, db: DatabaseAccess, cluster: CacheNodesClient, shape: CacheShape, servers: readonly number[], peer: CachePeer, plan: CachePlan, connectionOf: (server: number) => CacheNodesClient = () => cluster): DataTier {
  const caches = servers.map((id) => peer.cache<Row>(plan, connectionOf(id)));
  const reads = caches.map((cache, k) => peerRead(clock, () => cache, queried(db.server(servers[k]!)), plan.loadTimeoutMs));
  return {
    reader: (server) => reads[server]!,
    flush: () => cluster.flush(),
    // The write path's SET, through server 0's cache: the nodes, and its bus where it has one, tell the others.
    push: (key, row) => void caches[0]!.set(key, row, plan.ttlMs).catch(() => {}),
    close: () => caches.forEach((c) => void c.close()),
    async prewarm(keys, row, freshMs, seed) {
      const freshness = keys.keys.map(() => freshMs());
      await cluster.seed(async () => {
        const writer = peer.cache<Row>(plan, cluster);
        await Promise.all(keys.keys.map((key, i) => writer.prime(key, row(key), freshness[i]!)));
        await writer.close();
        await Promise.all(
          caches.map(async (cache, k) => {
            const mine = heldKeys(shape.processEntries, keys, seed, servers[k]!);
            await Promise.all(keys.keys.map((key, i) => (mine === undefined || mine.has(key) ? cache.prime(key, row(key), freshness[i]!) : undefined)));
          }),
        );
      });
    },
  };
}

/**
 * A server's read through a peer's cache (`cacheOf()`: the one it holds
 * now, a restart's new one included), with the loader a user writes for
 * it: the query from `origin` within the load timeout, the row checked, so
 * that an invalid value is a failed load, as damper's `validate` makes it.
 */
function peerRead(clock: Clock, cacheOf: () => PeerCache<Row>, origin: RowOrigin, loadTimeoutMs: number): DataRead {
  const waits = new OriginWaits(clock);
  const loader = origin(waits);
  const load = (key: string) => async (): Promise<Row> => {
    const stop = new AbortController();
    const timer = clock.setTimer(() => stop.abort(), loadTimeoutMs);
    try {
      const row = await loader({ key, signal: stop.signal });
      if (!row.valid) throw new InvalidRowError(key);
      return row;
    } finally {
      timer.cancel();
    }
  };
  return (key, _priority, then) => {
    const since = clock.now();
    const source = () => (waits.waited(key, since) ? 'origin' : 'cache');
    cacheOf()
      .get(key, load(key))
      .then(
        (row) => then(row.valid ? 'ok' : 'invalid', source()),
        () => then('error', source()),
      );
  };
}

/** What a peer's cache is told of the scenario's cache (stacks/stack.ts, `CachePlan`). */
export function cachePlan(shape: CacheShape, keyCount: number, knobs: CachePlan['knobs'], timeScale: number): CachePlan {
  // On nodes, a server's memory holds `processEntries` keys, as damper's in-process tier there (damperNodeOptions).
  const nodes = shape.nodes === undefined ? {} : { nodes: { breakerOpenMs: shape.naive.breaker?.openMs } };
  return { ttlMs: shape.ttlS * 1000, staleForMs: shape.staleForS * 1000, loadTimeoutMs: shape.loadTimeoutMs, maxEntries: Math.max(1, shape.processEntries ?? keyCount + 1), ...nodes, knobs, timeScale };
}
