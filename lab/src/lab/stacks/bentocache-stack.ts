import { BentoCache, bentostore } from 'bentocache';
import { memoryDriver } from 'bentocache/drivers/memory';
import { type CachePeer, type CachePlan, type PeerCache, type PeerSetting, scaledWords } from './stack.js';

/**
 * bentocache 1 as a server's in-process cache (one level: its memory
 * driver, an LRU), read with `getOrSet` as its docs set up resilience:
 * `ttl` the scenario's, a grace period (off by default; the docs' "Grace
 * periods" page turns it on) of the scenario's stale window, so a failed
 * factory answers the last value, and its `graceBackoff` default (10 s)
 * before the factory is tried again for that key; its soft `timeout` default
 * (0: a graced value is answered at once while the factory runs on) and no
 * hard timeout (its default: the loader times itself out at the scenario's
 * load timeout). Its stampede protection (one factory per key) is its own.
 * Durations are divided by the fitting's time scale. Its L2, its bus and
 * its L2 circuit breaker need a shared tier, which the in-process scenarios
 * do not have.
 */

const GRACE = 'bentocache docs, "Grace periods" (grace, graceBackoff: default 10s)';
const TIMEOUTS = 'bentocache docs, "Timeouts" (timeout: default 0, hardTimeout: default none)';

/** bentocache's own default wait before a failed factory is tried again, ms. */
const GRACE_BACKOFF_MS = 10_000;

export const bentocache: CachePeer = {
  name: 'bentocache',
  settings: (plan) => settings(plan),
  cache: <V extends object>(plan: CachePlan) => cache<V>(plan),
};

function settings(plan: CachePlan): readonly PeerSetting[] {
  return [
    { name: 'store', value: `bentostore().useL1Layer(memoryDriver({ maxItems: ${plan.maxEntries} }))`, source: 'bentocache docs, "Cache drivers": Memory' },
    { name: 'read', value: 'getOrSet({ key, factory }) with a factory that loads and validates (one factory per key: its stampede protection)', source: 'bentocache docs, "Methods": getOrSet; "Stampede protection"' },
    { name: 'ttl', value: `${plan.ttlMs / 1000} s (the scenario's)`, source: 'bentocache docs, "Options": ttl' },
    { name: 'grace', value: `${plan.staleForMs / 1000} s (the scenario's stale window)`, source: GRACE },
    { name: 'graceBackoff', value: `${scaledWords(GRACE_BACKOFF_MS, plan.timeScale)} (its default)`, source: GRACE },
    { name: 'timeout, hardTimeout', value: '0 and none (its defaults)', source: TIMEOUTS },
  ];
}

function cache<V extends object>(plan: CachePlan): PeerCache<V> {
  const bento = new BentoCache({
    default: 'memory',
    ttl: plan.ttlMs,
    grace: plan.staleForMs,
    graceBackoff: GRACE_BACKOFF_MS / plan.timeScale,
    stores: { memory: bentostore().useL1Layer(memoryDriver({ maxItems: plan.maxEntries })) },
  });
  return {
    get: (key, load) => bento.getOrSet<V>({ key, factory: () => load(new AbortController().signal) }),
    set: async (key, value, ttlMs) => void (await bento.set({ key, value, ttl: ttlMs })),
    clear: () => bento.clear(),
    close: () => bento.disconnectAll(),
  };
}
