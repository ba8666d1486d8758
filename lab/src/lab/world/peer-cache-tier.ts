import { type Clock } from 'damper';
import { type CachePeer, type CachePlan, type PeerCache } from '../stacks/stack.js';
import { type Row } from './database.js';
import { OriginWaits, type RowOrigin } from './origin-waits.js';
import { type CacheShape, type DataTier, eachKey } from './service-data.js';
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
  const waits = Array.from({ length: own }, () => new OriginWaits(clock));
  const loaders = waits.map((w, i) => (shape.scope === 'server' ? origin.server(i) : origin.tier)(w));
  const read = (i: number): DataRead => {
    // The user's loader: the query within the load timeout, the row checked.
    const load = (key: string) => async (): Promise<Row> => {
      const stop = new AbortController();
      const timer = clock.setTimer(() => stop.abort(), plan.loadTimeoutMs);
      try {
        const row = await loaders[i]!({ key, signal: stop.signal });
        if (!row.valid) throw new InvalidRowError(key);
        return row;
      } finally {
        timer.cancel();
      }
    };
    return (key, _priority, then) => {
      const since = clock.now();
      const source = () => (waits[i]!.waited(key, since) ? 'origin' : 'cache');
      caches[i]!.get(key, load(key)).then(
        (row) => then(row.valid ? 'ok' : 'invalid', source()),
        () => then('error', source()),
      );
    };
  };
  const reads = caches.map((_, i) => read(i));
  const ownOf = (server: number): number => (shape.scope === 'server' ? server : 0);
  return {
    reader: (server) => (key, priority, then) => reads[ownOf(server)]!(key, priority, then),
    flush: () => caches.forEach((c) => void c.clear()),
    push: (key, row) => caches.forEach((c) => void c.set(key, row, plan.ttlMs)),
    restart(server) {
      if (shape.scope !== 'server') return;
      void caches[server]!.close();
      caches[server] = peer.cache<Row>(plan);
    },
    close: () => caches.forEach((c) => void c.close()),
    prewarm: async (keys, row, freshMs) => {
      for (const c of caches) await eachKey(keys.keys, row, freshMs, (key, r, ms) => c.set(key, r, ms));
    },
  };
}

/** What a peer's cache is told of the scenario's cache (stacks/stack.ts, `CachePlan`). */
export function cachePlan(shape: CacheShape, keyCount: number, knobs: CachePlan['knobs'], timeScale: number): CachePlan {
  return { ttlMs: shape.ttlS * 1000, staleForMs: shape.staleForS * 1000, loadTimeoutMs: shape.loadTimeoutMs, maxEntries: keyCount + 1, knobs, timeScale };
}
