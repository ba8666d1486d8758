import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Cache, type CacheOptions, ConfigError, InMemorySharedStore, LeaseBackoffError, LoadTimeoutError, SharedTierError, sleep, VirtualClock } from '../src/index.js';
import { decodeEnvelope, encodeEnvelope } from '../src/stores/envelope.js';
import { hangingSchema, track } from './helpers.js';

// The shared tier's logic (leases, bus, fail-closed rules) in virtual time,
// over the in-process backend: several Cache instances stand for several
// processes. The same logic runs against a real redis-server in
// test/shared-redis.test.ts and test/chaos.test.ts.

interface Cluster {
  clock: VirtualClock;
  store: InMemorySharedStore;
  caches: Cache<string>[];
  loads: { n: number; byKey: Map<string, number> };
  close(): Promise<void>;
}

function cluster(processes: number, options: CacheOptions<string> = {}, latencyMs = 1): Cluster {
  const clock = new VirtualClock({ seed: 7 });
  const store = new InMemorySharedStore({ clock, latencyMs });
  const caches = Array.from({ length: processes }, () => new Cache<string>({ clock, ttl: 10_000, staleFor: 60_000, earlyRefresh: 0, ttlJitter: 0, ...options, shared: { ...options.shared, store } }));
  return { clock, store, caches, loads: { n: 0, byKey: new Map() }, close: async () => void (await Promise.all(caches.map((c) => c.close()))) };
}

/** A loader taking `ms` of virtual time, counted. */
function origin(c: Cluster, ms: number, value: (key: string) => string | Promise<string> = (k) => `v:${k}`) {
  return async ({ key }: { key: string }): Promise<string> => {
    c.loads.n++;
    c.loads.byKey.set(key, (c.loads.byKey.get(key) ?? 0) + 1);
    await sleep(c.clock, ms);
    return value(key);
  };
}

/** Runs virtual time forward in small steps (heartbeats keep the timer queue busy forever). */
async function run(c: Cluster, ms: number, step = 5): Promise<void> {
  const end = c.clock.now() + ms;
  while (c.clock.now() < end) await c.clock.advance(Math.min(step, end - c.clock.now()));
}

