import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { ArgumentError, ConfigError } from '../src/errors.js';
import { RedisStore } from '../src/stores/redis.js';
import { systemClock } from '../src/time/system.js';
import { type RedisCluster, type RedisServer, startRedis, startRedisCluster } from './support/redis-server.js';

/** Polls `check` every `everyMs` until it returns true; fails after `timeoutMs` (a generous bound, not a timing assertion). */
async function eventually(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000, everyMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** A listener that records messages and lets a test await the next one. */
function inbox(): { messages: string[]; listener: (message: string) => void; next: () => Promise<string> } {
  const messages: string[] = [];
  const waiting: ((message: string) => void)[] = [];
  return {
    messages,
    listener: (message) => {
      messages.push(message);
      waiting.shift()?.(message);
    },
    next: () => new Promise((resolve) => waiting.push(resolve)),
  };
}

let seq = 0;
const unique = (name: string): string => `${name}#${++seq}`;

describe('RedisStore on one redis-server', () => {
  let server: RedisServer;
  let raw: Redis;
  let store: RedisStore;
  const stores: RedisStore[] = [];
  const newStore = (prefix?: string): RedisStore => {
    const s = new RedisStore({ connection: { host: server.host, port: server.port }, ...(prefix === undefined ? {} : { prefix }) });
    stores.push(s);
    return s;
  };

  before(async () => {
    server = await startRedis();
    raw = new Redis({ host: server.host, port: server.port });
    store = newStore();
  });

  after(async () => {
    await Promise.all(stores.map((s) => s.close()));
    raw?.disconnect();
    await server?.stop();
  });

  test('needs exactly one of client and connection, and a brace-free prefix', () => {
    assert.throws(() => new RedisStore({}), ConfigError);
    assert.throws(() => new RedisStore({ client: raw, connection: { port: server.port } }), ConfigError);
    assert.throws(() => new RedisStore({ client: raw, prefix: 'a{b' }), ConfigError);
    assert.throws(() => new RedisStore({ client: raw, prefix: '}' }), ConfigError);
  });

  test('read: undefined when absent; value and remaining TTL after write', async () => {
    const key = unique('user:1');
    assert.equal(await store.read(key), undefined);
    await store.write(key, 'v1', 5_000);
    const got = await store.read(key);
    assert.equal(got?.value, 'v1');
    assert.ok(got !== undefined && got.ttlMs > 0 && got.ttlMs <= 5_000, `ttlMs ${got?.ttlMs}`);
    // The TTL is Redis's own PTTL of the value key.
    const pttl = await raw.pttl(`damper:{${key}}:v`);
    assert.ok(pttl > 0 && pttl <= 5_000);
  });

  test('read: a value without expiry reports Number.MAX_SAFE_INTEGER; an expired one is absent', async () => {
    const key = unique('no-expiry');
    await raw.set(`damper:{${key}}:v`, 'x');
    assert.deepEqual(await store.read(key), { value: 'x', ttlMs: Number.MAX_SAFE_INTEGER });
    const short = unique('short');
    await store.write(short, 'x', 1);
    await eventually('the 1 ms value to expire', async () => (await raw.exists(`damper:{${short}}:v`)) === 0);
    assert.equal(await store.read(short), undefined);
  });

  test('acquire: granted once, then held (loading) with its TTL; fill stores and drops the lease', async () => {
    const key = unique('k');
    assert.deepEqual(await store.acquire(key, 't1', 10_000), { granted: true, failures: 0 });
    const held = await store.acquire(key, 't2', 10_000);
    assert.equal(held.granted, false);
    assert.ok(!held.granted && held.holder === 'loading' && held.failures === 0);
    assert.ok(!held.granted && held.ttlMs > 0 && held.ttlMs <= 10_000, JSON.stringify(held));
    assert.equal(await store.fill(key, 't2', 'wrong holder', 1_000), false);
    assert.equal(await store.read(key), undefined);
    assert.equal(await store.fill(key, 't1', 'loaded', 60_000), true);
    assert.equal((await store.read(key))?.value, 'loaded');
    assert.equal(await raw.exists(`damper:{${key}}:l`), 0);
    // The lease is gone, so a second fill with the same token is refused.
    assert.equal(await store.fill(key, 't1', 'again', 60_000), false);
    assert.equal((await store.read(key))?.value, 'loaded');
    assert.deepEqual(await store.acquire(key, 't3', 10_000), { granted: true, failures: 0 });
  });

  // Fill refused after a write, a remove or the lease's expiry, and release
  // by the holder only: the shared-backend contract (test/backend-contract.test.ts).

  test('fail: the marker blocks acquire for the backoff and reports failures; they survive into the next lease', async () => {
    const key = unique('failing');
    await store.acquire(key, 't1', 10_000);
    assert.equal(await store.fail(key, 'other', 1, 10_000), false);
    assert.equal(await store.fail(key, 't1', 3, 300), true);
    // Not the holder any more: a second fail with the same token is refused.
    assert.equal(await store.fail(key, 't1', 4, 300), false);
    const held = await store.acquire(key, 't2', 10_000);
    assert.ok(!held.granted, 'the failure marker blocks acquire');
    assert.equal(held.holder, 'failed');
    assert.equal(held.failures, 3);
    assert.ok(held.ttlMs > 0 && held.ttlMs <= 300, `ttlMs ${held.ttlMs}`);
    // The failure count outlives the marker: max(backoff * 4, 60 s).
    const fttl = await raw.pttl(`damper:{${key}}:f`);
    assert.ok(fttl > 300 && fttl <= 60_000, `failures pttl ${fttl}`);
    // A fill by the old holder cannot overwrite the marker.
    assert.equal(await store.fill(key, 't1', 'late', 60_000), false);

    let grant = await store.acquire(key, 't3', 10_000);
    while (!grant.granted) {
      assert.equal(grant.holder, 'failed');
      await sleep(Math.max(grant.ttlMs, 5));
      grant = await store.acquire(key, 't3', 10_000);
    }
    assert.deepEqual(grant, { granted: true, failures: 3 });
    // A successful fill clears the count.
    assert.equal(await store.fill(key, 't3', 'ok', 60_000), true);
    assert.equal(await raw.exists(`damper:{${key}}:f`), 0);
    await store.remove(key);
    assert.deepEqual(await store.acquire(key, 't4', 10_000), { granted: true, failures: 0 });
  });

  test('fail: a long backoff keeps the failure count for four backoffs', async () => {
    const key = unique('long-backoff');
    await store.acquire(key, 't', 10_000);
    assert.equal(await store.fail(key, 't', 7, 20_000), true);
    const fttl = await raw.pttl(`damper:{${key}}:f`);
    assert.ok(fttl > 60_000 && fttl <= 80_000, `failures pttl ${fttl}`);
    assert.equal(await raw.get(`damper:{${key}}:f`), '7');
  });

  test('write drops any lease and failure count; remove drops all three keys', async () => {
    const key = unique('write');
    await store.acquire(key, 't', 10_000);
    await store.fail(key, 't', 2, 10_000);
    await store.write(key, 'set', 60_000);
    assert.deepEqual(await store.acquire(key, 'u', 10_000), { granted: true, failures: 0 });
    await store.remove(key);
    assert.equal(await raw.exists(`damper:{${key}}:v`, `damper:{${key}}:l`, `damper:{${key}}:f`), 0);
    assert.equal(await store.read(key), undefined);
  });

  test('keys with braces, percent signs, colons and unicode map injectively to brace-free tags', async () => {
    const keys = ['{', '}', '{}', '%', '%7B', '%7D', '%25', '%%7B', 'a{b}c', '{user:1}:x', 'a}{b', 'ключ🔑', 'a:b:c', ' ', '\n'];
    await Promise.all(keys.map((k, i) => store.write(k, `value ${i}`, 60_000)));
    for (const [i, k] of keys.entries()) assert.equal((await store.read(k))?.value, `value ${i}`, `key ${JSON.stringify(k)}`);
    const names = await raw.keys('damper:*:v');
    assert.ok(names.includes('damper:{%7B}:v'));
    assert.ok(names.includes('damper:{a%7Bb%7Dc}:v'));
    assert.ok(names.includes('damper:{%257B}:v'));
    assert.ok(names.includes('damper:{ключ🔑}:v'));
    for (const name of names) {
      // Exactly one `{`…`}` pair: the hash tag, non-empty.
      assert.match(name, /^damper:\{[^{}]+\}:v$/);
    }
    await Promise.all(keys.map((k) => store.remove(k)));
  });

  test('prefixes keep stores apart', async () => {
    const other = newStore('other');
    const key = unique('shared-name');
    await store.write(key, 'damper', 60_000);
    assert.equal(await other.read(key), undefined);
    assert.equal((await other.acquire(key, 't', 10_000)).granted, true);
    assert.equal(await raw.exists(`other:{${key}}:l`), 1);
  });

  test('bad arguments reject (never throw synchronously)', async () => {
    const calls: (() => Promise<unknown>)[] = [
      () => store.read(''),
      () => store.acquire('', 't', 1_000),
      () => store.acquire('k', '', 1_000),
      () => store.acquire('k', '!failed', 1_000),
      () => store.acquire('k', 't', 0),
      () => store.acquire('k', 't', Number.NaN),
      () => store.fill('k', 't', 'v', -1),
      () => store.fail('k', 't', -1, 1_000),
      () => store.fail('k', 't', 1.5, 1_000),
      () => store.fail('k', 't', 1, Number.POSITIVE_INFINITY),
      () => store.write('k', 'v', 0),
      () => store.remove(''),
    ];
    for (const call of calls) {
      let promise: Promise<unknown> | undefined;
      assert.doesNotThrow(() => {
        promise = call();
      });
      await assert.rejects(promise ?? Promise.resolve(), ArgumentError);
    }
    // A fractional TTL rounds up to whole ms for PX.
    const key = unique('fraction');
    await store.write(key, 'v', 1_000.2);
    assert.ok(((await store.read(key))?.ttlMs ?? 0) > 0);
  });

  test('lease exclusivity: 50 concurrent acquires from 4 stores, exactly one granted', async () => {
    const peers = [newStore(), newStore(), newStore(), newStore()];
    for (let round = 0; round < 10; round++) {
      const key = unique('contended');
      const grants = await Promise.all(Array.from({ length: 50 }, (_, i) => peers[i % 4]!.acquire(key, `token-${i}`, 10_000)));
      assert.equal(grants.filter((g) => g.granted).length, 1, `round ${round}`);
      assert.ok(grants.every((g) => g.granted || g.holder === 'loading'));
      const winner = grants.findIndex((g) => g.granted);
      assert.equal(await raw.get(`damper:{${key}}:l`), `token-${winner}`);
    }
  });

  test('close quits a connection it made and leaves a passed-in client open', async () => {
    const owned = new RedisStore({ connection: { host: server.host, port: server.port } });
    await owned.write(unique('c'), 'v', 1_000);
    await owned.subscribe('close-test', () => {});
    await owned.close();
    await owned.close();
    await assert.rejects(owned.read('c'));
    await assert.rejects(owned.subscribe('again', () => {}));

    const client = new Redis({ host: server.host, port: server.port });
    try {
      const borrowed = new RedisStore({ client });
      await borrowed.subscribe('close-test', () => {});
      await borrowed.close();
      assert.equal(await client.ping(), 'PONG');
      await assert.rejects(borrowed.subscribe('again', () => {}));
    } finally {
      client.disconnect();
    }
  });

  describe('freshness is read off Redis’s clock, never this process’s', () => {
    /** Calls of each command Redis has run since the last reset. */
    const calls = async (): Promise<Record<string, number>> => {
      const info = await raw.info('commandstats');
      return Object.fromEntries([...info.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
    };
    /** Waits until the store's estimate of Redis's clock is in (its first read starts the sync). */
    const synced = async (s: RedisStore, key: string): Promise<void> => {
      await s.read(key);
      await sleep(50);
    };

    test('by default a value is stamped with its expiry on Redis’s clock and read with one GET', async () => {
      const s = newStore();
      const key = unique('stamped');
      await s.write(key, 'd1|0|0|"v"', 60_000);
      const stored = await raw.get(`damper:{${key}}:v`);
      const [, at, body] = /^s(\d+)\|(.*)$/.exec(stored ?? '') ?? [];
      assert.equal(body, 'd1|0|0|"v"');
      const [seconds, micros] = await raw.time();
      const redisNow = Number(seconds) * 1000 + Number(micros) / 1000;
      assert.ok(Math.abs(Number(at) - (redisNow + 60_000)) < 1_000, `stamp ${at} vs Redis now ${redisNow} + 60 s`);
      await synced(s, key);
      await raw.config('RESETSTAT');
      for (let i = 0; i < 10; i++) {
        const got = await s.read(key);
        assert.equal(got?.value, 'd1|0|0|"v"');
        const pttl = await raw.pttl(`damper:{${key}}:v`);
        assert.ok(got !== undefined && Math.abs(got.ttlMs - pttl) < 25, `ttlMs ${got?.ttlMs} vs PTTL ${pttl}`);
      }
      const c = await calls();
      assert.equal(c.get, 10, JSON.stringify(c));
      assert.equal(c.evalsha ?? 0, 0, 'no script on the read path');
    });

    test('a process whose clock is an hour off reads the same remaining lifetime', async () => {
      const skewed = { now: () => systemClock.now() + 3_600_000, setTimer: systemClock.setTimer, random: systemClock.random };
      const s = newStore();
      const off = new RedisStore({ connection: { host: server.host, port: server.port }, clock: skewed });
      stores.push(off);
      const key = unique('skew');
      await off.write(key, 'x', 30_000);
      await synced(s, key);
      await synced(off, key);
      const [a, b] = await Promise.all([s.read(key), off.read(key)]);
      assert.ok(a !== undefined && b !== undefined && Math.abs(a.ttlMs - b.ttlMs) < 25 && a.ttlMs > 29_000 && a.ttlMs <= 30_000, `${a?.ttlMs} vs ${b?.ttlMs}`);
    });

    test("'pttl' writes values as before and reads them exactly; either kind of store reads the other's values", async () => {
      const stamped = newStore();
      const exact = new RedisStore({ connection: { host: server.host, port: server.port }, freshness: 'pttl' });
      stores.push(exact);
      const plain = unique('plain');
      await exact.write(plain, 'p', 20_000);
      assert.equal(await raw.get(`damper:{${plain}}:v`), 'p');
      const fromStamped = unique('from-stamped');
      await stamped.write(fromStamped, 'q', 20_000);
      await synced(stamped, plain);
      for (const [reader, key, value] of [[stamped, plain, 'p'], [exact, fromStamped, 'q'], [exact, plain, 'p'], [stamped, fromStamped, 'q']] as const) {
        const got = await reader.read(key);
        assert.ok(got?.value === value && got.ttlMs > 19_000 && got.ttlMs <= 20_000, `${key}: ${JSON.stringify(got)}`);
      }
      await raw.config('RESETSTAT');
      await exact.read(fromStamped);
      assert.equal((await calls()).evalsha, 1, "'pttl' reads with the script");
      assert.throws(() => new RedisStore({ client: raw, freshness: 'local' as never }), ConfigError);
      assert.throws(() => new RedisStore({ client: raw, clock: {} as never }), ConfigError);
    });

    test('a stamp is untrusted bytes: a malformed one is no stamp, a past one is absent', async () => {
      const s = newStore();
      const key = (name: string): string => `damper:{${name}}:v`;
      const cases: [string, string, string | undefined][] = [
        [unique('long'), `s${'9'.repeat(16)}|x`, `s${'9'.repeat(16)}|x`],
        [unique('letters'), 's12a|x', 's12a|x'],
        [unique('empty'), 's|x', 's|x'],
        [unique('past'), 's1000|x', undefined],
      ];
      for (const [name, value] of cases) await raw.set(key(name), value, 'PX', 60_000);
      const good = unique('good');
      await s.write(good, 'x', 60_000);
      await synced(s, good);
      for (const [name, , want] of cases) assert.equal((await s.read(name))?.value, want, name);
    });
  });

  describe('pub/sub', () => {
    test('a message published by one store reaches subscribers in every store, the publisher included', async () => {
      const [a, b] = [newStore(), newStore()];
      const inA = inbox();
      const inB = inbox();
      const offA = await a.subscribe('invalidate', inA.listener);
      const offB = await b.subscribe('invalidate', inB.listener);
      // Channel names carry the prefix.
      assert.deepEqual(await raw.pubsub('NUMSUB', 'damper:bus:invalidate'), ['damper:bus:invalidate', 2]);
      const gotA = inA.next();
      const gotB = inB.next();
      await b.publish('invalidate', 'user:1');
      assert.deepEqual(await Promise.all([gotA, gotB]), ['user:1', 'user:1']);
      await offA();
      await offB();
      assert.deepEqual(await raw.pubsub('NUMSUB', 'damper:bus:invalidate'), ['damper:bus:invalidate', 0]);
    });

    test('channels multiplex over one connection; unsubscribing one listener keeps the others', async () => {
      const [a, b] = [newStore(), newStore()];
      const first = inbox();
      const second = inbox();
      const control = inbox();
      const offFirst = await a.subscribe('mux', first.listener);
      const offSecond = await a.subscribe('mux', second.listener);
      const offControl = await a.subscribe('control', control.listener);
      assert.deepEqual(await raw.pubsub('NUMSUB', 'damper:bus:mux'), ['damper:bus:mux', 1], 'one connection per store');

      const got = Promise.all([first.next(), second.next()]);
      await b.publish('mux', 'm1');
      assert.deepEqual(await got, ['m1', 'm1']);

      await offFirst();
      await offFirst(); // idempotent
      const onlySecond = second.next();
      await b.publish('mux', 'm2');
      assert.equal(await onlySecond, 'm2');
      assert.deepEqual(first.messages, ['m1']);

      await offSecond();
      assert.deepEqual(await raw.pubsub('NUMSUB', 'damper:bus:mux'), ['damper:bus:mux', 0]);
      // Redis delivers one connection's messages in order: once the control
      // message arrives, a message on 'mux' published before it would have too.
      const ctl = control.next();
      await b.publish('mux', 'm3');
      await b.publish('control', 'after-m3');
      assert.equal(await ctl, 'after-m3');
      assert.deepEqual(second.messages, ['m1', 'm2']);
      await offControl();
    });

    test('the same function subscribed twice is two subscriptions', async () => {
      const a = newStore();
      const box = inbox();
      const off1 = await a.subscribe('twice', box.listener);
      const off2 = await a.subscribe('twice', box.listener);
      const both = Promise.all([box.next(), box.next()]);
      await a.publish('twice', 'x');
      assert.deepEqual(await both, ['x', 'x']);
      await off1();
      const one = box.next();
      await a.publish('twice', 'y');
      assert.equal(await one, 'y');
      await off2();
    });

    test('a throwing listener does not stop the others and is reported as a warning', async () => {
      const a = newStore();
      const box = inbox();
      const off1 = await a.subscribe('throws', () => {
        throw new Error('listener bug');
      });
      const off2 = await a.subscribe('throws', box.listener);
      const warning = once(process, 'warning') as Promise<[Error]>;
      const got = box.next();
      await a.publish('throws', 'x');
      assert.equal(await got, 'x');
      const [w] = await warning;
      assert.equal(w.name, 'DamperWarning');
      assert.match(w.message, /damper:bus:throws.*listener bug/);
      await off1();
      await off2();
    });
  });
});

test('subscriptions and commands survive a Redis kill and restart', async () => {
  const server = await startRedis();
  const a = new RedisStore({ connection: { host: server.host, port: server.port } });
  const b = new RedisStore({ connection: { host: server.host, port: server.port } });
  try {
    const box = inbox();
    await a.subscribe('restart', box.listener);
    const first = box.next();
    await b.publish('restart', 'before');
    assert.equal(await first, 'before');

    // A paused (SIGSTOPped) server answers nothing until resumed.
    let answered = false;
    server.pause();
    const pending = a.read('k').then(() => (answered = true));
    await sleep(100);
    assert.equal(answered, false);
    server.resume();
    await pending;

    const pid = server.pid;
    await server.kill();
    await server.restart();
    assert.notEqual(server.pid, pid);

    // Messages published before ioredis has reconnected and re-subscribed are
    // lost (Redis pub/sub has no memory), so publish until one arrives.
    let n = 0;
    await eventually('a message after the restart', async () => {
      await b.publish('restart', `after-${++n}`);
      return box.messages.some((m) => m.startsWith('after-'));
    }, 15_000, 50);
    // Commands work again too (the restart lost every key: no persistence).
    assert.equal(await a.read('k'), undefined);
    assert.equal((await a.acquire('k', 't', 10_000)).granted, true);
  } finally {
    await Promise.all([a.close(), b.close()]);
    await server.stop();
  }
});

describe('RedisStore on a three-master Redis Cluster', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  const stores: RedisStore[] = [];

  before(async () => {
    cluster = await startRedisCluster();
    client = new Cluster(cluster.nodes);
  });

  after(async () => {
    await Promise.all(stores.map((s) => s.close()));
    client?.disconnect();
    await cluster?.stop();
  });

  test('acquire, fill, read, fail, release, write and remove over 200 keys: no CROSSSLOT, keys spread over slots', async () => {
    const store = new RedisStore({ client });
    stores.push(store);
    const keys = Array.from({ length: 200 }, (_, i) => {
      switch (i % 5) {
        case 0:
          return `{user:${i}}:profile`;
        case 1:
          return `a}{${i}`;
        case 2:
          return `%7B${i}%{`;
        case 3:
          return `ключ:${i}:🔑`;
        default:
          return `plain:${i}`;
      }
    });
    await Promise.all(
      keys.map(async (key, i) => {
        assert.deepEqual(await store.acquire(key, `t${i}`, 10_000), { granted: true, failures: 0 });
        assert.equal((await store.acquire(key, `u${i}`, 10_000)).granted, false);
        assert.equal(await store.fill(key, `t${i}`, `v${i}`, 60_000), true);
        assert.equal((await store.read(key))?.value, `v${i}`);
        await store.remove(key);
        assert.equal(await store.read(key), undefined);
        assert.equal((await store.acquire(key, `w${i}`, 10_000)).granted, true);
        assert.equal(await store.fail(key, `w${i}`, 2, 10_000), true);
        const held = await store.acquire(key, `x${i}`, 10_000);
        assert.ok(!held.granted && held.holder === 'failed' && held.failures === 2);
        await store.write(key, `set${i}`, 60_000);
        assert.deepEqual(await store.acquire(key, `y${i}`, 10_000), { granted: true, failures: 0 });
        await store.release(key, `y${i}`);
        await store.remove(key);
      }),
    );
    // The three Redis keys of one damper key share a slot; different keys spread.
    const slots = new Set<number>();
    for (const key of keys.slice(0, 40)) {
      const tag = key.replace(/[%{}]/g, (c) => (c === '%' ? '%25' : c === '{' ? '%7B' : '%7D'));
      const [v, l, f] = await Promise.all(['v', 'l', 'f'].map((p) => client.cluster('KEYSLOT', `damper:{${tag}}:${p}`) as Promise<number>));
      assert.equal(v, l);
      assert.equal(v, f);
      slots.add(v!);
    }
    assert.ok(slots.size > 20, `only ${slots.size} slots`);
  });

  test('pub/sub reaches subscribers connected to any node', async () => {
    // Each store's subscriber connects to a node of ioredis's choosing; three
    // of them and a publisher make a cross-node delivery all but certain.
    const subscribers = [new RedisStore({ client }), new RedisStore({ client }), new RedisStore({ connection: { cluster: cluster.nodes } })];
    const publisher = new RedisStore({ connection: { cluster: cluster.nodes } });
    stores.push(...subscribers, publisher);
    const boxes = subscribers.map(() => inbox());
    const offs = await Promise.all(subscribers.map((s, i) => s.subscribe('cluster-bus', boxes[i]!.listener)));
    const got = Promise.all(boxes.map((b) => b.next()));
    await publisher.publish('cluster-bus', 'hello');
    assert.deepEqual(await got, ['hello', 'hello', 'hello']);
    await Promise.all(offs.map((off) => off()));
  });
});
