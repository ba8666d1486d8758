import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CacheCluster, CacheNodeError } from '../src/lab/world/cache-nodes.js';
import { CommandPool, PooledBackend } from '../src/lab/world/command-pool.js';
import { HashRing } from '../src/lab/world/hash-ring.js';
import { loadScenario } from '../src/lab/lab.js';
import { Recorder } from '../src/lab/judge/metrics.js';
import { Database, type Row } from '../src/lab/world/database.js';
import { KeySets } from '../src/lab/world/key-sets.js';
import { damperCacheNodes } from '../src/lab/world/service-cache-nodes.js';
import { type ServiceScenario } from '../src/lab/schema/service.js';
import { Cache, sleep, VirtualClock } from 'damper';
import { type BackendUnderTest, sharedBackendContract } from 'damper/testing';

// The service world's cache tier on nodes (`cache.nodes`): Redis-like
// processes on a consistent-hashing ring, each with a capacity, a queue and a
// round trip, that faults degrade, stop, kill or eject; and damper's shared
// tier over them.

describe('consistent hashing', () => {
  const keys = Array.from({ length: 20_000 }, (_, i) => `key:${i}`);

  test('keys spread over every node, roughly evenly', () => {
    const ring = new HashRing(160);
    for (let n = 0; n < 12; n++) ring.add(n);
    const counts = new Array<number>(12).fill(0);
    for (const k of keys) counts[ring.nodeOf(k)]!++;
    const mean = keys.length / 12;
    for (const c of counts) assert.ok(c > mean * 0.7 && c < mean * 1.3, `node holds ${c} keys, mean ${mean}`);
  });

  test('an ejection moves only the ejected nodes’ keys; a rejoin puts them back', () => {
    const ring = new HashRing(160);
    for (let n = 0; n < 12; n++) ring.add(n);
    const before = keys.map((k) => ring.nodeOf(k));
    ring.remove(1);
    ring.remove(4);
    const after = keys.map((k) => ring.nodeOf(k));
    let moved = 0;
    keys.forEach((_, i) => {
      if (before[i] === 1 || before[i] === 4) {
        moved++;
        assert.ok(after[i] !== 1 && after[i] !== 4);
      } else assert.equal(after[i], before[i], `${keys[i]} moved from ${before[i]} to ${after[i]}`);
    });
    assert.ok(moved > keys.length / 12, 'the ejected nodes held keys');
    ring.add(4);
    ring.add(1);
    assert.deepEqual(
      keys.map((k) => ring.nodeOf(k)),
      before,
      'placement depends on membership, not on the order of changes',
    );
  });

  test('an empty ring places nothing', () => {
    assert.equal(new HashRing().nodeOf('k'), -1);
  });
});