describe('shared tier: leases', () => {
  test('8 processes × 1,000 concurrent gets of one cold key: one loader call in the cluster', async () => {
    const c = cluster(8);
    await run(c, 50); // buses up
    const loader = origin(c, 40);
    const gets = c.caches.flatMap((cache) => Array.from({ length: 1_000 }, () => track(cache.get('cold', loader))));
    await run(c, 500);
    assert.equal(c.loads.n, 1);
    assert.ok(gets.every((g) => g.settled && g.value === 'v:cold'));
    // Every process now answers from memory or the shared tier, never the origin.
    for (const cache of c.caches) assert.equal(await cache.get('cold', loader), 'v:cold');
    assert.equal(c.loads.n, 1);
    await c.close();
  });

  test('a value loaded by one process is an L2 hit for the others, with the same remaining freshness', async () => {
    const c = cluster(2);
    await run(c, 50);
    const loader = origin(c, 10);
    const [a, b] = c.caches as [Cache<string>, Cache<string>];
    const first = track(a.get('k', loader));
    await run(c, 50);
    assert.equal(first.value, 'v:k');
    await run(c, 4_000);
    const second = track(b.get('k', loader));
    await run(c, 20);
    assert.equal(second.value, 'v:k');
    assert.equal(c.loads.n, 1);
    // 10 s of freshness were given at the fill; 4 s have passed: b refreshes at the same instant as a would.
    await run(c, 6_100);
    const refresh = track(b.get('k', loader));
    await run(c, 100);
    assert.equal(refresh.value, 'v:k'); // served stale while the refresh runs
    assert.equal(c.loads.n, 2);
    await c.close();
  });

  test('a delete invalidates the outstanding lease: a slow load cannot write back a value older than the delete', async () => {
    const c = cluster(2);
    await run(c, 50);
    const [a, b] = c.caches as [Cache<string>, Cache<string>];
    const slow = track(a.get('k', origin(c, 1_000, () => 'old')));
    await run(c, 100);
    await Promise.all([b.delete('k'), run(c, 1_500)]);
    assert.equal(slow.value, 'old'); // its caller still gets what it asked for
    // … but nobody stored it: the next read loads afresh.
    const fresh = track(b.get('k', origin(c, 10, () => 'new')));
    await run(c, 100);
    assert.equal(fresh.value, 'new');
    const fromA = track(a.get('k', origin(c, 10, () => 'wrong')));
    await run(c, 100);
    assert.equal(fromA.value, 'new');
    await c.close();
  });

  test('a holder that dies frees the lease when it expires; a waiter then loads', async () => {
    const c = cluster(1, { loadTimeout: 2_000 });
    await run(c, 50);
    // A process that took the lease and vanished.
    const grant = await Promise.all([c.store.acquire('default:k', 'dead.1', 1_000), run(c, 5)]);
    assert.equal(grant[0].granted, true);
    const get = track(c.caches[0]!.get('k', origin(c, 10)));
    await run(c, 900);
    assert.equal(get.settled, false);
    assert.equal(c.loads.n, 0);
    await run(c, 400);
    assert.equal(get.value, 'v:k');
    assert.equal(c.loads.n, 1);
    await c.close();
  });

  test('a caller waiting on a lease that is never filled gets LoadTimeoutError at its load timeout', async () => {
    const c = cluster(1, { loadTimeout: 500 });
    await run(c, 50);
    await Promise.all([c.store.acquire('default:k', 'stuck.1', 60_000), run(c, 5)]);
    const get = track(c.caches[0]!.get('k', origin(c, 10)));
    await run(c, 450);
    assert.equal(get.settled, false);
    await run(c, 100);
    assert.ok(get.error instanceof LoadTimeoutError, String(get.error));
    assert.equal(c.loads.n, 0);
    await c.close();
  });

  test('a failing key is loaded at most once per backoff step across the cluster, and the last known good is served everywhere', async () => {
    const c = cluster(4, { ttl: 1_000, staleFor: 600_000, validate: (v) => (v.startsWith('ok') ? true : 'row is invalid') });
    await run(c, 50);
    let good = true;
    const loader = origin(c, 5, () => (good ? 'ok:1' : 'garbage'));
    const first = track(c.caches[0]!.get('cfg', loader));
    await run(c, 50);
    assert.equal(first.value, 'ok:1');
    good = false;
    const loadsBefore = c.loads.n;
    const served: string[] = [];
    // 60 s of steady reads from every process.
    for (let t = 0; t < 60_000; t += 50) {
      for (const cache of c.caches) void cache.get('cfg', loader).then((v) => served.push(v));
      await run(c, 50, 10);
    }
    assert.ok(served.length > 4_000);
    assert.ok(served.every((v) => v === 'ok:1'), 'only the last known good is served');
    // Backoff 100 ms doubling to 30 s (±20 %): 100+200+…+25 600 ≈ 51 s for 9 steps, then 30 s steps.
    const loads = c.loads.n - loadsBefore;
    assert.ok(loads >= 5 && loads <= 11, `loads of the bad key in 60 s: ${loads}`);
    await c.close();
  });
});

