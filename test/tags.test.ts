import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ArgumentError, Cache, type CacheOptions, ConfigError, InMemorySharedStore, type LoaderContext, SharedTierError, sleep, VirtualClock } from '../src/index.js';
import { decodeEnvelope, encodeEnvelope } from '../src/stores/envelope.js';
import { track } from './helpers.js';

// Invalidation by tag (docs/cache.md, "Tags"): an invalidated value is stale,
// not deleted, in this process and, through the shared tier, in every other.

function setup<V>(options: CacheOptions<V> = {}): { clock: VirtualClock; cache: Cache<V> } {
  const clock = new VirtualClock({ seed: 1 });
  const cache = new Cache<V>({ ttlJitter: 0, earlyRefresh: 0, ttl: 60_000, staleFor: 600_000, clock, ...options });
  return { clock, cache };
}

/** Awaits `p`, moving virtual time on while it waits (a shared store answers only as the clock moves). */
async function within<T>(clock: VirtualClock, p: Promise<T>): Promise<T> {
  const t = track(p);
  for (let i = 0; i < 10_000 && !t.settled; i++) await clock.advance(1);
  return p;
}

/** A get that was a fresh hit from memory: the hit counter moved inside the call, before any await. */
function getCounted<V>(cache: Cache<V>, key: string, loader: (c: LoaderContext<V>) => Promise<V> | V): { fresh: boolean; value: Promise<V> } {
  const before = cache.stats().hits;
  const value = cache.get(key, loader);
  return { fresh: cache.stats().hits > before, value };
}

