import assert from 'node:assert/strict';
import { after, before, describe, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis, type RedisOptions } from 'ioredis';
import { Cache, SharedTierError } from '../src/index.js';
import { RedisStore } from '../src/stores/redis.js';
import { FaultProxy } from './support/fault-proxy.js';
import { type RedisCluster, type RedisServer, startRedis, startRedisCluster } from './support/redis-server.js';

// Issue 26, items 1 and 2, on real redis-servers: no interruption of the
// invalidation bus is silent, and a store that stops answering in the middle
// of the lease protocol never makes this process load a key it can serve.
// Time is real: these are real connections cut by Redis itself.

/** The heartbeat of every cache here, ms: how long a lost invalidation goes unnoticed once messages flow again. */
const HEARTBEAT = 200;
/** Silence after which a cache here counts its bus as lost (three heartbeats, as the default's 3 s is three of 1 s). */
const BUS_TIMEOUT = 3 * HEARTBEAT;
/** How long a value stays fresh once the bus is lost. */
const FRESH_WITHOUT_BUS = HEARTBEAT;
/**
 * docs/shared-tier.md's bound for these settings when nothing flows at all
 * (a subscription that is not back yet): `busTimeout + heartbeat +
 * freshWithoutBus`. A Cluster's subscriber came back after more than 2 s on
 * a busy machine (Node 24, issue 25), so a test may only count on this.
 */
const SILENT_BOUND = BUS_TIMEOUT + HEARTBEAT + FRESH_WITHOUT_BUS;
/** Slack for a busy machine's event loop on top of a bound, ms (the test fails past it, it does not wait for it). */
const SLACK = 1_000;

interface Pair {
  readonly a: Cache<string>;
  readonly b: Cache<string>;
  /** What a's `bus` event said, with when (performance.now()). */
  readonly events: { cause: string; up: boolean; missed?: number; at: number }[];
  close(): Promise<void>;
}

let namespaces = 0;

function pair(storeOf: () => RedisStore, bOptions: { store?: RedisStore } = {}): Pair {
  const namespace = `gap${++namespaces}`;
  const stores = [storeOf(), bOptions.store ?? storeOf()];
  const [a, b] = stores.map((store) => new Cache<string>({ ttl: 60_000, staleFor: 60_000, earlyRefresh: 0, shared: { store, namespace, heartbeat: HEARTBEAT, busTimeout: BUS_TIMEOUT, freshWithoutBus: FRESH_WITHOUT_BUS, timeout: 500 } })) as [Cache<string>, Cache<string>];
  const events: Pair['events'] = [];
  a.on('bus', (e) => events.push({ cause: e.cause, up: e.up, ...(e.missed === undefined ? {} : { missed: e.missed }), at: performance.now() }));
  return {
    a,
    b,
    events,
    async close() {
      await Promise.all([a.close(), b.close()]);
      await Promise.all(stores.map((s) => s.close()));
    },
  };
}

async function until(what: string, condition: () => boolean, ms = 10_000): Promise<void> {
  for (const end = performance.now() + ms; !condition(); await sleep(5)) if (performance.now() > end) throw new Error(`timed out waiting until ${what}`);
}

/** Waits until a has heard a numbered message of b's: b sets a key a holds, and a's copy gives way to b's. */
async function heardFrom(p: Pair, loader: (context: { key: string }) => Promise<string>): Promise<void> {
  assert.equal(await p.a.get('heard', loader), 'heard@1');
  await p.b.set('heard', 'from b');
  for (const end = performance.now() + 10_000; (await p.a.get('heard', loader)) !== 'from b'; await sleep(5)) if (performance.now() > end) throw new Error('timed out waiting until a heard from b');
}

/**
 * a and b hold `k`; `cut` interrupts a's subscription; b deletes `k` at once,
 * in the gap. From the delete on, a is read every 5 ms: the test measures how
 * long a still answered the deleted value as a fresh hit, and asserts it is
 * within `bound` (plus slack), and that a's next answers are right.
 */
