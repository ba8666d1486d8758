import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { Cluster } from 'ioredis';
import { Cache, InMemorySharedStore } from '../src/index.js';
import { RedisStore } from '../src/stores/redis.js';
import { type RedisCluster, type RedisServer, startRedis, startRedisCluster } from './support/redis-server.js';

// The shared tier against real redis-servers: cluster-wide leases across real
// processes, the invalidation bus, and Redis Cluster (hash tags keep a key's
// value and lease on one slot).

const worker = fileURLToPath(new URL('./support/cache-worker.js', import.meta.url));

function spawnWorker(mode: string, env: Record<string, string>): { child: ChildProcess; next: () => Promise<Record<string, unknown>> } {
  const child = fork(worker, [mode], { env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const inbox: Record<string, unknown>[] = [];
  const waiting: ((m: Record<string, unknown>) => void)[] = [];
  child.on('message', (m) => {
    const w = waiting.shift();
    if (w !== undefined) w(m as Record<string, unknown>);
    else inbox.push(m as Record<string, unknown>);
  });
  const next = (): Promise<Record<string, unknown>> => {
    const m = inbox.shift();
    if (m !== undefined) return Promise.resolve(m);
    return new Promise((resolve, reject) => {
      waiting.push(resolve);
      child.once('exit', (code) => reject(new Error(`worker exited with ${code}`)));
    });
  };
  return { child, next };
}

describe('shared tier on a real redis-server', () => {
  let redis: RedisServer;
  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    await redis.stop();
  });

  test('8 processes × 1,000 concurrent gets of one cold key → 1 loader call in total', async () => {
    const workers = Array.from({ length: 8 }, () => spawnWorker('cold', { REDIS_PORT: String(redis.port), NAMESPACE: 'cold-test' }));
    try {
      for (const w of workers) assert.deepEqual(await w.next(), { ready: true });
      for (const w of workers) w.child.send('go');
      const results = await Promise.all(workers.map((w) => w.next()));
      const calls = results.reduce((n, r) => n + (r['calls'] as number), 0);
      const values = new Set(results.flatMap((r) => r['distinct'] as string[]));
      assert.equal(calls, 1, `loader calls across 8 processes: ${calls}`);
      assert.equal(values.size, 1, 'every caller in every process got the one loaded value');
    } finally {
      for (const w of workers) w.child.kill();
    }
  });

  test('set and delete in one process reach another process within the bus latency', async () => {
    const stores = [0, 1].map(() => new RedisStore({ connection: { host: '127.0.0.1', port: redis.port } }));
    const [a, b] = stores.map((store) => new Cache<string>({ ttl: 60_000, shared: { store, namespace: 'bus-test' } })) as [Cache<string>, Cache<string>];
    try {
      const buses = await Promise.all([a, b].map((c) => new Promise<void>((resolve) => c.on('bus', (e) => e.up && resolve()))));
      void buses;
      assert.equal(await a.get('k', () => 'v1'), 'v1');
      assert.equal(await b.get('k', () => 'not loaded'), 'v1', 'an L2 hit');
      await a.set('k', 'v2');
      const sent = performance.now();
      while (b.peek('k') !== undefined) await new Promise((r) => setTimeout(r, 1));
      const ms = performance.now() - sent;
      assert.ok(ms < 1_000, `invalidation took ${ms} ms`);
      assert.equal(await b.get('k', () => 'not loaded'), 'v2');
      await b.delete('k');
      while (a.peek('k') !== undefined) await new Promise((r) => setTimeout(r, 1));
      assert.equal(await a.get('k', () => 'v3'), 'v3');
    } finally {
      await Promise.all([a.close(), b.close()]);
      await Promise.all(stores.map((s) => s.close()));
    }
  });
});

