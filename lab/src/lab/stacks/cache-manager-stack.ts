import { createCache } from 'cache-manager';
import { Keyv } from 'keyv';
import { LRUCache } from 'lru-cache';
import { nodesKeyvStore } from './nodes-drivers.js';
import { type CachePeer, type CachePlan, type PeerCache, type PeerRemote, type PeerSetting } from './stack.js';

/**
 * cache-manager 7 as a server's in-process cache, as its README's "Quick
 * start" makes one: `createCache` over its default store (Keyv in memory),
 * read with `wrap(key, loader, ttl)`, the scenario's ttl. `wrap` shares one
 * call of the loader among concurrent reads of a key (cache-manager's own
 * coalescing). It keeps no stale value: once a value expires, a failed load
 * is the read's failure. `refreshThreshold` (a refresh ahead of expiry) is
 * off, its default.
 *
 * A cache on nodes (discord-2019) gets the README's two layers: an LRU in
 * memory (its lru-cache example: `processEntries` items) in front of Keyv
 * over the nodes (its `@keyv/redis` example; a Keyv store over the ring,
 * nodes-drivers.ts). `wrap` reads the layers in order, and after a load
 * waits for the value to be written to both (`nonBlocking` off, its
 * default). A failed call to the nodes is a miss (Keyv's `throwOnErrors`
 * off, its default).
 */

const README = 'cache-manager README, "Quick start" and "wrap" (ttl; refreshThreshold off by default)';
const LAYERS = 'cache-manager README, "Quick start": layer 1 and layer 2 (Keyv over @keyv/redis); "Using CacheableMemory or lru-cache as storage adapter"';

export const cacheManager: CachePeer = {
  name: 'cache-manager',
  settings: (plan) => settings(plan),
  cache: <V extends object>(plan: CachePlan, remote?: PeerRemote) => cache<V>(plan, remote),
};

function settings(plan: CachePlan): readonly PeerSetting[] {
  const stores: readonly PeerSetting[] =
    plan.nodes === undefined
      ? [{ name: 'store', value: 'createCache() over its default store (Keyv in memory)', source: README }]
      : [
          { name: 'stores', value: `createCache({ stores: [new Keyv({ store: new LRUCache({ max: ${plan.maxEntries} }) }), new Keyv({ store: the nodes })] })`, source: LAYERS },
          { name: 'layer 2', value: 'GET, SET PX, DEL on the ring’s client to each node, as @keyv/redis sends them (no command timeout); a failed call is a miss (Keyv throwOnErrors: false, its default)', source: `${LAYERS}; Keyv docs, "Storage adapters"` },
          { name: 'nonBlocking', value: 'false (its default): a read after a load waits for both layers’ writes', source: 'cache-manager README, "Options": nonBlocking' },
        ];
  return [
    ...stores,
    { name: 'read', value: 'wrap(key, loader, ttl) with a loader that loads and validates (coalesced per key: cache-manager’s own)', source: README },
    { name: 'ttl', value: `${plan.ttlMs / 1000} s (the scenario's)`, source: README },
    { name: 'stale on error', value: 'none: cache-manager has no option for it', source: README },
  ];
}

/**
 * How many caches this process has made: each one's `cacheId`. cache-manager
 * coalesces `wrap` in a map of its utilities' module, shared by every cache
 * in the process and keyed by `cacheId` and key, and draws a cache's id from
 * `Math.random` when none is given. In a simulation that is the run's seeded
 * random: the next run in the same process (a sweep's worker, `damper lab`
 * over several scenarios) drew the same ids, and its reads of a key joined
 * a load the last run left unsettled at its end, for ever. A process that
 * runs one service holds no other run's caches; an id of its own keeps a
 * run's coalescing its own.
 */
let made = 0;

function cache<V extends object>(plan: CachePlan, remote: PeerRemote | undefined): PeerCache<V> {
  const cacheId = `lab-cache-${++made}`;
  const manager = remote === undefined ? createCache({ ttl: plan.ttlMs, cacheId }) : createCache({ ttl: plan.ttlMs, cacheId, stores: [new Keyv({ store: new LRUCache<string, string>({ max: plan.maxEntries }) }), new Keyv({ store: nodesKeyvStore(remote) })] });
  const set = async (key: string, value: V, ttlMs: number): Promise<void> => void (await manager.set(key, value, ttlMs));
  return {
    get: (key, load) => manager.wrap<V>(key, () => load(new AbortController().signal), plan.ttlMs),
    set,
    // cache-manager has no bus: a set tells no other process.
    prime: set,
    clear: async () => void (await manager.clear()),
    close: async () => void (await manager.disconnect()),
  };
}
