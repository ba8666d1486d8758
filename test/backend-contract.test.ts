import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { InMemorySharedStore, VirtualClock } from '../src/index.js';
import { RedisStore } from '../src/stores/redis.js';
import { type BackendUnderTest, sharedBackendContract } from '../src/testing.js';
import { type RedisCluster, type RedisServer, startRedis, startRedisCluster } from './support/redis-server.js';

// One contract for every shared backend (issue 26, item 5): the rules are
// written once, in src/stores/backend-contract.ts (`damper/testing`), and run
// here against RedisStore on a real redis-server and on a real three-master
// Redis Cluster, and against InMemorySharedStore in virtual time. The lab
// runs them against its simulated cache cluster (lab/test/lab-discord.test.ts).

/** Awaits `call` while a virtual clock moves a millisecond at a time. */
async function settleOn<T>(clock: VirtualClock, call: Promise<T>): Promise<T> {
  let done = false;
  call.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; !done && i < 60_000; i++) await clock.advance(1);
  return call;
}

describe('the shared-backend contract: InMemorySharedStore, in virtual time', () => {
  sharedBackendContract(test, async (): Promise<BackendUnderTest> => {
    const clock = new VirtualClock({ seed: 1 });
    const store = new InMemorySharedStore({ clock, latencyMs: 1 });
    return { stores: [store, store], pass: (ms) => clock.advance(ms), settle: (call) => settleOn(clock, call), close: async () => {} };
  });
});

function real(make: () => RedisStore): () => Promise<BackendUnderTest> {
  return async () => {
    const stores = [make(), make()] as const;
    return { stores, pass: (ms) => sleep(ms), settle: (call) => call, close: async () => void (await Promise.all(stores.map((s) => s.close()))) };
  };
}

describe('the shared-backend contract: RedisStore on a redis-server', () => {
  let redis: RedisServer;
  before(async () => {
    redis = await startRedis();
  });
  after(() => redis.stop());
  sharedBackendContract(test, real(() => new RedisStore({ connection: { host: '127.0.0.1', port: redis.port } })));
});

describe('the shared-backend contract: RedisStore on a three-master Redis Cluster', () => {
  let cluster: RedisCluster;
  before(async () => {
    cluster = await startRedisCluster();
  });
  after(() => cluster.stop());
  sharedBackendContract(test, real(() => new RedisStore({ connection: { cluster: cluster.nodes } })));
});