describe('shared tier on a three-master Redis Cluster', () => {
  let cluster: RedisCluster;
  before(async () => {
    cluster = await startRedisCluster();
  });
  after(async () => {
    await cluster.stop();
  });

  test('leases, fills and invalidation over many slots, keys with braces included', async () => {
    const clients = [0, 1].map(() => new Cluster(cluster.nodes));
    const stores = clients.map((client) => new RedisStore({ client }));
    // A generous store timeout: this test is about slots and leases, not about a slow store
    // (a timed-out lease is, by design, a local load: test/shared-tier.test.ts covers that).
    // Nor about the origin budget: 300 keys asked at once would queue behind the default
    // limit, and its CoDel sheds a queue that stands longer on a busy machine (seen here:
    // OverloadedError, "waited 5 ms for a slot (standing queue)").
    const caches = stores.map((store) => new Cache<string>({ ttl: 60_000, maxConcurrentLoads: 1_000, shared: { store, namespace: 'cluster-test', timeout: 5_000 } })) as [Cache<string>, Cache<string>];
    const sharedErrors: string[] = [];
    for (const c of caches) c.on('sharedError', (e) => sharedErrors.push(`${e.operation}: ${e.error.message}`));
    let loads = 0;
    const loader = async ({ key }: { key: string }): Promise<string> => {
      loads++;
      await new Promise((r) => setTimeout(r, 20));
      return `v:${key}`;
    };
    try {
      await Promise.all(caches.map((c) => new Promise<void>((resolve) => c.on('bus', (e) => e.up && resolve()))));
      const keys = Array.from({ length: 300 }, (_, i) => (i % 3 === 0 ? `user:{${i}}` : i % 3 === 1 ? `}odd{${i}` : `plain:${i}`));
      // Both processes ask for every key at once: one load per key in the cluster.
      const got = await Promise.all(keys.flatMap((k) => caches.map((c) => c.get(k, loader))));
      assert.deepEqual(got, keys.flatMap((k) => [`v:${k}`, `v:${k}`]));
      assert.deepEqual(sharedErrors, []);
      assert.equal(loads, keys.length);
      await caches[0].delete(keys[0]!);
      while (caches[1].peek(keys[0]!) !== undefined) await new Promise((r) => setTimeout(r, 1));
      assert.equal(await caches[1].get(keys[0]!, loader), `v:${keys[0]}`);
      assert.equal(loads, keys.length + 1);
      // Invalidation by tag: marks on other slots than the values' (tags with braces too), read as ages by the other process.
      const tagged = keys.slice(1, 31);
      await Promise.all(tagged.map((k, i) => caches[0].set(k, `t:${k}`, { tags: [i % 2 === 0 ? 'shelf:{even}' : 'shelf}odd{', 'all'] })));
      caches[1].clear(); // read the tagged values from Redis, whatever the set messages' progress
      assert.deepEqual(await Promise.all(tagged.map((k) => caches[1].get(k, loader))), tagged.map((k) => `t:${k}`));
      caches[1].clear(); // its next reads go to Redis, before the message can tell it anything
      assert.equal(await caches[0].invalidateTags(['shelf:{even}']), 15);
      const after = await Promise.all(tagged.map((k) => caches[1].get(k, loader)));
      assert.deepEqual(after, tagged.map((k, i) => (i % 2 === 0 ? `v:${k}` : `t:${k}`)), 'the even shelf reloaded, the odd one still fresh in Redis');
      assert.equal(loads, keys.length + 1 + 15);
      assert.deepEqual(sharedErrors, []);
    } finally {
      await Promise.all(caches.map((c) => c.close()));
      await Promise.all(stores.map((s) => s.close()));
      for (const c of clients) c.disconnect();
    }
  });
});

test('the in-process shared store keeps several caches of one process coherent too', async () => {
  const store = new InMemorySharedStore();
  const a = new Cache<number>({ shared: { store } });
  const b = new Cache<number>({ shared: { store } });
  try {
    let loads = 0;
    const [x, y] = await Promise.all([a.get('k', () => ++loads), b.get('k', () => ++loads)]);
    assert.deepEqual([x, y, loads], [1, 1, 1]);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

