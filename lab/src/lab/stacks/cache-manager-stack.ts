import { createCache } from 'cache-manager';
import { type CachePeer, type CachePlan, type PeerCache, type PeerSetting } from './stack.js';

/**
 * cache-manager 7 as a server's in-process cache, as its README's "Quick
 * start" makes one: `createCache` over its default store (Keyv in memory),
 * read with `wrap(key, loader, ttl)`, the scenario's ttl. `wrap` shares one
 * call of the loader among concurrent reads of a key (cache-manager's own
 * coalescing). It keeps no stale value: once a value expires, a failed load
 * is the read's failure. `refreshThreshold` (a refresh ahead of expiry) is
 * off, its default.
 */

const README = 'cache-manager README, "Quick start" and "wrap" (ttl; refreshThreshold off by default)';

export const cacheManager: CachePeer = {
  name: 'cache-manager',
  settings: (plan) => settings(plan),
  cache: <V extends object>(plan: CachePlan) => cache<V>(plan),
};

function settings(plan: CachePlan): readonly PeerSetting[] {
  return [
    { name: 'store', value: 'createCache() over its default store (Keyv in memory)', source: README },
    { name: 'read', value: 'wrap(key, loader, ttl) with a loader that loads and validates (coalesced per key: cache-manager’s own)', source: README },
    { name: 'ttl', value: `${plan.ttlMs / 1000} s (the scenario's)`, source: README },
    { name: 'stale on error', value: 'none: cache-manager has no option for it', source: README },
  ];
}

function cache<V extends object>(plan: CachePlan): PeerCache<V> {
  const manager = createCache({ ttl: plan.ttlMs });
  return {
    get: (key, load) => manager.wrap<V>(key, () => load(new AbortController().signal), plan.ttlMs),
    set: async (key, value, ttlMs) => void (await manager.set(key, value, ttlMs)),
    clear: async () => void (await manager.clear()),
    close: async () => void (await manager.disconnect()),
  };
}