describe('an invalidated value is stale, not deleted', () => {
  test('set with tags, invalidateTags: the old value is served stale once while one refresh runs, then the new one fresh', async () => {
    const { clock, cache } = setup<string>();
    await cache.set('post:1', 'v1', { tags: ['author:7'] });
    await cache.set('post:2', 'other', { tags: ['author:8'] });
    await cache.set('post:3', 'untagged');
    const stale: string[] = [];
    cache.on('stale', (e) => stale.push(`${e.key}:${e.reason}`));
    assert.equal(await cache.invalidateTags(['author:7']), 1);
    let loads = 0;
    const loader = async (): Promise<string> => (loads++, await sleep(clock, 10), 'v2');
    assert.equal(await cache.get('post:1', loader), 'v1');
    assert.deepEqual(stale, ['post:1:revalidate']);
    // Readers meanwhile share the one refresh.
    for (let i = 0; i < 100; i++) assert.equal(await cache.get('post:1', loader), 'v1');
    await clock.advance(10);
    assert.equal(await cache.get('post:1', loader), 'v2');
    assert.equal(loads, 1);
    // Other tags and untagged values are untouched.
    assert.equal(getCounted(cache, 'post:2', loader).fresh, true);
    assert.equal(getCounted(cache, 'post:3', loader).fresh, true);
  });

  test('a loaded value carries the call’s tags, or the ones its loader sets', async () => {
    const { cache } = setup<string>();
    await cache.get('a', () => 'A', { tags: ['t1'] });
    await cache.get('b', (c) => (c.setTags(['t2', 't2']), 'B'), { tags: ['t1'] });
    assert.equal(await cache.invalidateTags(['t1']), 1);
    assert.equal(getCounted(cache, 'a', () => 'A2').fresh, false);
    assert.equal(getCounted(cache, 'b', () => 'B2').fresh, true);
    assert.equal(await cache.invalidateTags(['t2']), 1);
    assert.equal(getCounted(cache, 'b', () => 'B2').fresh, false);
  });

  test('a load in flight when its tag is invalidated stores its value stale: it may have read the origin before', async () => {
    const { clock, cache } = setup<string>();
    let n = 0;
    const loader = async (): Promise<string> => (n++, await sleep(clock, 100), `v${n}`);
    const first = track(cache.get('k', loader, { tags: ['t'] }));
    await clock.advance(50);
    await cache.invalidateTags(['t']);
    await clock.advance(50);
    assert.equal(first.value, 'v1');
    const next = getCounted(cache, 'k', loader);
    assert.equal(next.fresh, false);
    assert.equal(await next.value, 'v1', 'served stale while the refresh runs');
    await clock.advance(100);
    assert.equal(getCounted(cache, 'k', loader).fresh, true);
    assert.equal(n, 2);
  });

  test('with no stale window the next read waits for the one load; the key is not removed first', async () => {
    const { clock, cache } = setup<string>({ staleFor: 0 });
    await cache.set('k', 'v1', { tags: ['t'] });
    await cache.invalidateTags(['t']);
    let loads = 0;
    const gets = Array.from({ length: 50 }, () => track(cache.get('k', async () => (loads++, await sleep(clock, 5), 'v2'))));
    await clock.advance(5);
    assert.ok(gets.every((g) => g.value === 'v2'));
    assert.equal(loads, 1);
  });

  test('a key backing off after failures keeps its backoff: invalidation is no reason to hit a failing origin', async () => {
    const { clock, cache } = setup<string>({ ttl: 100 });
    await cache.set('k', 'v1', { tags: ['t'] });
    await clock.advance(100);
    let loads = 0;
    const failing = async (): Promise<string> => {
      loads++;
      throw new Error('db down');
    };
    assert.equal(await cache.get('k', failing), 'v1');
    await clock.settle();
    assert.equal(loads, 1);
    await cache.invalidateTags(['t']);
    for (let i = 0; i < 10; i++) assert.equal(await cache.get('k', failing), 'v1');
    assert.equal(loads, 1);
  });

  test('replaced, deleted and evicted values leave the index: invalidateTags counts only what it made stale', async () => {
    const { cache } = setup<string>({ maxEntries: 2 });
    await cache.set('a', 'A', { tags: ['t'] });
    await cache.set('a', 'A2', { tags: ['u'] });
    assert.equal(await cache.invalidateTags(['t']), 0);
    await cache.set('b', 'B', { tags: ['t'] });
    await cache.delete('b');
    await cache.set('c', 'C', { tags: ['t'] });
    await cache.set('d', 'D', { tags: ['t'] });
    await cache.set('e', 'E', { tags: ['t'] }); // evicts 'c' (two entries held)
    assert.equal(await cache.invalidateTags(['t']), 2);
    assert.equal(await cache.invalidateTags(['t']), 0, 'already stale');
  });

  test('a snapshot keeps tags: a restored value is still found by invalidateTags', async () => {
    const { cache } = setup<string>();
    await cache.set('k', 'v', { tags: ['t'] });
    const snapshot = JSON.parse(JSON.stringify(cache.snapshot()));
    assert.deepEqual(snapshot.entries[0].tags, ['t']);
    const { cache: restarted } = setup<string>();
    await restarted.restore(snapshot);
    assert.equal(await restarted.invalidateTags(['t']), 1);
    assert.equal(getCounted(restarted, 'k', () => 'v2').fresh, false);
  });
});

/** Two processes sharing an in-memory store, in virtual time, buses up. */
async function pair(options: CacheOptions<string> = {}): Promise<{ clock: VirtualClock; store: InMemorySharedStore; a: Cache<string>; b: Cache<string> }> {
  const clock = new VirtualClock({ seed: 9 });
  const store = new InMemorySharedStore({ clock, latencyMs: 1 });
  const make = (): Cache<string> => new Cache<string>({ clock, ttl: 60_000, staleFor: 600_000, ttlJitter: 0, earlyRefresh: 0, ...options, shared: { store } });
  const pair = { clock, store, a: make(), b: make() };
  await clock.advance(20);
  return pair;
}

