import { BentoCache, bentostore } from 'bentocache';
import { memoryDriver } from 'bentocache/drivers/memory';
import { type CachePeer, type CachePlan, type PeerCache, type PeerRemote, type PeerSetting, scaledWords } from './stack.js';
import { nodesBus, nodesDriver } from './nodes-drivers.js';

/**
 * bentocache 1 as a server's cache, read with `getOrSet` as its docs set up
 * resilience: `ttl` the scenario's, a grace period (off by default; the
 * docs' "Grace periods" page turns it on) of the scenario's stale window,
 * so a failed factory answers the last value, and its `graceBackoff`
 * default (10 s) before the factory is tried again for that key; its soft
 * `timeout` default (0: a graced value is answered at once while the
 * factory runs on) and no hard timeout (its default: the loader times
 * itself out at the scenario's load timeout). Its stampede protection (one
 * factory per key) is its own. Durations it brings are divided by the
 * fitting's time scale.
 *
 * In-process scenarios get its memory driver alone (an LRU). A cache on
 * nodes (discord-2019) gets its docs' "Multi tier" setup: the memory
 * driver as L1 (`processEntries` items), the nodes as L2, and a bus over
 * the nodes' pub/sub to keep the L1s in step; its L2 errors suppressed
 * (its default with an L1) and its L2 circuit breaker (off by default; the
 * issue asks for it) open for as long as the system's breaker in front of
 * the cache stays open (`cache.naive.breaker.openMs`), or `l2breaker=MS`
 * (0: off).
 */

const GRACE = 'bentocache docs, "Grace periods" (grace, graceBackoff: default 10s)';
const TIMEOUTS = 'bentocache docs, "Timeouts" (timeout: default 0, hardTimeout: default none)';
const MULTI_TIER = 'bentocache docs, "Multi tier": useL1Layer(memoryDriver), useL2Layer(redisDriver), useBus(redisBusDriver)';
const OPTIONS = 'bentocache docs, "Options"';

/** bentocache's own default wait before a failed factory is tried again, ms. */
const GRACE_BACKOFF_MS = 10_000;
/** Its bus's default wait before it sends again what it failed to publish, ms (bentocache's Bus: `retryInterval ?? 2e3`). */
const BUS_RETRY_MS = 2_000;

export const bentocache: CachePeer = {
  name: 'bentocache',
  settings: (plan) => settings(plan),
  cache: <V extends object>(plan: CachePlan, remote?: PeerRemote) => cache<V>(plan, remote),
};

/**
 * Its soft timeout, ms: 0 (its default) answers a graced value at once and
 * refreshes behind it; the knob `timeout=MS` waits that long for the
 * factory first. Measured (docs/lab.md, discord-2019): at 0 a background
 * refresh that fails applies no `graceBackoff`, so every read of a graced
 * key starts another; with a soft timeout the refresh runs in the read's
 * foreground path, whose failure does apply it.
 */
function softTimeoutMs(plan: CachePlan): number {
  return plan.knobs.timeout ?? 0;
}

/** How long its L2 breaker stays open, ms (undefined: off): the knob, else the system's breaker's. */
function l2BreakerMs(plan: CachePlan): number | undefined {
  const ms = plan.knobs.l2breaker ?? plan.nodes?.breakerOpenMs;
  return ms === undefined || ms === 0 ? undefined : ms;
}

function settings(plan: CachePlan): readonly PeerSetting[] {
  const own: PeerSetting[] = [
    { name: 'read', value: 'getOrSet({ key, factory }) with a factory that loads and validates (one factory per key: its stampede protection)', source: 'bentocache docs, "Methods": getOrSet; "Stampede protection"' },
    { name: 'ttl', value: `${plan.ttlMs / 1000} s (the scenario's)`, source: `${OPTIONS}: ttl` },
    { name: 'grace', value: `${plan.staleForMs / 1000} s (the scenario's stale window)`, source: GRACE },
    { name: 'graceBackoff', value: `${scaledWords(GRACE_BACKOFF_MS, plan.timeScale)} (its default)`, source: GRACE },
    { name: 'timeout, hardTimeout', value: `${softTimeoutMs(plan) === 0 ? '0 (its default)' : `${softTimeoutMs(plan)} ms (the knob timeout)`} and none (its default)`, source: TIMEOUTS },
  ];
  if (plan.nodes === undefined) return [{ name: 'store', value: `bentostore().useL1Layer(memoryDriver({ maxItems: ${plan.maxEntries} }))`, source: 'bentocache docs, "Cache drivers": Memory' }, ...own];
  const breaker = l2BreakerMs(plan);
  return [
    { name: 'store', value: `bentostore().useL1Layer(memoryDriver({ maxItems: ${plan.maxEntries} })).useL2Layer(the nodes).useBus(the nodes' pub/sub)`, source: MULTI_TIER },
    { name: 'L2 driver', value: 'GET, SET PX (ttl + grace), DEL on the ring’s client to each node, as its redisDriver sends them on one ioredis connection (ioredis defaults: no command timeout)', source: 'bentocache docs, "Cache drivers": Redis; "Extend": custom cache driver' },
    { name: 'bus', value: `on the nodes' pub/sub, its retry queue on (its default), retried every ${scaledWords(BUS_RETRY_MS, plan.timeScale)}`, source: `${MULTI_TIER}; "Bus": retry queue` },
    { name: 'suppressL2Errors', value: 'true (its default with an L1): a failed L2 call is a miss', source: `${OPTIONS}: suppressL2Errors` },
    {
      name: 'l2CircuitBreakerDuration',
      value: breaker === undefined ? 'off (its default)' : `${breaker / 1000} s (${plan.knobs.l2breaker === undefined ? "the system's breaker in front of the cache, cache.naive.breaker.openMs" : 'the knob l2breaker'})`,
      source: `${OPTIONS}: l2CircuitBreakerDuration (default: off)`,
    },
    ...own,
  ];
}

function cache<V extends object>(plan: CachePlan, remote: PeerRemote | undefined): PeerCache<V> {
  const l1 = bentostore().useL1Layer(memoryDriver({ maxItems: plan.maxEntries }));
  const store = remote === undefined ? l1 : l1.useL2Layer(nodesDriver(remote)).useBus(nodesBus(remote, BUS_RETRY_MS / plan.timeScale));
  const breaker = remote === undefined ? undefined : l2BreakerMs(plan);
  const bento = new BentoCache({
    default: 'cache',
    ttl: plan.ttlMs,
    grace: plan.staleForMs,
    graceBackoff: GRACE_BACKOFF_MS / plan.timeScale,
    timeout: softTimeoutMs(plan),
    ...(breaker === undefined ? {} : { l2CircuitBreakerDuration: breaker }),
    stores: { cache: store },
  });
  return {
    get: (key, load) => bento.getOrSet<V>({ key, factory: () => load(new AbortController().signal) }),
    set: async (key, value, ttlMs) => void (await bento.set({ key, value, ttl: ttlMs })),
    prime: async (key, value, ttlMs) => void (await bento.set({ key, value, ttl: ttlMs, skipBusNotify: true })),
    clear: () => bento.clear(),
    close: () => bento.disconnectAll(),
  };
}