describe('shared tier: invalidation bus', () => {
  test('set and delete on one process reach the others within the bus latency', async () => {
    const c = cluster(3, {}, 2);
    await run(c, 50);
    const loader = origin(c, 5);
    for (const cache of c.caches) await Promise.all([cache.get('k', loader), run(c, 20)]);
    await Promise.all([c.caches[0]!.set('k', 'v2'), run(c, 10)]);
    await run(c, 10);
    for (const cache of c.caches) assert.equal(cache.peek('k'), cache === c.caches[0] ? 'v2' : undefined);
    const readB = track(c.caches[1]!.get('k', loader));
    await run(c, 20);
    assert.equal(readB.value, 'v2');
    await Promise.all([c.caches[2]!.delete('k'), run(c, 10)]);
    await run(c, 10);
    for (const cache of c.caches) assert.equal(cache.peek('k'), undefined);
    await c.close();
  });

  test('a process that lost the bus trusts memory for at most freshWithoutBus, then reads the shared tier again', async () => {
    const c = cluster(2, { ttl: 60_000, shared: { store: undefined as never, freshWithoutBus: 500, busTimeout: 3_000, heartbeat: 1_000 } });
    const [a, b] = c.caches as [Cache<string>, Cache<string>];
    const bus: boolean[] = [];
    const gaps: (number | undefined)[] = [];
    a.on('bus', (e) => (e.cause === 'heartbeat' ? bus.push(e.up) : gaps.push(e.missed)));
    await run(c, 50);
    assert.deepEqual(bus, [true]);
    const loader = origin(c, 5);
    await Promise.all([a.get('k', loader), run(c, 20)]);
    // Messages stop arriving while commands still work (a subscriber connection that died silently).
    c.store.dropMessages = true;
    await run(c, 2_000);
    await Promise.all([b.set('k', 'v2'), run(c, 10)]); // its message is lost
    assert.equal(a.peek('k'), 'v:k');
    // The loss is noticed within busTimeout + heartbeat; from then on memory is fresh for 500 ms at most.
    await run(c, 2_100);
    assert.deepEqual(bus, [true, false]);
    const noticedAt = c.clock.now();
    await run(c, 500);
    const read = track(a.get('k', loader));
    await run(c, 20);
    assert.equal(read.value, 'v:k', 'the old value is served stale while the shared tier is read');
    assert.equal(a.peek('k'), 'v2', 'and replaced by the current one');
    assert.ok(c.clock.now() - noticedAt <= 600);
    c.store.dropMessages = false;
    await run(c, 1_100);
    assert.deepEqual(bus, [true, false, true]);
    assert.deepEqual(gaps, [1], "b's next heartbeat shows the set a never got");
    assert.equal(c.loads.n, 1);
    await c.close();
  });

  test('a delete lost in a gap of a few ms is found at its sender\'s next heartbeat; from then the value is stale and checked against the shared tier', async () => {
    const c = cluster(2, { ttl: 60_000, shared: { store: undefined as never, heartbeat: 1_000 } });
    const [a, b] = c.caches as [Cache<string>, Cache<string>];
    const events: { cause: string; missed?: number; staled: number; at: number }[] = [];
    a.on('bus', (e) => events.push({ cause: e.cause, ...(e.missed === undefined ? {} : { missed: e.missed }), staled: e.staled, at: c.clock.now() }));
    await run(c, 50);
    let version = 1;
    const loader = async ({ key }: { key: string }): Promise<string> => {
      c.loads.n++;
      return `${key}@${version}`;
    };
    for (const key of ['k', 'other']) await Promise.all([a.get(key, loader), run(c, 20)]);
    await Promise.all([b.get('k', loader), run(c, 20)]);
    version = 2;
    // b's delete is lost: a's subscription is cut for the moment it takes.
    c.store.dropMessages = true;
    const deletedAt = c.clock.now();
    await Promise.all([b.delete('k'), run(c, 5)]);
    c.store.dropMessages = false;
    assert.equal(await a.get('k', loader), 'k@1', 'until the gap is found, the old value is fresh here: the bound stated in docs/shared-tier.md');
    await run(c, 1_050);
    const gap = events.find((e) => e.cause === 'missed');
    assert.ok(gap !== undefined, 'the hole in b\'s numbering was found');
    assert.equal(gap.missed, 1);
    assert.equal(gap.staled, 2, 'every value in memory was made stale');
    assert.ok(gap.at - deletedAt <= 1_000 + 10, `found ${gap.at - deletedAt} ms after the delete: within one heartbeat`);
    assert.equal(a.stats().shared?.busGaps, 1);
    const stale = a.stats().staleBy.revalidate;
    assert.equal(await a.get('k', loader), 'k@1', 'served stale once, while it is checked');
    assert.equal(a.stats().staleBy.revalidate, stale + 1);
    await run(c, 50);
    assert.equal(await a.get('k', loader), 'k@2', 'the shared tier had no value: loaded again');
    assert.equal(await a.get('other', loader), 'other@1', 'a key nobody changed is stale too, and confirmed by one read');
    await run(c, 50);
    assert.equal(a.stats().staleBy.revalidate, stale + 2);
    await c.close();
  });

  test('a subscription the store reports cut makes every value stale at once; the bus is down until this process hears itself again', async () => {
    const c = cluster(2, { ttl: 60_000 });
    const [a] = c.caches as [Cache<string>, Cache<string>];
    const events: string[] = [];
    a.on('bus', (e) => events.push(`${e.cause}:${e.up}`));
    await run(c, 50);
    const loader = origin(c, 5);
    await Promise.all([a.get('k', loader), run(c, 20)]);
    const reads = c.store.calls.read;
    c.store.interruptSubscriptions();
    await run(c, 5);
    assert.deepEqual(events, ['heartbeat:true', 'disconnect:false']);
    assert.equal(a.stats().shared?.busUp, false);
    assert.equal(await a.get('k', loader), 'v:k');
    await run(c, 20);
    assert.equal(c.store.calls.read, reads + 1, 'checked against the shared tier');
    await run(c, 1_000);
    assert.deepEqual(events, ['heartbeat:true', 'disconnect:false', 'heartbeat:true']);
    assert.equal(c.loads.n, 1, 'the shared tier had it: no load');
    await c.close();
  });

  test('a shared value whose read began before a gap was found is stored stale: it may predate the invalidation that was lost', async () => {
    const c = cluster(1, { ttl: 60_000 });
    const [a] = c.caches as [Cache<string>];
    await run(c, 50);
    await Promise.all([c.store.write('default:k', encodeEnvelope('shared', 60_000, 1), 120_000), run(c, 5)]);
    c.store.outage = 'hang';
    const read = track(a.get('k', origin(c, 5)));
    await run(c, 5);
    c.store.interruptSubscriptions();
    await run(c, 5);
    c.store.outage = 'none';
    await run(c, 5);
    assert.equal(read.value, 'shared');
    const stale = a.stats().staleBy.revalidate;
    assert.equal(await a.get('k', origin(c, 5)), 'shared');
    assert.equal(a.stats().staleBy.revalidate, stale + 1, 'not a fresh hit');
    await c.close();
  });

  test('a set whose message could not be sent: the others find the hole at this process\'s next heartbeat', async () => {
    const c = cluster(2, { ttl: 60_000 });
    const [a, b] = c.caches as [Cache<string>, Cache<string>];
    await run(c, 50);
    await Promise.all([a.get('k', origin(c, 5)), run(c, 20)]);
    const original = c.store.publish.bind(c.store);
    c.store.publish = () => Promise.reject(new Error('bus down'));
    const set = track(b.set('k', 'v2'));
    await run(c, 10);
    c.store.publish = original;
    assert.ok(set.error instanceof SharedTierError, 'the caller learns the others were not told');
    assert.equal(await a.get('k', origin(c, 5)), 'v:k');
    await run(c, 1_010);
    assert.equal(a.stats().shared?.busGaps, 1);
    assert.equal(await a.get('k', origin(c, 5)), 'v:k', 'stale, while checked');
    await run(c, 20);
    assert.equal(await a.get('k', origin(c, 5)), 'v2', 'the value b wrote to the shared tier');
    await c.close();
  });
});

