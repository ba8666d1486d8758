import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { Cache, type LoaderContext } from '../src/index.js';
import { RedisStore } from '../src/stores/redis.js';
import { type RedisServer, startRedis } from './support/redis-server.js';

// Invalidation by tag on a real redis-server: two caches, each with its own
// connections (two processes as Redis sees them). The rule is a safety rule,
// so it holds whatever the machine's speed: no step waits for "long enough".

/** A value that says when its data was read: the step at which it was set, or its load started. */
interface Versioned {
  readonly bornAt: number;
  readonly tags: readonly string[];
}

interface Invalidation {
  readonly at: number;
  readonly tags: readonly string[];
}

/** Whether `value`, served fresh, breaks the rule: one of its tags was invalidated by a call begun after its data was read. */
function invalidatedSinceBorn(value: Versioned, known: readonly Invalidation[]): boolean {
  return known.some((inv) => inv.at > value.bornAt && inv.tags.some((t) => value.tags.includes(t)));
}

type Step =
  | { readonly op: 'set'; readonly p: number; readonly key: number; readonly tags: readonly string[] }
  | { readonly op: 'get'; readonly p: number; readonly key: number; readonly tags: readonly string[]; readonly loadMs: number }
  | { readonly op: 'invalidate'; readonly p: number; readonly tags: readonly string[] }
  | { readonly op: 'pause'; readonly ms: number };

const TAGS = ['a', 'b', 'c'];
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ op: fc.constant('set' as const), p: fc.nat(1), key: fc.nat(3), tags: fc.subarray(TAGS) }),
  { arbitrary: fc.record({ op: fc.constant('get' as const), p: fc.nat(1), key: fc.nat(3), tags: fc.subarray(TAGS), loadMs: fc.integer({ min: 0, max: 15 }) }), weight: 3 },
  fc.record({ op: fc.constant('invalidate' as const), p: fc.nat(1), tags: fc.subarray(TAGS, { minLength: 1 }) }),
  fc.record({ op: fc.constant('pause' as const), ms: fc.integer({ min: 0, max: 10 }) }),
);

describe('invalidation by tag on a real redis-server', () => {
  let redis: RedisServer;
  let run = 0;
  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    await redis.stop();
  });

  /** Two caches on one namespace, each with its own store (connections), buses up. */
  async function two(options: { ttl: number; staleFor: number }): Promise<{ caches: Cache<Versioned>[]; close: () => Promise<void> }> {
    const namespace = `tags${++run}`;
    const stores = [0, 1].map(() => new RedisStore({ connection: { host: '127.0.0.1', port: redis.port } }));
    const caches = stores.map((store) => new Cache<Versioned>({ ...options, ttlJitter: 0, earlyRefresh: 0, shared: { store, namespace } }));
    // Each hears its own heartbeat: both subscriptions are live.
    while (!caches.every((c) => c.stats().shared?.busUp === true)) await sleep(5);
    return {
      caches,
      close: async () => {
        await Promise.all(caches.map((c) => c.close()));
        await Promise.all(stores.map((s) => s.close()));
      },
    };
  }

  test('a value set before its tag was invalidated is never served fresh after invalidateTags resolves (property, two processes)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 30 }), async (steps) => {
        const { caches, close } = await two({ ttl: 5_000, staleFor: 60_000 });
        try {
          const own: Invalidation[][] = [[], []];
          const sent: Invalidation[][] = [[], []];
          // A process knows its own resolved calls, and the other's once they reached it: the bus has latency, the store none.
          const told = (p: number): Invalidation[] => [...own[p]!, ...sent[1 - p]!.slice(0, caches[p]!.stats().shared?.tagInvalidationsHeard ?? 0)];
          const pending: Promise<unknown>[] = [];
          let now = 0;
          for (const [i, s] of steps.entries()) {
            now = i;
            if (s.op === 'pause') await sleep(s.ms);
            else if (s.op === 'set') await caches[s.p]!.set(`k${s.key}`, { bornAt: i, tags: s.tags }, { tags: [...s.tags] });
            else if (s.op === 'invalidate') {
              const inv = { at: i, tags: s.tags };
              sent[s.p]!.push(inv);
              await caches[s.p]!.invalidateTags([...s.tags]);
              own[s.p]!.push(inv);
            } else {
              const cache = caches[s.p]!;
              const known = told(s.p);
              const loader = async (c: LoaderContext<Versioned>): Promise<Versioned> => {
                const bornAt = now;
                c.setTags([...s.tags]);
                await sleep(s.loadMs);
                return { bornAt, tags: s.tags };
              };
              const before = cache.stats().hits;
              const value = cache.get(`k${s.key}`, loader);
              if (cache.stats().hits > before) {
                const v = await value;
                assert.ok(!invalidatedSinceBorn(v, known), `step ${i}: process ${s.p} served k${s.key} ${JSON.stringify(v)} fresh after ${JSON.stringify(known)}`);
              } else pending.push(value);
            }
          }
          await Promise.all(pending);
        } finally {
          await close();
        }
      }),
      { numRuns: 25, seed: 2028 },
    );
  });

  test('a process that never held the value reads it from Redis after the invalidation as stale, and refreshes it once', async () => {
    const { caches, close } = await two({ ttl: 60_000, staleFor: 600_000 });
    const [a, b] = caches as [Cache<Versioned>, Cache<Versioned>];
    try {
      await a.set('post', { bornAt: 0, tags: ['author'] }, { tags: ['author'] });
      // Read through b once, then dropped from its memory: b's next read goes to Redis.
      assert.equal((await b.get('post', () => ({ bornAt: -1, tags: [] }))).bornAt, 0);
      b.clear();
      await a.invalidateTags(['author']);
      // A load within a few ms of the mark is judged stale too (the check errs that way by a round trip): keep this one clearly after.
      await sleep(20);
      let loads = 0;
      const got = await b.get('post', () => (loads++, { bornAt: 1, tags: ['author'] }));
      assert.deepEqual([got.bornAt, loads], [1, 1]);
      // And a, which invalidated it, serves its copy stale and refreshes from what b stored.
      const fromA = await a.get('post', () => ({ bornAt: 2, tags: [] }));
      assert.equal(fromA.bornAt, 0, 'a serves its last known good while it refreshes');
      while ((await a.get('post', () => ({ bornAt: 2, tags: [] }))).bornAt === 0) await sleep(5);
      assert.equal((await a.get('post', () => ({ bornAt: 3, tags: [] }))).bornAt, 1, 'the refresh found b\u2019s value in Redis: no second load');
    } finally {
      await close();
    }
  });
});