describe('through the shared tier: every process, and the store itself', () => {
  test('a value read from the store after its tag was invalidated is stale there: the reader refreshes it, once', async () => {
    const { clock, store, a, b } = await pair();
    await within(clock, a.set('k', 'v1', { tags: ['t'] }));
    await within(clock, a.invalidateTags(['t']));
    // b never held the key, and has not heard the message yet: only the store can tell it.
    let loads = 0;
    const got = await within(clock, b.get('k', async () => (loads++, 'v2')));
    assert.equal(got, 'v2');
    assert.equal(loads, 1);
    assert.equal(store.calls.tagAge, 2, 'one look at the tag per read of the key (the lease holder reads it twice)');
    await a.close();
    await b.close();
  });

  test('a value held by another process goes stale as the message arrives; a lost message is found at the sender’s next heartbeat', async () => {
    const { clock, store, a, b } = await pair();
    await within(clock, a.set('k1', 'v1', { tags: ['t'] }));
    await within(clock, a.set('k2', 'v1', { tags: ['u'] }));
    assert.equal(await within(clock, b.get('k1', () => 'x')), 'v1');
    assert.equal(await within(clock, b.get('k2', () => 'x')), 'v1');
    assert.equal(getCounted(b, 'k1', () => 'x').fresh, true);
    await within(clock, a.invalidateTags(['t']));
    await clock.advance(5);
    assert.equal(b.stats().shared?.tagInvalidationsHeard, 1);
    assert.equal(getCounted(b, 'k1', () => 'x').fresh, false);
    assert.equal(getCounted(b, 'k2', () => 'x').fresh, true);
    // Now the message is lost (a subscriber that was cut): b learns of the hole by a's numbering.
    store.dropMessages = true;
    await within(clock, a.invalidateTags(['u']));
    await clock.advance(5);
    store.dropMessages = false;
    assert.equal(getCounted(b, 'k2', () => 'x').fresh, true, 'not heard yet');
    const gaps: string[] = [];
    b.on('bus', (e) => gaps.push(e.cause));
    await clock.advance(1_000); // a's next heartbeat carries its number
    assert.deepEqual(gaps, ['missed']);
    assert.equal(getCounted(b, 'k2', () => 'x').fresh, false);
    await a.close();
    await b.close();
  });

  test('the store unreachable: the caller learns it, its own values are stale all the same, and a tagged value the store cannot vouch for is not a hit', async () => {
    const { clock, store, a, b } = await pair();
    await within(clock, a.set('k', 'v1', { tags: ['t'] }));
    store.outage = 'error';
    await assert.rejects(within(clock, a.invalidateTags(['t'])), SharedTierError);
    assert.equal(getCounted(a, 'k', () => 'x').fresh, false);
    await clock.advance(5_000);
    store.outage = 'none';
    // b reads the value, but the tag's age cannot be read: stale, refreshed.
    const original = store.tagAge.bind(store);
    store.tagAge = () => Promise.reject(new Error('tag lookup refused'));
    let loads = 0;
    assert.equal(await within(clock, b.get('k', async () => (loads++, 'v2'))), 'v2');
    assert.equal(loads, 1);
    store.tagAge = original;
    await a.close();
    await b.close();
  });

  test('a store that estimates a value’s lifetime reports its error, and the check allows for it: a mark 5 ms after a set, read with a lifetime 20 ms long, is still stale', async () => {
    const clock = new VirtualClock({ seed: 6 });
    const store = new InMemorySharedStore({ clock, latencyMs: 1 });
    // As RedisStore's 'server-clock' freshness can: the remaining lifetime read 20 ms too long, within the error it reports.
    const estimating = (errorMs: number): InMemorySharedStore =>
      Object.assign(Object.create(store) as InMemorySharedStore, {
        read: async (key: string) => {
          const r = await store.read(key);
          return r === undefined ? undefined : { value: r.value, ttlMs: r.ttlMs + 20, ttlErrorMs: errorMs };
        },
      });
    const writer = new Cache<string>({ clock, ttl: 60_000, ttlJitter: 0, shared: { store } });
    await clock.advance(20);
    await within(clock, writer.set('k', 'v1', { tags: ['t'] }));
    await clock.advance(5);
    await within(clock, writer.invalidateTags(['t']));
    for (const [errorMs, loads] of [[25, 1], [0, 0]] as const) {
      const reader = new Cache<string>({ clock, ttl: 60_000, ttlJitter: 0, shared: { store: estimating(errorMs) } });
      await clock.advance(20);
      let n = 0;
      await within(clock, reader.get('k', async () => (n++, 'v2')));
      // Without the allowance the estimate hides the mark: the value set before it reads as fresh.
      assert.equal(n, loads, `error reported: ${errorMs} ms`);
      await reader.close();
    }
    await writer.close();
  });

  test('a tagged value lives in the store no longer than the tag records (tagRetention)', async () => {
    const clock = new VirtualClock({ seed: 4 });
    const store = new InMemorySharedStore({ clock, latencyMs: 1 });
    const cache = new Cache<string>({ clock, ttl: 60_000, staleFor: 600_000, ttlJitter: 0, shared: { store, tagRetention: 30_000 } });
    await clock.advance(20);
    await within(clock, cache.set('tagged', 'v', { tags: ['t'] }));
    await within(clock, cache.set('plain', 'v'));
    const tagged = await within(clock, store.read('default:tagged'));
    const plain = await within(clock, store.read('default:plain'));
    assert.ok(tagged !== undefined && tagged.ttlMs <= 30_000, `tagged lives ${tagged?.ttlMs} ms`);
    assert.ok(plain !== undefined && plain.ttlMs > 600_000, `plain lives ${plain?.ttlMs} ms`);
    await cache.close();
  });
});

