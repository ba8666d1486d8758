import assert from 'node:assert/strict';
import { type LeaseGrant, type SharedBackend } from './backend.js';

/**
 * A shared backend as the contract drives it: two views of one store (two
 * processes, each with its own connection where that means anything), and
 * the store's time.
 */
export interface BackendUnderTest {
  /** Two views of one store: what one writes, the other reads. */
  readonly stores: readonly [SharedBackend, SharedBackend];
  /** Lets `ms` pass on the store's clock: a virtual clock's advance, or a real sleep. */
  pass(ms: number): Promise<void>;
  /** Awaits one call, letting the time pass that it needs (a simulated store answers only as its clock moves). */
  settle<T>(call: Promise<T>): Promise<T>;
  /** Releases what `open` made. */
  close(): Promise<void>;
}

/** One rule every shared backend keeps, with the check that shows it. */
export interface SharedBackendRule {
  readonly name: string;
  check(backend: BackendUnderTest, key: (name: string) => string): Promise<void>;
}

/** The lifetimes the rules use, ms: short, so a real store's expiries pass within a test. */
const TTL = 300;
const LEASE = 400;
const AFTER = 150;

/**
 * The rules a {@link SharedBackend} must keep for damper's shared tier to be
 * right: the atomic lease, fill only by the lease's token, failure markers
 * whose count outlives them, writes and removes that overtake a lease,
 * expiries, keys kept apart however they are spelled, tag marks read as ages
 * on the store's clock, and a bus that reaches
 * every subscriber of every view, never inside the publisher's call.
 * Written once, and run against `RedisStore` (a server and a Cluster),
 * `InMemorySharedStore` and the lab's simulated cache cluster; run it
 * against a backend of your own with {@link sharedBackendContract}.
 */