async function deleteInGap(t: TestContext, p: Pair, cut: () => Promise<unknown>, bound: number): Promise<void> {
  let version = 1;
  const loader = async ({ key }: { key: string }): Promise<string> => `${key}@${version}`;
  assert.equal(await p.a.get('k', loader), 'k@1');
  assert.equal(await p.b.get('k', loader), 'k@1', "b's copy comes from the shared tier");
  await until('both buses are up', () => p.a.stats().shared?.busUp === true && p.b.stats().shared?.busUp === true);
  // a must have heard b before the cut: a hole is told from the last number a heard from b, and a sender first
  // heard after a cut sets where its numbering starts (bus.ts, `follow`). Without this wait, a bus that came up
  // 14 ms before the cut had not yet heard b's first heartbeat, and the lost delete went unseen for good (a clean
  // .ci/run, the Cluster test, once).
  await heardFrom(p, loader);
  version = 2;
  await cut();
  const deletedAt = performance.now();
  await p.b.delete('k');
  let lastFreshOld = Number.NEGATIVE_INFINITY;
  let answer = '';
  for (const end = deletedAt + bound + SLACK + 1_000; performance.now() < end; await sleep(5)) {
    const hits = p.a.stats().hits;
    answer = await p.a.get('k', loader);
    if (answer === 'k@1' && p.a.stats().hits > hits) lastFreshOld = performance.now();
    if (answer === 'k@2') break;
  }
  const freshFor = Math.max(0, lastFreshOld - deletedAt);
  t.diagnostic(`a answered the deleted value as fresh for ${freshFor.toFixed(0)} ms after the delete; a's bus: ${JSON.stringify(p.events.map((e) => ({ ...e, at: Math.round(e.at - deletedAt) })))}`);
  assert.equal(answer, 'k@2', 'a came to the value the delete made (a load)');
  assert.ok(freshFor <= bound + SLACK, `the deleted value was fresh in a for ${freshFor.toFixed(0)} ms: more than the bound (${bound} ms) and the slack`);
}