describe('bad input: a clear error, nothing lost', () => {
  test('tags that are not an array of non-empty strings are refused before anything changes', async () => {
    const { cache } = setup<string>();
    await cache.set('k', 'v', { tags: ['t'] });
    for (const bad of [undefined, null, 't', [''], [1], ['x'.repeat(1_025)]]) {
      await assert.rejects(cache.invalidateTags(bad as string[]), ArgumentError);
      if (bad !== undefined) await assert.rejects(cache.set('k', 'other', { tags: bad as string[] }), ConfigError);
    }
    await assert.rejects(cache.invalidateTags(new Array(1_001).fill('x')), ArgumentError);
    await assert.rejects(cache.set('k', 'other', { tags: new Array(33).fill('x').map((x, i) => x + i) }), ConfigError);
    await assert.rejects(cache.get('new', () => 'x', { tags: [7] as unknown as string[] }), ConfigError);
    await assert.rejects(
      cache.get('new2', (c) => (c.setTags('t' as unknown as string[]), 'x')),
      ArgumentError,
    );
    assert.equal(cache.peek('new2'), undefined, 'a loader whose setTags threw stored nothing');
    assert.equal(getCounted(cache, 'k', () => 'x').fresh, true);
    assert.equal(await cache.get('k', () => 'x'), 'v');
    assert.equal(await cache.invalidateTags([]), 0);
  });

  test('a tagged envelope from the store is untrusted bytes: a bad tag list is corrupt, never a value', () => {
    const text = encodeEnvelope({ n: 1 }, 500, 12.2, { tags: ['a', 'b|c'], lifeMs: 1_500 });
    assert.deepEqual(decodeEnvelope(text, 1_000), { ok: true, envelope: { value: { n: 1 }, staleFor: 500, loadMs: 13, tags: ['a', 'b|c'], lifeMs: 1_500 } });
    assert.equal(decodeEnvelope(encodeEnvelope(undefined, 5, 0, { tags: ['t'], lifeMs: 9 }), 100).ok, true);
    const tags = (json: string): string => `d2|500|1|1500|${json.length}|${json}{}`;
    for (const bad of [tags('{}'), tags('[]'), tags('[1]'), tags('[""]'), tags('"a"'), tags('[a]'), tags(JSON.stringify(new Array(33).fill('t'))), 'd2|500|1|1500|99|["a"]{}', 'd2|500|1|1500|x|["a"]{}', 'd2|500|1|1500']) {
      assert.deepEqual(decodeEnvelope(bad, 10_000), { ok: false, reason: 'header' }, bad);
    }
    assert.deepEqual(decodeEnvelope(`${tags('["a"]').slice(0, -2)}{"__proto__":{"polluted":1}}`, 1_000).ok, true);
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
  });

  test('a tag message on the bus that is not a list of tags is ignored', async () => {
    const clock = new VirtualClock({ seed: 3 });
    const store = new InMemorySharedStore({ clock, latencyMs: 1 });
    const cache = new Cache<string>({ clock, ttlJitter: 0, shared: { store } });
    await clock.advance(20);
    await within(clock, cache.set('k', 'v', { tags: ['t'] }));
    for (const body of ['not json', '{}', '[]', '[1]', '[""]', '"t"']) void store.publish('default', `tforeign:1|${body}`);
    await clock.advance(20);
    assert.equal(getCounted(cache, 'k', () => 'x').fresh, true);
    await cache.close();
  });
});