describe('shared tier: a degraded store is never a reason to hit the origin harder', () => {
  test('store hung: keys with a value are served without error and without origin loads; a cold key loads once per process', async () => {
    const c = cluster(3, { ttl: 1_000, staleFor: 120_000 });
    await run(c, 50);
    const loader = origin(c, 5);
    const keys = Array.from({ length: 50 }, (_, i) => `k${i}`);
    for (const cache of c.caches) for (const k of keys) void cache.get(k, loader);
    await run(c, 200);
    const warmLoads = c.loads.n;
    assert.equal(warmLoads, keys.length);
    const errors: unknown[] = [];
    c.store.outage = 'hang';
    const loadsAtHang = c.loads.n;
    for (let t = 0; t < 10_000; t += 100) {
      for (const cache of c.caches) for (const k of keys) cache.get(k, loader).catch((e: unknown) => errors.push(e));
      await run(c, 100, 20);
    }
    assert.deepEqual(errors, []);
    assert.equal(c.loads.n, loadsAtHang, 'no origin load for keys that have a value');
    for (const cache of c.caches) void cache.get('cold', loader);
    await run(c, 1_000);
    assert.equal(c.loads.byKey.get('cold'), 3, 'one load per process for a key nobody has');
    // The store comes back: within a few seconds values come from it again.
    c.store.outage = 'none';
    await run(c, 4_000);
    const reads = c.store.calls.read;
    for (let t = 0; t < 2_000; t += 100) {
      for (const k of keys) void c.caches[0]!.get(k, loader);
      await run(c, 100, 20);
    }
    assert.ok(c.store.calls.read > reads, 'the shared tier is read again');
    await c.close();
  });

  for (const where of ['the store\'s stale value', 'this process\'s own value'] as const) {
    test(`the store stops answering right after granting the lease: a key with ${where} is not loaded`, async () => {
      const c = cluster(2, { ttl: 100, staleFor: 60_000, shared: { store: undefined as never, timeout: 100 } });
      const [a, b] = c.caches as [Cache<string>, Cache<string>];
      await run(c, 50);
      const loader = origin(c, 5);
      await Promise.all([a.get('k', loader), run(c, 20)]);
      assert.equal(c.loads.n, 1);
      // b has nothing of its own and finds the store's stale value; a has its own, and the store none.
      const reader = where === 'the store\'s stale value' ? b : a;
      if (reader === a) await Promise.all([c.store.remove('default:k'), run(c, 5)]);
      await run(c, 200); // fresh no more, here or in the store
      const acquire = c.store.acquire.bind(c.store);
      c.store.acquire = async (...args) => {
        const grant = await acquire(...args);
        c.store.outage = 'hang'; // the grant arrived; nothing after it does
        return grant;
      };
      const errors: unknown[] = [];
      for (let t = 0; t < 2_000; t += 50) {
        reader.get('k', loader).then((v) => assert.equal(v, 'v:k'), (e: unknown) => errors.push(e));
        await run(c, 50);
      }
      assert.deepEqual(errors, []);
      assert.equal(c.loads.n, 1, 'no load while the store does not answer');
      c.store.outage = 'none';
      await c.close();
    });
  }

  test('set and delete reject with SharedTierError when the store is down, after changing this process', async () => {
    const c = cluster(1, { shared: { store: undefined as never, timeout: 100 } });
    await run(c, 50);
    c.store.outage = 'error';
    const cache = c.caches[0]!;
    const set = track(cache.set('k', 'v'));
    await run(c, 10);
    assert.ok(set.error instanceof SharedTierError);
    assert.equal(cache.peek('k'), 'v');
    const del = track(cache.delete('k'));
    await run(c, 10);
    assert.ok(del.error instanceof SharedTierError);
    assert.equal(cache.peek('k'), undefined);
    await c.close();
  });

  test('a key that failed in another process: callers without a value get LeaseBackoffError, no load', async () => {
    const c = cluster(2, { loadTimeout: 1_000 });
    await run(c, 50);
    const boom = track(c.caches[0]!.get('k', () => Promise.reject(new Error('db down'))));
    await run(c, 20);
    assert.equal((boom.error as Error).message, 'db down');
    const other = track(c.caches[1]!.get('k', origin(c, 5)));
    await run(c, 20);
    assert.ok(other.error instanceof LeaseBackoffError);
    assert.equal(c.loads.n, 0);
    await c.close();
  });
});