describe('the simulated cluster as a SharedBackend', () => {
  const shape = { capacityOps: 1000, latencyMs: 1, maxQueue: 100 };
  /** Runs `p` to its end in virtual time. */
  const settle = async <T>(clock: VirtualClock, p: Promise<T>): Promise<T> => {
    let done = false;
    const out = p.finally(() => (done = true));
    for (let i = 0; i < 10_000 && !done; i++) await clock.advance(1);
    return out;
  };

  test('values with a TTL, measured on the cluster’s clock', async () => {
    const clock = new VirtualClock({ seed: 1 });
    const c = new CacheCluster(clock, 3, shape);
    assert.equal(await settle(clock, c.read('a')), undefined);
    await settle(clock, c.write('a', 'x', 1000));
    const r = await settle(clock, c.read('a'));
    assert.equal(r?.value, 'x');
    assert.ok(r!.ttlMs > 990 && r!.ttlMs <= 1000, `ttl ${r!.ttlMs}`);
    await clock.advance(1000);
    assert.equal(await settle(clock, c.read('a')), undefined);
  });

  // The rules every shared backend keeps (leases, fills, failure markers,
  // overtaking writes, expiries, key spelling, the bus): written once in
  // damper/testing and run here as against RedisStore and InMemorySharedStore.
  describe('the shared-backend contract', () => {
    sharedBackendContract(test, async (): Promise<BackendUnderTest> => {
      const clock = new VirtualClock({ seed: 1 });
      const c = new CacheCluster(clock, 3, shape);
      return { stores: [c, c], pass: (ms) => clock.advance(ms), settle: (call) => settle(clock, call), close: async () => {} };
    });
  });

  // The same rules through each server's pool of connections (`nodes.connections`): a pool changes when a command runs, never what it does.
  describe('the shared-backend contract, through a pool of one connection per client', () => {
    sharedBackendContract(test, async (): Promise<BackendUnderTest> => {
      const clock = new VirtualClock({ seed: 1 });
      const c = new CacheCluster(clock, 3, shape);
      const stores = [new PooledBackend(c, new CommandPool(1)), new PooledBackend(c, new CommandPool(1))] as const;
      return { stores, pass: (ms) => clock.advance(ms), settle: (call) => settle(clock, call), close: async () => {} };
    });
  });

  test('a pool of connections: a command waits for a free one, and holds it until its node answers', async () => {
    const clock = new VirtualClock({ seed: 1 });
    const c = new CacheCluster(clock, 1, { capacityOps: 100_000, latencyMs: 5, maxQueue: 100 });
    const two = new PooledBackend(c, new CommandPool(2));
    const t0 = clock.now();
    await settle(clock, Promise.all(Array.from({ length: 10 }, () => two.read('k'))));
    assert.ok(clock.now() - t0 >= 25, `10 reads of 5 ms over 2 connections: 5 rounds, ${clock.now() - t0} ms`);
    const pool = new CommandPool(1);
    const one = new PooledBackend(c, pool);
    c.nodes[0]!.hang();
    // A caller that gives up (its own timeout) leaves its command on the connection: the next one waits behind it.
    void one.read('k').catch(() => {});
    const next = one.read('j');
    await clock.advance(100);
    assert.equal(pool.queued, 1, 'the second command waits for the connection the first still holds');
    c.nodes[0]!.resume();
    await settle(clock, next);
    assert.equal(pool.queued, 0);
    assert.throws(() => new CommandPool(0), /at least one connection/);
  });

  test('each call costs its node capacity: a degraded node queues and slows down; a failed one refuses', async () => {
    const clock = new VirtualClock({ seed: 1 });
    const c = new CacheCluster(clock, 2, { capacityOps: 100, latencyMs: 1, maxQueue: 50 });
    const node = c.nodeOf('k')!;
    const t0 = clock.now();
    await settle(clock, Promise.all(Array.from({ length: 10 }, () => c.read('k'))));
    assert.ok(clock.now() - t0 <= 100, `10 calls at 100/s took ${clock.now() - t0} ms`);
    node.degrade(0.1); // 10 calls/s
    const t1 = clock.now();
    await settle(clock, Promise.all(Array.from({ length: 10 }, () => c.read('k'))));
    assert.ok(clock.now() - t1 >= 800, `10 calls at 10/s took ${clock.now() - t1} ms`);
    // Beyond maxQueue, refused at once.
    const flood = Array.from({ length: 60 }, () => c.read('k').then(() => 'ok', (e: unknown) => e));
    const outcomes = await settle(clock, Promise.all(flood));
    assert.ok(outcomes.filter((o) => o instanceof CacheNodeError).length >= 9);
    node.degrade(1);
    node.fail();
    await assert.rejects(c.read('k'), CacheNodeError);
    node.recover();
    assert.equal(await settle(clock, c.read('k')), undefined);
  });


  test('a busy node serves its rate exactly, whether or not 1000 ÷ rate is a whole number of ms', async () => {
    // Capping the credit on every tick threw away what a whole-ms tick overshoots by: 300/s served 250, 700/s 500, 1,500/s 1,000.
    for (const capacityOps of [250, 300, 625, 700, 1500, 2500]) {
      const clock = new VirtualClock({ seed: 1 });
      const c = new CacheCluster(clock, 1, { capacityOps, latencyMs: 0, maxQueue: 10_000 });
      const node = c.nodeOf('k')!;
      const calls = Array.from({ length: capacityOps * 2 }, () => c.read('k'));
      await clock.advance(1000);
      // One call's credit at the start, and a tick's rounding at the end.
      assert.ok(Math.abs(node.served - capacityOps) <= 2, `${capacityOps} calls/s served ${node.served} in a second`);
      await settle(clock, Promise.all(calls));
    }
  });
  test('a stopped node (SIGSTOP) answers nothing, then serves its backlog; a killed one restarts empty; a slow one answers later', async () => {
    const clock = new VirtualClock({ seed: 1 });
    const c = new CacheCluster(clock, 1, { capacityOps: 1000, latencyMs: 2, maxQueue: 5 });
    const node = c.nodes[0]!;
    await settle(clock, c.write('k', 'v', 60_000));
    node.hang();
    let answered = 0;
    const held = Array.from({ length: 5 }, () => c.read('k').then((r) => (answered++, r?.value)));
    // Its queue is the clients' pool: beyond maxQueue, refused at once.
    await assert.rejects(c.read('k'), CacheNodeError);
    await clock.advance(5_000);
    assert.equal(answered, 0, 'a stopped node answered');
    node.resume();
    assert.deepEqual(await settle(clock, Promise.all(held)), ['v', 'v', 'v', 'v', 'v']);
    node.fail();
    await assert.rejects(c.read('k'), CacheNodeError);
    node.restart();
    assert.equal(await settle(clock, c.read('k')), undefined, 'a restarted node kept its data');
    await settle(clock, c.write('k', 'v', 60_000));
    const t0 = clock.now();
    node.slowness = 50;
    await settle(clock, c.read('k'));
    assert.ok(clock.now() - t0 >= 100, `a round trip of 2 ms × 50 took ${clock.now() - t0} ms`);
  });

  test('a round trip drawn per call, when the latency is random', async () => {
    const clock = new VirtualClock({ seed: 1 });
    let draws = 0;
    const c = new CacheCluster(clock, 1, { capacityOps: 1000, latencyMs: 0, maxQueue: 100 }, 160, undefined, () => (draws++ % 2 === 0 ? 5 : 40));
    const t0 = clock.now();
    const ends: number[] = [];
    await settle(clock, Promise.all([c.read('a'), c.read('b')].map((p) => p.then(() => ends.push(clock.now() - t0)))));
    assert.equal(draws, 2);
    assert.ok(ends[0]! < 20 && ends[1]! >= 40, `ends ${ends.join(', ')}`);
  });

  test('an ejection makes its keys cold on their new nodes; the other keys keep their values', async () => {
    const clock = new VirtualClock({ seed: 1 });
    const c = new CacheCluster(clock, 4, shape);
    const keys = Array.from({ length: 200 }, (_, i) => `k${i}`);
    await c.seed(async () => {
      await Promise.all(keys.map((k) => c.set(k, 'v', 60_000)));
    });
    const onZero = keys.filter((k) => c.nodeOf(k)!.id === 0);
    c.eject(0);
    const reads = await settle(clock, Promise.all(keys.map((k) => c.read(k))));
    keys.forEach((k, i) => assert.equal(reads[i] === undefined, onZero.includes(k), k));
    c.rejoin(0);
    const back = await settle(clock, Promise.all(onZero.map((k) => c.read(k))));
    assert.ok(back.every((r) => r === undefined), 'a replacement node is empty');
  });

  test('damper’s shared tier runs over it: 4 processes × 100 gets of a cold key → 1 load', async () => {
    const clock = new VirtualClock({ seed: 3 });
    const c = new CacheCluster(clock, 3, shape);
    const caches = Array.from({ length: 4 }, () => new Cache<string>({ clock, ttl: 10_000, staleFor: 60_000, shared: { store: c } }));
    let loads = 0;
    const loader = async (): Promise<string> => {
      loads++;
      await sleep(clock, 50);
      return 'v';
    };
    const gets = caches.flatMap((cache) => Array.from({ length: 100 }, () => cache.get('cold', loader)));
    const values = await settle(clock, Promise.all(gets));
    assert.ok(values.every((v) => v === 'v'));
    assert.equal(loads, 1);
    await Promise.all(caches.map((cache) => cache.close()));
  });

  test('a degraded node trips the store’s breaker: reads of cached keys are served from memory, no load', async () => {
    const clock = new VirtualClock({ seed: 3 });
    const c = new CacheCluster(clock, 3, shape);
    const cache = new Cache<string>({ clock, ttl: 1_000, staleFor: 60_000, earlyRefresh: 0, shared: { store: c } });
    let loads = 0;
    const loader = async (): Promise<string> => {
      loads++;
      return 'v';
    };
    let storeErrors = 0;
    cache.on('sharedError', () => storeErrors++);
    const keys = Array.from({ length: 30 }, (_, i) => `k${i}`);
    await settle(clock, Promise.all(keys.map((k) => cache.get(k, loader))));
    assert.equal(loads, keys.length);
    for (const n of c.nodes) n.degrade(0.001); // one call a second
    await clock.advance(1_500); // every key stale
    for (let i = 0; i < 20; i++) {
      const values = await settle(clock, Promise.all(keys.map((k) => cache.get(k, loader))));
      assert.ok(values.every((v) => v === 'v'));
      await clock.advance(100);
    }
    assert.equal(loads, keys.length, 'no key went to the origin while the cache nodes were slow');
    assert.ok(storeErrors > 0, 'the shared tier saw the slow nodes (timeouts, then its open breaker)');
    await cache.close();
  });

  test('damper’s steady state replaces what a server’s cache held: put back after traffic, every held key is fresh again', async () => {
    // A real run puts the steady state back after its warm-up, when the values the warm-up left have gone stale; `restore`
    // alone keeps a value a key already has (real/server-data.ts).
    const clock = new VirtualClock({ seed: 4 });
    const scenario = (await loadScenario('discord-2019')) as ServiceScenario;
    const cacheShape = scenario.cache!;
    const cluster = new CacheCluster(clock, 3, shape);
    const database = new Database(clock, new Recorder(60), scenario.database!);
    const keys = new KeySets(scenario.clients, scenario.keys);
    const tier = damperCacheNodes(clock, { server: () => database, tier: database }, cluster, cacheShape, [0], (_, shared) => ({ clock, ttl: 60_000, staleFor: 600_000, maxEntries: 10_000, shared }));
    const row = (): Row => ({ version: 1, valid: true });
    await tier.prewarm(keys, row, () => 1_000, 1);
    await clock.advance(2_000);
    const stale = tier.caches[0]!.snapshot().entries;
    assert.ok(stale.length > 800 && stale.every((e) => e.freshMs === 0), 'the first steady state has gone stale');
    await tier.prewarm(keys, row, () => 60_000, 1);
    const again = tier.caches[0]!.snapshot().entries;
    assert.equal(again.length, stale.length);
    assert.ok(
      again.every((e) => e.freshMs === 60_000),
      `fresh again: ${again.filter((e) => e.freshMs !== 60_000).length} of ${again.length} kept stale`,
    );
    await tier.caches[0]!.close();
  });
});