export const SHARED_BACKEND_RULES: readonly SharedBackendRule[] = [
  {
    name: 'read: nothing for a key never written; a write is read by the other view, with its remaining lifetime',
    async check({ stores: [a, b], settle }, key) {
      assert.equal(await settle(a.read(key('k'))), undefined);
      await settle(a.write(key('k'), 'v1', 10_000));
      const read = await settle(b.read(key('k')));
      assert.equal(read?.value, 'v1');
      assert.ok(read !== undefined && read.ttlMs > 5_000 && read.ttlMs <= 10_000, `remaining lifetime ${read?.ttlMs} ms of 10000`);
    },
  },
  {
    name: 'a value expires with its lifetime',
    async check({ stores: [a, b], settle, pass }, key) {
      await settle(a.write(key('k'), 'v', TTL));
      await pass(TTL + AFTER);
      assert.equal(await settle(b.read(key('k'))), undefined);
    },
  },
  {
    name: 'acquire: of many concurrent callers in both views, exactly one is granted; the others see it loading, with its lifetime',
    async check({ stores: [a, b], settle }, key) {
      const grants = await settle(Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).acquire(key('k'), `t${i}`, 10_000))));
      assert.equal(grants.filter((g) => g.granted).length, 1);
      for (const g of grants) {
        if (g.granted) assert.equal(g.failures, 0);
        else {
          assert.equal(g.holder, 'loading');
          assert.ok(g.ttlMs > 0 && g.ttlMs <= 10_000, `lease lifetime ${g.ttlMs}`);
        }
      }
    },
  },
  {
    name: 'fill: only with the token that holds the lease; it stores the value and frees the key',
    async check({ stores: [a, b], settle }, key) {
      await settle(a.acquire(key('k'), 'mine', 10_000));
      assert.equal(await settle(b.fill(key('k'), 'theirs', 'wrong', 10_000)), false);
      assert.equal(await settle(b.read(key('k'))), undefined, 'a refused fill stores nothing');
      assert.equal(await settle(a.fill(key('k'), 'mine', 'v', 10_000)), true);
      assert.equal((await settle(b.read(key('k'))))?.value, 'v');
      assert.deepEqual(await settle(b.acquire(key('k'), 'next', 10_000)), { granted: true, failures: 0 } satisfies LeaseGrant);
    },
  },
  {
    name: 'fail: a marker refuses the lease for the backoff and reports the count; the count outlives it; a fill drops it',
    async check({ stores: [a, b], settle, pass }, key) {
      await settle(a.acquire(key('k'), 'mine', 10_000));
      assert.equal(await settle(b.fail(key('k'), 'theirs', 1, TTL)), false, 'only the holder leaves a marker');
      assert.equal(await settle(a.fail(key('k'), 'mine', 2, TTL)), true);
      const held = await settle(b.acquire(key('k'), 'x', 10_000));
      assert.ok(!held.granted && held.holder === 'failed' && held.failures === 2 && held.ttlMs > 0 && held.ttlMs <= TTL, JSON.stringify(held));
      await pass(TTL + AFTER);
      assert.deepEqual(await settle(b.acquire(key('k'), 'y', 10_000)), { granted: true, failures: 2 } satisfies LeaseGrant);
      assert.equal(await settle(b.fill(key('k'), 'y', 'v', 10_000)), true);
      assert.deepEqual(await settle(a.acquire(key('k'), 'z', 10_000)), { granted: true, failures: 0 } satisfies LeaseGrant);
    },
  },
  {
    name: 'release: only by the holder, and never of a failure marker',
    async check({ stores: [a, b], settle }, key) {
      await settle(a.acquire(key('k'), 'mine', 10_000));
      await settle(b.release(key('k'), 'theirs'));
      assert.equal((await settle(b.acquire(key('k'), 'x', 10_000))).granted, false);
      await settle(a.release(key('k'), 'mine'));
      assert.equal((await settle(b.acquire(key('k'), 'x', 10_000))).granted, true);
      await settle(a.acquire(key('f'), 't', 10_000));
      await settle(a.fail(key('f'), 't', 1, 10_000));
      await settle(a.release(key('f'), 't'));
      assert.equal((await settle(b.acquire(key('f'), 'u', 10_000))).granted, false, 'the marker stands');
    },
  },
  {
    name: 'a lease expires with its lifetime, and its holder can no longer fill',
    async check({ stores: [a, b], settle, pass }, key) {
      await settle(a.acquire(key('k'), 'mine', LEASE));
      await pass(LEASE + AFTER);
      assert.equal((await settle(b.acquire(key('k'), 'next', 10_000))).granted, true);
      assert.equal(await settle(a.fill(key('k'), 'mine', 'late', 10_000)), false);
    },
  },
  {
    name: 'write and remove overtake a lease: a load begun before them cannot fill after',
    async check({ stores: [a, b], settle }, key) {
      await settle(a.acquire(key('w'), 'mine', 10_000));
      await settle(b.write(key('w'), 'newer', 10_000));
      assert.equal(await settle(a.fill(key('w'), 'mine', 'older', 10_000)), false);
      assert.equal((await settle(a.read(key('w'))))?.value, 'newer');
      await settle(a.acquire(key('r'), 'mine', 10_000));
      await settle(b.remove(key('r')));
      assert.equal(await settle(a.fill(key('r'), 'mine', 'older', 10_000)), false);
      assert.equal(await settle(a.read(key('r'))), undefined);
    },
  },
  {
    name: 'write and remove drop the failure count; remove drops the value',
    async check({ stores: [a, b], settle }, key) {
      for (const drop of ['write', 'remove'] as const) {
        const k = key(drop);
        await settle(a.acquire(k, 't', 10_000));
        await settle(a.fail(k, 't', 3, 10_000));
        await settle(drop === 'write' ? b.write(k, 'v', 10_000) : b.remove(k));
        assert.deepEqual(await settle(a.acquire(k, 'u', 10_000)), { granted: true, failures: 0 } satisfies LeaseGrant, drop);
      }
      assert.equal(await settle(a.read(key('remove'))), undefined);
    },
  },
  {
    name: 'keys are kept apart however they are spelled: braces, colons, percent signs, unicode',
    async check({ stores: [a, b], settle }, key) {
      const names = ['{a}', 'a}', '{a', 'a:b', 'a%7Bb', '%', 'ключ', '🔑', 'a b', 'a'];
      for (const [i, name] of names.entries()) await settle(a.write(key(name), `v${i}`, 10_000));
      for (const [i, name] of names.entries()) assert.equal((await settle(b.read(key(name))))?.value, `v${i}`, name);
    },
  },
  {
    name: 'tags: a mark is read by the other view as an age on the store\u2019s clock; unmarked and expired tags have none; a tag and a key spelled alike are apart',
    async check({ stores: [a, b], settle, pass }, key) {
      assert.equal(await settle(b.tagAge(key('t'))), undefined);
      await settle(a.write(key('t'), 'value', 10_000));
      assert.equal(await settle(b.tagAge(key('t'))), undefined, 'a key is no tag');
      await settle(a.markTag(key('t'), 10_000));
      const first = await settle(b.tagAge(key('t')));
      assert.ok(first !== undefined && first >= 0 && first < 1_000, `age right after the mark: ${first} ms`);
      assert.equal((await settle(b.read(key('t'))))?.value, 'value', 'a tag is no key');
      await pass(AFTER);
      const later = await settle(b.tagAge(key('t')));
      assert.ok(later !== undefined && later >= first + AFTER - 5, `age ${later} ms, ${AFTER} ms after ${first} ms`);
      // A new mark replaces the old one: the age starts again.
      await settle(b.markTag(key('t'), 10_000));
      const again = await settle(a.tagAge(key('t')));
      assert.ok(again !== undefined && again < later, `age after a new mark: ${again} ms`);
      await settle(a.markTag(key('short'), TTL));
      await pass(TTL + AFTER);
      assert.equal(await settle(b.tagAge(key('short'))), undefined, 'a mark expires with its retention');
    },
  },
  {
    name: 'the bus: a message reaches every subscriber of both views, never inside the publisher\u2019s call, until each unsubscribes',
    async check({ stores: [a, b], settle, pass }, key) {
      const channel = key('bus');
      const got: string[] = [];
      const offA = await settle(a.subscribe(channel, (m) => got.push(`a:${m}`)));
      const offB = await settle(b.subscribe(channel, (m) => got.push(`b:${m}`)));
      const sent = a.publish(channel, 'one');
      assert.deepEqual(got, [], 'never inside the publisher\u2019s call');
      await settle(sent);
      for (let waited = 0; got.length < 2 && waited < 2_000; waited += 20) await pass(20);
      assert.deepEqual(got.sort(), ['a:one', 'b:one']);
      await settle(offB());
      await settle(b.publish(channel, 'two'));
      for (let waited = 0; got.length < 3 && waited < 2_000; waited += 20) await pass(20);
      await pass(AFTER);
      assert.deepEqual(got.sort(), ['a:one', 'a:two', 'b:one']);
      await settle(offA());
    },
  },
];

let runs = 0;

/**
 * Runs every rule of {@link SHARED_BACKEND_RULES} as one test of your test
 * runner (`test` from `node:test`, or any function of the same shape), each
 * on a backend from `open`, closed after. Keys are named
 * `<prefix>:<run>:<rule>:…` (prefix `contract` unless given): against a store
 * that outlives the test process, give a prefix of your own per run, since a
 * key left from an earlier run would break the rules that start from nothing.
 */
export function sharedBackendContract(test: (name: string, fn: () => Promise<void>) => unknown, open: () => Promise<BackendUnderTest>, options: { readonly prefix?: string } = {}): void {
  const run = `${options.prefix ?? 'contract'}:${++runs}`;
  for (const [i, rule] of SHARED_BACKEND_RULES.entries()) {
    void test(rule.name, async () => {
      const backend = await open();
      try {
        await rule.check(backend, (name) => `${run}:${i}:${name}`);
      } finally {
        await backend.close();
      }
    });
  }
}