describe('shared tier: namespaces and values that cannot be shared', () => {
  test('two caches on one store with different namespaces share neither keys nor invalidations', async () => {
    const clock = new VirtualClock({ seed: 3 });
    const store = new InMemorySharedStore({ clock, latencyMs: 1 });
    const users = new Cache<string>({ clock, shared: { store, namespace: 'users' } });
    const orders = new Cache<string>({ clock, shared: { store, namespace: 'orders' } });
    const a = track(users.get('1', () => 'user 1'));
    const b = track(orders.get('1', () => 'order 1'));
    await clock.advance(50);
    assert.deepEqual([a.value, b.value], ['user 1', 'order 1']);
    const del = track(users.delete('1'));
    await clock.advance(50);
    assert.equal(del.settled, true);
    assert.equal(orders.peek('1'), 'order 1');
    assert.throws(() => new Cache({ shared: { store, namespace: 'a:b' } }), /namespace/);
    await Promise.all([users.close(), orders.close()]);
  });

  test('a value too large to share frees its lease at once, and a set of one removes the older shared value', async () => {
    const c = cluster(2, { shared: { store: undefined as never, maxValueChars: 100 } });
    await run(c, 50);
    const [a, b] = c.caches as [Cache<string>, Cache<string>];
    const oversize: string[] = [];
    a.on('corrupt', (e) => oversize.push(e.reason));
    const big = 'x'.repeat(200);
    const first = track(a.get('k', async () => big));
    const second = track(b.get('k', origin(c, 5, () => 'from b')));
    await run(c, 60);
    assert.equal(first.value, big);
    assert.equal(second.value, 'from b', 'b loaded as soon as the lease was released, not after its ttl');
    assert.deepEqual(oversize, ['oversize']);
    // b's value is shared; a set of an oversize value on a must not leave it there.
    await Promise.all([a.set('k', big), run(c, 20)]);
    const reads = track(c.store.read('default:k'));
    await run(c, 5);
    assert.equal(reads.value, undefined);
    assert.equal(b.peek('k'), undefined, 'b was told to drop its copy');
    await c.close();
  });

  test('set rejects when the other processes could not be told', async () => {
    const c = cluster(1);
    await run(c, 50);
    const original = c.store.publish.bind(c.store);
    c.store.publish = () => Promise.reject(new Error('bus down'));
    const set = track(c.caches[0]!.set('k', 'v'));
    await run(c, 20);
    assert.ok(set.error instanceof SharedTierError);
    c.store.publish = original;
    await c.close();
  });
});