describe('no stampede: invalidating a tag on 100,000 hot keys', () => {
  test('each key is refreshed at most once, within the origin budget, and every read is answered', async () => {
    const KEYS = 100_000;
    const LIMIT = 16;
    const clock = new VirtualClock({ seed: 5 });
    const cache = new Cache<number>({ clock, ttl: 3_600_000, staleFor: 3_600_000, ttlJitter: 0, earlyRefresh: 0, maxEntries: KEYS, maxConcurrentLoads: LIMIT });
    for (let i = 0; i < KEYS; i++) await cache.set(`k${i}`, 1, { tags: ['catalogue'] });
    const loads = new Uint8Array(KEYS);
    let inFlight = 0;
    let peak = 0;
    const loader = async ({ key }: { key: string }): Promise<number> => {
      loads[Number(key.slice(1))]!++;
      peak = Math.max(peak, ++inFlight);
      await sleep(clock, 2);
      inFlight--;
      return 2;
    };
    assert.equal(await cache.invalidateTags(['catalogue']), KEYS);
    // The stampede moment: every key read at once. Then hot traffic: 1,000 keys read every 100 ms for 4 s.
    const burst = await Promise.all(Array.from({ length: KEYS }, (_, i) => cache.get(`k${i}`, loader)));
    assert.ok(burst.every((v) => v === 1), 'every reader of the burst got the last known good value at once');
    let answered = 0;
    for (let tick = 0; tick < 40; tick++) {
      await clock.advance(100);
      const reads = Array.from({ length: 1_000 }, () => cache.get(`k${Math.floor(clock.random() * KEYS)}`, loader));
      answered += (await Promise.all(reads)).filter((v) => v === 1 || v === 2).length;
    }
    assert.equal(answered, 40_000);
    assert.ok(peak <= LIMIT, `peak concurrent loads ${peak}, budget ${LIMIT}`);
    assert.equal(Math.max(...loads), 1, 'no key loaded twice');
    assert.ok(cache.stats().loads > LIMIT, 'refreshes went on after the burst');
    assert.equal(await cache.get('k0', loader), 2);
  });
});

/** One step of the property tests' random histories. */
type Step =
  | { readonly op: 'set'; readonly key: number; readonly tags: readonly string[] }
  | { readonly op: 'get'; readonly key: number; readonly tags: readonly string[]; readonly loadMs: number }
  | { readonly op: 'invalidate'; readonly tags: readonly string[] }
  | { readonly op: 'advance'; readonly ms: number };

const TAGS = ['a', 'b', 'c'];
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ op: fc.constant('set' as const), key: fc.nat(4), tags: fc.subarray(TAGS) }),
  fc.record({ op: fc.constant('get' as const), key: fc.nat(4), tags: fc.subarray(TAGS), loadMs: fc.integer({ min: 0, max: 40 }) }),
  fc.record({ op: fc.constant('invalidate' as const), tags: fc.subarray(TAGS, { minLength: 1 }) }),
  fc.record({ op: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 60 }) }),
);

/** A value that says when its data was read: the step at which it was set, or its load started. */
interface Versioned {
  readonly bornAt: number;
  readonly tags: readonly string[];
}

/**
 * Whether a value served fresh at some point after `invalidations` resolved
 * breaks the rule: one of its tags was invalidated by a call that began
 * after the value's data was read.
 */
function servedFreshAfterInvalidation(value: Versioned, invalidations: readonly { readonly at: number; readonly tags: readonly string[] }[]): boolean {
  return invalidations.some((inv) => inv.at > value.bornAt && inv.tags.some((t) => value.tags.includes(t)));
}

