import { resolve } from 'node:path';
/**
 * One adapter per library under test, all behind the same two-method shape so
 * every scenario drives them identically. Each adapter's `get` is its own
 * function literal (not a shared wrapper), so V8 keeps a separate, monomorphic
 * call site per library.
 *
 * damper is imported from its TypeScript source (`../src/index.js`, run through
 * tsx), not from `dist/`.
 */
import { readFileSync } from 'node:fs';
import { cachified, type CacheEntry } from '@epic-web/cachified';
import { createCache as createDedupeCache } from 'async-cache-dedupe';
import { BentoCache, bentostore } from 'bentocache';
import { memoryDriver } from 'bentocache/drivers/memory';
import { createCache as createCacheManager } from 'cache-manager';
import { LRUCache } from 'lru-cache';
import { Cache, type LoaderContext } from '../src/index.js';

/** What every loader returns: a small object, cached by reference where the library allows it. */
export interface Value {
  readonly key: string;
  readonly n: number;
}

/** The origin: the scenario counts calls to it and decides whether it succeeds. */
export type Load = (key: string) => Promise<Value>;

/** One configured cache instance. */
export interface Subject {
  get(key: string): Promise<Value | undefined>;
  close(): Promise<void>;
}

export interface SubjectOptions {
  /** Freshness of a loaded value, ms. */
  readonly ttlMs: number;
  /**
   * Turn on the library's documented protections for a failing origin
   * (stale-if-error, grace periods, fail-safe backoff). damper always runs on
   * its defaults: this flag changes nothing for it.
   */
  readonly protective: boolean;
}

export interface Peer {
  /** Display name. */
  readonly name: string;
  /** npm package the adapter exercises (for the version in the report). */
  readonly pkg: string;
  /** Human-readable configuration, for the report and docs/benchmarks.md. */
  settings(o: SubjectOptions): string;
  create(load: Load, o: SubjectOptions): Subject;
}

/** Long enough that no value goes stale during a scenario that asks for protection. */
const STALE_MS = 300_000;
/** Room for the 1000 hit-path keys, with no eviction anywhere. */
const MAX_ITEMS = 10_000;

const noClose = (): Promise<void> => Promise.resolve();

export const damper: Peer = {
  name: 'damper',
  pkg: 'damper',
  settings: ({ ttlMs }) => `new Cache({ ttl: ${ttlMs} }) — defaults otherwise (staleFor 300 s, backoff 100 ms ×2 up to 30 s ±20 %, 64 concurrent loads)`,
  create(load, { ttlMs }) {
    const cache = new Cache<Value>({ ttl: ttlMs });
    const loader = (ctx: LoaderContext<Value>): Promise<Value> => load(ctx.key);
    return { get: (key) => cache.get(key, loader), close: noClose };
  },
};

const lruProtection = { allowStale: true, noDeleteOnStaleGet: true, noDeleteOnFetchRejection: true, allowStaleOnFetchRejection: true, allowStaleOnFetchAbort: true } as const;

export const lruCache: Peer = {
  name: 'lru-cache fetch',
  pkg: 'lru-cache',
  settings: ({ ttlMs, protective }) =>
    `new LRUCache({ max: ${MAX_ITEMS}, ttl: ${ttlMs}, fetchMethod${protective ? ', allowStale, noDeleteOnStaleGet, noDeleteOnFetchRejection, allowStaleOnFetchRejection, allowStaleOnFetchAbort' : ''} }); cache.fetch(key)`,
  create(load, { ttlMs, protective }) {
    const lru = new LRUCache<string, Value>({
      max: MAX_ITEMS,
      ttl: ttlMs,
      fetchMethod: (key) => load(key),
      ...(protective ? lruProtection : {}),
    });
    return { get: (key) => lru.fetch(key), close: noClose };
  },
};