describe('shared tier: options and shutdown', () => {
  test('bad options are typed errors at construction, before anything is stored', () => {
    const store = new InMemorySharedStore();
    assert.throws(() => new Cache({ shared: {} as never }), ConfigError);
    assert.throws(() => new Cache({ shared: { store: { read: 1 } as never } }), ConfigError);
    assert.throws(() => new Cache({ shared: { store, timeout: -1 } }), ConfigError);
    assert.throws(() => new Cache({ shared: { store, heartbeat: 0 } }), ConfigError);
    assert.throws(() => new Cache({ shared: { store, maxValueChars: 2 } }), ConfigError);
    assert.throws(() => new Cache({ shared: { store, namespace: 'a|b' } }), ConfigError);
  });

  test('close() stops the heartbeat and leaves the bus: no timer is left behind', async () => {
    const c = cluster(2);
    await run(c, 50);
    await Promise.all([c.close(), run(c, 10)]);
    await run(c, 50);
    assert.equal(c.clock.pendingTimers, 0);
  });
});

describe('shared tier: untrusted bytes', () => {
  test('a corrupt or foreign entry is a reported miss, never a crash', async () => {
    const c = cluster(1);
    await run(c, 50);
    const cache = c.caches[0]!;
    const corrupt: string[] = [];
    cache.on('corrupt', (e) => corrupt.push(e.reason));
    for (const [key, text] of [
      ['a', 'not an envelope'],
      ['b', 'd1|x|0|"v"'],
      ['c', 'd1|60000|3|{"broken'],
      ['d', `d1|60000|3|"${'x'.repeat(2_000_000)}"`],
    ] as const) {
      await Promise.all([c.store.write(`default:${key}`, text, 60_000), run(c, 5)]);
      const got = track(cache.get(key, origin(c, 5)));
      await run(c, 50);
      assert.equal(got.value, `v:${key}`);
    }
    assert.deepEqual([...new Set(corrupt)], ['version', 'header', 'json', 'oversize']); // each read reports
    await c.close();
  });

  test('decoding drops __proto__ and constructor.prototype: nothing reaches Object.prototype', () => {
    const text = 'd1|0|0|{"a":{"__proto__":{"polluted":true}},"constructor":{"prototype":{"polluted":true}},"b":[{"__proto__":{"x":1}}]}';
    const decoded = decodeEnvelope(text, 1_000);
    assert.ok(decoded.ok);
    const value = decoded.envelope.value as Record<string, unknown>;
    const merged: Record<string, unknown> = Object.assign({}, value.a);
    assert.equal(merged.polluted, undefined);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal(Object.hasOwn(value, 'constructor'), false);
    assert.deepEqual(decodeEnvelope(encodeEnvelope({ constructor: 'Ford' }, 5, 2), 100), { ok: true, envelope: { value: { constructor: 'Ford' }, staleFor: 5, loadMs: 2, tags: undefined, lifeMs: 0 } });
    assert.deepEqual(decodeEnvelope(encodeEnvelope(undefined, 5, 2), 100), { ok: true, envelope: { value: undefined, staleFor: 5, loadMs: 2, tags: undefined, lifeMs: 0 } });
  });

  test('a value in the shared tier whose async validation never settles does not hold the key (issue 13, item 3)', async () => {
    const clock = new VirtualClock({ seed: 7 });
    const store = new InMemorySharedStore({ clock, latencyMs: 1 });
    const writer = new Cache<string>({ clock, ttl: 10_000, ttlJitter: 0, earlyRefresh: 0, shared: { store } });
    const written = writer.set('k', 'v');
    await clock.advance(10);
    await written;
    // The shared copy's validation never settles; a loaded value's does at once.
    const reader = new Cache<string>({ clock, ttl: 10_000, loadTimeout: 300, ttlJitter: 0, earlyRefresh: 0, shared: { store }, validate: hangingSchema<string>((v) => v === 'v') });
    const read = track(reader.get('k', async () => 'loaded'));
    await clock.advance(299);
    assert.equal(read.settled, false, 'still validating the shared copy');
    // One bound for the whole get, from its start: the reads of the copy get what is left of
    // loadTimeout, and the hard timeout is armed for the rest (it used to end within about twice it).
    await clock.advance(5);
    assert.ok(read.settled, 'the get settled: no read of the shared tier waits on its validator for ever');
    assert.ok(read.error instanceof LoadTimeoutError, String(read.error));
    const again = track(reader.get('k', async () => 'loaded'));
    await clock.advance(60_000);
    assert.ok(again.settled, 'a later get is not stuck behind the first');
    const closed = Promise.all([writer.close(), reader.close()]);
    await clock.advance(1_000);
    await closed;
  });

  test('escaped spellings of __proto__ and constructor are dropped too (issue 13, item 6)', () => {
    for (const proto of ['\\u005f_proto__', '_\\u005fproto__', '\\u005F\\u005F\\u0070roto\\u005f\\u005f']) {
      const decoded = decodeEnvelope(`d1|0|0|{"a":{"${proto}":{"polluted":true}},"\\u0063onstructor":{"prototype":{"polluted":true}}}`, 1_000);
      assert.ok(decoded.ok, proto);
      const value = decoded.envelope.value as Record<string, unknown>;
      assert.equal(Object.getPrototypeOf(value.a), Object.prototype, `${proto}: no own __proto__ that a merge would follow`);
      assert.equal((Object.assign({}, value.a) as Record<string, unknown>).polluted, undefined, proto);
      assert.equal(Object.hasOwn(value, 'constructor'), false, proto);
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
    }
    // An escape that spells nothing dangerous decodes to the same value as before.
    assert.deepEqual(decodeEnvelope(encodeEnvelope({ bell: '\u0007' }, 5, 2), 100), { ok: true, envelope: { value: { bell: '\u0007' }, staleFor: 5, loadMs: 2, tags: undefined, lifeMs: 0 } });
  });
});
