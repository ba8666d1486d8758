import { LRUCache } from 'lru-cache';
import { type CachePeer, type CachePlan, type PeerCache, type PeerSetting } from './stack.js';

/**
 * lru-cache 11's `fetch` as a read-through cache, as its README sets up
 * "stale while revalidate on failure": a `fetchMethod` (the user's loader),
 * `ttl` the scenario's, `allowStaleOnFetchRejection` so that a failed load
 * answers the value it was to replace and keeps it (it implies
 * `noDeleteOnFetchRejection`). Concurrent fetches of a key share one load
 * (lru-cache's own). `allowStale` stays off, its default: a read of an
 * expired value waits for the load. lru-cache has no stale window of its
 * own: an expired entry stays until it is evicted or replaced. Its ttl
 * clock is `performance.now()`, virtual in a simulation.
 */

const README = 'lru-cache README, "Options": fetchMethod, ttl, allowStaleOnFetchRejection (implies noDeleteOnFetchRejection), max';

export const lruCache: CachePeer = {
  name: 'lru-cache',
  settings: (plan) => settings(plan),
  cache: <V extends object>(plan: CachePlan) => cache<V>(plan),
};

function settings(plan: CachePlan): readonly PeerSetting[] {
  return [
    { name: 'read', value: 'cache.fetch(key) with a fetchMethod that loads and validates (coalesced per key: lru-cache’s own)', source: README },
    { name: 'ttl', value: `${plan.ttlMs / 1000} s (the scenario's)`, source: README },
    { name: 'allowStaleOnFetchRejection', value: 'true: a failed load answers the value it was to replace, and keeps it', source: README },
    { name: 'allowStale', value: 'false (its default): an expired value is not served while it loads', source: README },
    { name: 'max', value: `${plan.maxEntries} entries (every key)`, source: README },
  ];
}

type Load<V> = (signal: AbortSignal) => Promise<V>;

function cache<V extends object>(plan: CachePlan): PeerCache<V> {
  const lru = new LRUCache<string, V, Load<V>>({
    max: plan.maxEntries,
    ttl: plan.ttlMs,
    allowStaleOnFetchRejection: true,
    fetchMethod: (_key, _stale, { signal, context }) => context(signal),
  });
  const set = async (key: string, value: V, ttlMs: number): Promise<void> => void lru.set(key, value, { ttl: ttlMs });
  return {
    get: async (key, load) => {
      const value = await lru.fetch(key, { context: load });
      // lru-cache resolves a fetch it aborted (a `set` or a `clear` of the key while it ran) to undefined: no value, a failed read.
      if (value === undefined) throw new Error(`lru-cache: the fetch of ${key} was aborted`);
      return value;
    },
    set,
    prime: set,
    clear: async () => lru.clear(),
    close: async () => lru.clear(),
  };
}