export const asyncCacheDedupe: Peer = {
  name: 'async-cache-dedupe',
  pkg: 'async-cache-dedupe',
  settings: ({ ttlMs, protective }) =>
    `createCache({ ttl: ${toSeconds(ttlMs)}${protective ? `, stale: ${STALE_MS / 1000}` : ''}, storage: { type: 'memory', options: { size: ${MAX_ITEMS} } } }).define('load', fn); cache.load(key)`,
  create(load, { ttlMs, protective }) {
    const cache = createDedupeCache({
      ttl: toSeconds(ttlMs),
      ...(protective ? { stale: STALE_MS / 1000 } : {}),
      storage: { type: 'memory', options: { size: MAX_ITEMS } },
    }).define('load', (key: string) => load(key));
    return { get: (key) => cache.load(key), close: noClose };
  },
};

export const cacheManager: Peer = {
  name: 'cache-manager',
  pkg: 'cache-manager',
  settings: ({ ttlMs, protective }) =>
    `createCache({ ttl: ${ttlMs}${protective ? `, refreshThreshold: ${ttlMs / 2}` : ''} }) (default store: one in-memory Keyv over a Map, serialization off); cache.wrap(key, fn)`,
  create(load, { ttlMs, protective }) {
    const cache = createCacheManager({ ttl: ttlMs, ...(protective ? { refreshThreshold: ttlMs / 2 } : {}) });
    return { get: (key) => cache.wrap(key, thunk(load, key)), close: () => cache.disconnect().then(() => undefined) };
  },
};

export const cachifiedPeer: Peer = {
  name: 'cachified',
  pkg: '@epic-web/cachified',
  settings: ({ ttlMs, protective }) =>
    `cachified({ key, cache: new LRUCache({ max: ${MAX_ITEMS} }), getFreshValue, ttl: ${ttlMs}${protective ? `, staleWhileRevalidate: ${STALE_MS}, fallbackToCache: true` : ''} })`,
  create(load, { ttlMs, protective }) {
    const lru = new LRUCache<string, CacheEntry>({ max: MAX_ITEMS });
    // Two literals rather than a spread of optional settings on every call.
    const get = protective
      ? (key: string): Promise<Value> => cachified<Value>({ key, cache: lru, ttl: ttlMs, getFreshValue: thunk(load, key), staleWhileRevalidate: STALE_MS, fallbackToCache: true })
      : (key: string): Promise<Value> => cachified<Value>({ key, cache: lru, ttl: ttlMs, getFreshValue: thunk(load, key) });
    return { get, close: noClose };
  },
};

export const bentocache: Peer = {
  name: 'bentocache',
  pkg: 'bentocache',
  settings: ({ ttlMs, protective }) =>
    `new BentoCache({ default: 'memory', stores: { memory: bentostore().useL1Layer(memoryDriver({ maxItems: ${MAX_ITEMS}, serialize: false })) }, ttl: ${ttlMs}${protective ? `, grace: ${STALE_MS}, graceBackoff: 10000, timeout: 200` : ''} }); bento.getOrSet({ key, factory })`,
  create(load, { ttlMs, protective }) {
    const bento = new BentoCache({
      default: 'memory',
      stores: { memory: bentostore().useL1Layer(memoryDriver({ maxItems: MAX_ITEMS, serialize: false })) },
      ttl: ttlMs,
      ...(protective ? { grace: STALE_MS, graceBackoff: 10_000, timeout: 200 } : {}),
    });
    return { get: (key) => bento.getOrSet<Value>({ key, factory: thunk(load, key) }), close: () => bento.disconnect() };
  },
};

/** Every library, damper first, in the order the report lists them. */
export const peers: readonly Peer[] = [damper, lruCache, asyncCacheDedupe, cacheManager, cachifiedPeer, bentocache];

/**
 * `() => load(key)`, for APIs whose loader takes no key. Made here rather than
 * inline: tsx compiles with esbuild's keepNames, which would wrap an arrow
 * written as `{ factory: () => … }` in a per-call `__name(…)` (a
 * defineProperty) and bill the library for it.
 */
function thunk(load: Load, key: string): () => Promise<Value> {
  return () => load(key);
}

/** async-cache-dedupe takes whole seconds. */
function toSeconds(ms: number): number {
  return Math.max(1, Math.round(ms / 1000));
}

/** Installed version of a package (damper: this repo's own). */
export function versionOf(pkg: string): string {
  const url = pkg === 'damper' ? resolve('package.json') : resolve('node_modules', pkg, 'package.json');
  return (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
}