describe('the invalidation bus on a real redis-server: no gap is silent', { timeout: 60_000 }, () => {
  let redis: RedisServer;
  let admin: Redis;
  before(async () => {
    redis = await startRedis();
    admin = new Redis({ host: '127.0.0.1', port: redis.port });
  });
  after(async () => {
    admin.disconnect();
    await redis.stop();
  });
  const store = (options: RedisOptions = {}) => (): RedisStore => new RedisStore({ connection: { host: '127.0.0.1', port: redis.port, ...options } });

  test('CLIENT KILL TYPE pubsub (ioredis re-subscribes ~50 ms later): a sees the cut at once, and the delete sent in the gap is not served fresh', async (t) => {
    const p = pair(store());
    try {
      // The store reports the cut: not fresh past it.
      await deleteInGap(t, p, () => admin.client('KILL', 'TYPE', 'pubsub'), 0);
      assert.ok(p.events.some((e) => e.cause === 'disconnect'), 'the cut was reported as a bus event');
      assert.ok((p.a.stats().shared?.busGaps ?? 0) >= 1);
      await until('the bus is up again', () => p.a.stats().shared?.busUp === true);
    } finally {
      await p.close();
    }
  });

  test('a gap of a few ms (the subscriber reconnects after 1 ms): seen all the same', async (t) => {
    const p = pair(store({ retryStrategy: () => 1 }));
    try {
      // The store reports the cut: not fresh past it.
      await deleteInGap(t, p, () => admin.client('KILL', 'TYPE', 'pubsub'), 0);
      assert.ok(p.events.some((e) => e.cause === 'disconnect'));
    } finally {
      await p.close();
    }
  });

  test("the sender's own PUBLISH fails (an ACL refuses it): b's caller learns it, and a finds the hole at b's next heartbeat", async (t) => {
    await admin.acl('SETUSER', 'nopub', 'on', 'nopass', '~*', '&*', '+@all');
    const b = new RedisStore({ connection: { host: '127.0.0.1', port: redis.port, username: 'nopub', password: 'any' } });
    const p = pair(store(), { store: b });
    try {
      const loader = async ({ key }: { key: string }): Promise<string> => `${key}@1`;
      assert.equal(await p.a.get('k', loader), 'k@1');
      await until('both buses are up', () => p.a.stats().shared?.busUp === true && p.b.stats().shared?.busUp === true);
      // a must have heard from b before the hole: the first message a hears
      // from a sender is where it starts counting that sender's numbers, so a
      // hole before it cannot be seen (docs/shared-tier.md). A bus is "up" when
      // it hears its own heartbeat; on a busy machine a's subscription can come
      // after every heartbeat b had sent, and the hole went unseen (a CI run).
      assert.equal(await p.a.get('heard', async () => 'h@1'), 'h@1');
      await p.b.delete('heard');
      await until('a has heard from b', () => p.a.peek('heard') === undefined);
      await admin.acl('SETUSER', 'nopub', '-publish');
      const deletedAt = performance.now();
      await assert.rejects(p.b.delete('k'), SharedTierError, "b's caller is told the others may not know");
      assert.equal(await p.a.get('k', loader), 'k@1', 'until the hole is found, a still holds the value: the documented window');
      await admin.acl('SETUSER', 'nopub', '+publish');
      await until('a finds the hole', () => p.events.some((e) => e.cause === 'missed'), HEARTBEAT + SLACK * 3);
      const found = p.events.find((e) => e.cause === 'missed')!;
      t.diagnostic(`a found the hole ${(found.at - deletedAt).toFixed(0)} ms after the delete (missed ${found.missed})`);
      assert.equal(found.missed, 1);
      const stale = p.a.stats().staleBy.revalidate;
      assert.equal(await p.a.get('k', async () => 'k@2'), 'k@1', 'served stale while checked');
      assert.equal(p.a.stats().staleBy.revalidate, stale + 1, 'not a fresh hit');
      await until('a reloaded k', () => p.a.peek('k') === 'k@2');
    } finally {
      await p.close();
      await admin.acl('DELUSER', 'nopub');
    }
  });

  test('a store that stops answering right after it grants the lease (a proxy holds every byte after the grant): zero loads for a key with a value', async () => {
    const proxy = await FaultProxy.start({ port: redis.port });
    const namespace = `stall${++namespaces}`;
    const storeA = new RedisStore({ connection: { host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: null } });
    const a = new Cache<string>({ ttl: 100, staleFor: 60_000, earlyRefresh: 0, shared: { store: storeA, namespace, heartbeat: HEARTBEAT, timeout: 100 } });
    let loads = 0;
    const loader = async ({ key }: { key: string }): Promise<string> => {
      loads++;
      return `${key}@${loads}`;
    };
    try {
      assert.equal(await a.get('k', loader), 'k@1');
      await sleep(150); // fresh no more, here and in the store
      // The lease is taken by a script (EVALSHA, or EVAL the first time): once
      // its grant has gone back, hold everything.
      let scriptSent = false;
      let stalled = false;
      proxy.watch((direction, bytes) => {
        const text = bytes.toString('latin1');
        if (direction === 'requests' && /EVAL/i.test(text)) scriptSent = true;
        // The lease scripts answer an array of four; PUBLISH, GET and TIME answer otherwise. Anywhere in the
        // chunk: the bus's heartbeat is a PUBLISH on the same connection, and Redis may answer it and the script
        // in one write (":1\r\n*4\r\n…"). Matched at the chunk's start only, such a grant went by, this process
        // loaded as it should with a store that answers, and the next grant stalled the proxy (Node 24, loaded).
        else if (direction === 'replies' && scriptSent && text.includes('*4\r\n') && !stalled) {
          stalled = true;
          setImmediate(() => proxy.set('both', { stalled: true }));
        }
      });
      const errors: unknown[] = [];
      const answers = new Set<string>();
      for (let i = 0; i < 100; i++) {
        a.get('k', loader).then((v) => answers.add(v), (e: unknown) => errors.push(e));
        await sleep(10);
      }
      assert.ok(stalled, 'the proxy held the store after a grant');
      assert.deepEqual(errors, []);
      assert.deepEqual([...answers], ['k@1'], 'the value this process holds, served');
      assert.equal(loads, 1, 'no load while the store does not answer');
    } finally {
      proxy.watch(undefined);
      proxy.reset();
      await a.close();
      await storeA.close();
      await proxy.close();
    }
  });
});

describe('the invalidation bus on a three-master Redis Cluster', { timeout: 90_000 }, () => {
  let cluster: RedisCluster;
  before(async () => {
    cluster = await startRedisCluster();
  });
  after(() => cluster.stop());

  test("every node kills its pub/sub clients (ioredis picks a subscriber node again, and tells nothing): a finds the hole at b's next heartbeat once it is back, or counts the bus lost while it is not", async (t) => {
    const p = pair(() => new RedisStore({ connection: { cluster: cluster.nodes } }));
    const admins = cluster.nodes.map((n) => new Redis(n));
    try {
      // Nothing reports the cut, and how soon ioredis subscribes again is its own affair: the delete itself may
      // arrive (re-subscribed in time), or the hole is found at b's next heartbeat (24 ms on an idle machine), or,
      // on a busy one, nothing came for over 2 s and the bus was counted lost. Each way, within the bound.
      await deleteInGap(t, p, () => Promise.all(admins.map((r) => r.client('KILL', 'TYPE', 'pubsub'))), SILENT_BOUND);
    } finally {
      for (const r of admins) r.disconnect();
      await p.close();
    }
  });
});