describe('a value set before its tag was invalidated is never served fresh after invalidateTags resolves', () => {
  test('one process (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 60 }), async (steps) => {
        const clock = new VirtualClock({ seed: 11 });
        const cache = new Cache<Versioned>({ clock, ttl: 200, staleFor: 1_000, ttlJitter: 0, earlyRefresh: 0 });
        const resolved: { at: number; tags: readonly string[] }[] = [];
        const pending: Promise<unknown>[] = [];
        let now = 0;
        for (const [i, s] of steps.entries()) {
          now = i;
          if (s.op === 'set') await cache.set(`k${s.key}`, { bornAt: i, tags: s.tags }, { tags: [...s.tags] });
          else if (s.op === 'invalidate') {
            const at = i;
            pending.push(cache.invalidateTags([...s.tags]).then(() => void resolved.push({ at, tags: s.tags })));
          } else if (s.op === 'advance') await clock.advance(s.ms);
          else {
            const known = [...resolved];
            const loader = async (c: LoaderContext<Versioned>): Promise<Versioned> => {
              // The data is read when the loader starts, which may be a later step than the get's.
              const bornAt = now;
              c.setTags([...s.tags, 'x']);
              await sleep(clock, s.loadMs);
              return { bornAt, tags: [...s.tags, 'x'] };
            };
            const got = getCounted(cache, `k${s.key}`, loader);
            if (got.fresh) {
              const value = await got.value;
              assert.ok(!servedFreshAfterInvalidation(value, known), `step ${i}: k${s.key} born at ${value.bornAt} with [${value.tags}] served fresh after ${JSON.stringify(known)}`);
            } else pending.push(got.value.catch(() => {}));
          }
          await Promise.resolve();
        }
        await clock.advance(100);
        await Promise.all(pending);
      }),
      { numRuns: 300, seed: 2026 },
    );
  });

  test('two processes sharing a store, in virtual time (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.nat(1), step), { minLength: 1, maxLength: 50 }), async (steps) => {
        const clock = new VirtualClock({ seed: 13 });
        const store = new InMemorySharedStore({ clock, latencyMs: 1 });
        const caches = [0, 1].map(() => new Cache<Versioned>({ clock, ttl: 200, staleFor: 1_000, ttlJitter: 0, earlyRefresh: 0, shared: { store } }));
        await clock.advance(20);
        // What each process has been told: its own resolved calls, and the other's once they reached it (the bus's latency).
        const own: { at: number; tags: readonly string[] }[][] = [[], []];
        const sent: { at: number; tags: readonly string[] }[][] = [[], []];
        const pending: Promise<unknown>[] = [];
        const told = (p: number): { at: number; tags: readonly string[] }[] => [...own[p]!, ...sent[1 - p]!.slice(0, caches[p]!.stats().shared?.tagInvalidationsHeard ?? 0)];
        let now = 0;
        for (const [i, [p, s]] of steps.entries()) {
          const cache = caches[p]!;
          now = i;
          if (s.op === 'set') await within(clock, cache.set(`k${s.key}`, { bornAt: i, tags: s.tags }, { tags: [...s.tags] }));
          else if (s.op === 'invalidate') {
            const inv = { at: i, tags: s.tags };
            sent[p]!.push(inv);
            pending.push(cache.invalidateTags([...s.tags]).then(() => void own[p]!.push(inv)));
          } else if (s.op === 'advance') await clock.advance(s.ms);
          else {
            const known = told(p);
            const loader = async (c: LoaderContext<Versioned>): Promise<Versioned> => {
              const bornAt = now;
              c.setTags([...s.tags]);
              await sleep(clock, s.loadMs);
              return { bornAt, tags: s.tags };
            };
            const got = getCounted(cache, `k${s.key}`, loader);
            const value = got.value.catch(() => undefined);
            if (got.fresh) {
              const v = await value;
              assert.ok(v !== undefined && !servedFreshAfterInvalidation(v, known), `step ${i}: process ${p} served k${s.key} ${JSON.stringify(v)} fresh after ${JSON.stringify(known)}`);
            } else pending.push(value);
          }
          await clock.advance(0);
        }
        await clock.advance(500);
        await Promise.all(pending);
        await Promise.all(caches.map((c) => c.close()));
      }),
      { numRuns: 150, seed: 2027 },
    );
  });
});
