import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AbortedError, ArgumentError, Cache, type CacheOptions, ConcurrencyLimiter, ConfigError, InMemorySharedStore, LoaderError, LoadTimeoutError, OverloadedError, RateLimiter, ValidationError, VirtualClock } from '../src/index.js';
import { deferred, hangingSchema, track } from './helpers.js';

function setup<V>(options: CacheOptions<V> = {}): { clock: VirtualClock; cache: Cache<V> } {
  const clock = new VirtualClock({ seed: 1 });
  const cache = new Cache<V>({ ttlJitter: 0, earlyRefresh: 0, clock, ...options });
  return { clock, cache };
}

describe('coalescing', () => {
  test('N concurrent gets of a missing key run the loader once and all get its value', async () => {
    const { clock, cache } = setup<number>();
    let calls = 0;
    const d = deferred<number>();
    const gets = Array.from({ length: 1000 }, () => cache.get('k', () => (calls++, d.promise)));
    await clock.settle();
    assert.equal(calls, 1);
    assert.equal(cache.loading, 1);
    d.resolve(7);
    assert.deepEqual(new Set(await Promise.all(gets)), new Set([7]));
    assert.equal(cache.loading, 0);
  });

  test('all waiters receive the error of a shared failed load', async () => {
    const { cache } = setup<number>();
    const boom = new Error('db down');
    let calls = 0;
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => cache.get('k', async () => (calls++, Promise.reject(boom)))));
    assert.equal(calls, 1);
    for (const r of results) assert.deepEqual(r, { status: 'rejected', reason: boom });
  });

  test("a waiter's own abort releases only that waiter", async () => {
    const { clock, cache } = setup<number>();
    const d = deferred<number>();
    const ac = new AbortController();
    const a = track(cache.get('k', () => d.promise, { signal: ac.signal }));
    const b = track(cache.get('k', () => d.promise));
    await clock.settle();
    ac.abort(new Error('user left'));
    await clock.settle();
    assert.ok(a.error instanceof AbortedError);
    assert.equal((a.error as AbortedError).code, 'ABORTED');
    assert.equal(b.settled, false);
    d.resolve(1);
    await clock.settle();
    assert.equal(b.value, 1);
  });

  test("a waiter's own waitTimeout releases only that waiter; the load goes on", async () => {
    const { clock, cache } = setup<number>();
    const d = deferred<number>();
    const a = track(cache.get('k', () => d.promise, { waitTimeout: 100 }));
    const b = track(cache.get('k', () => d.promise));
    await clock.advance(100);
    assert.ok(a.error instanceof LoadTimeoutError);
    assert.equal((a.error as LoadTimeoutError).phase, 'wait');
    assert.equal(b.settled, false);
    d.resolve(5);
    await clock.settle();
    assert.equal(b.value, 5);
    assert.equal(await cache.get('k', () => 0), 5);
  });

  test('an already-aborted signal rejects at once without a load', async () => {
    const { cache } = setup<number>();
    let calls = 0;
    await assert.rejects(cache.get('k', () => ++calls, { signal: AbortSignal.abort() }), AbortedError);
    assert.equal(calls, 0);
  });

  test('the loader receives the key, a signal and the stale value', async () => {
    const { clock, cache } = setup<number>({ ttl: 10, staleFor: 1000 });
    await cache.get('k', () => 1);
    await clock.advance(20);
    let seen: unknown;
    await cache.get('k', (ctx) => {
      seen = { key: ctx.key, aborted: ctx.signal.aborted, stale: ctx.stale };
      return 2;
    });
    await clock.settle();
    assert.deepEqual(seen, { key: 'k', aborted: false, stale: 1 });
  });
});

describe('fresh and stale windows', () => {
  test('fresh hits do not call the loader', async () => {
    const { clock, cache } = setup<number>({ ttl: 1000 });
    let calls = 0;
    const loader = (): number => ++calls;
    await cache.get('k', loader);
    await clock.advance(999);
    assert.equal(await cache.get('k', loader), 1);
    assert.equal(calls, 1);
  });

  test('within the stale window: stale at once, one background refresh', async () => {
    const { clock, cache } = setup<number>({ ttl: 1000, staleFor: 5000 });
    let calls = 0;
    const d = deferred<number>();
    await cache.get('k', () => 1);
    await clock.advance(1500);
    const stale: string[] = [];
    cache.on('stale', (e) => stale.push(e.reason));
    const got = await Promise.all(Array.from({ length: 50 }, () => cache.get('k', () => (calls++, d.promise))));
    assert.deepEqual(new Set(got), new Set([1]));
    assert.equal(calls, 1);
    assert.equal(stale.length, 50);
    assert.ok(stale.every((r) => r === 'revalidate'));
    d.resolve(2);
    await clock.settle();
    assert.equal(await cache.get('k', () => 99), 2);
  });

  test('past ttl + staleFor the value is never served', async () => {
    const { clock, cache } = setup<number>({ ttl: 1000, staleFor: 1000 });
    await cache.get('k', () => 1);
    await clock.advance(2000);
    assert.equal(cache.peek('k'), undefined);
    await assert.rejects(cache.get('k', () => Promise.reject(new Error('down'))), /down/);
  });

  test('with staleWhileRevalidate off, callers wait for the refresh, and get stale after softTimeout', async () => {
    const { clock, cache } = setup<number>({ ttl: 100, staleFor: 10_000, staleWhileRevalidate: false, softTimeout: 50 });
    await cache.get('k', () => 1);
    await clock.advance(200);
    const d = deferred<number>();
    const a = track(cache.get('k', () => d.promise));
    await clock.advance(49);
    assert.equal(a.settled, false);
    await clock.advance(1);
    assert.equal(a.value, 1);
    d.resolve(2);
    await clock.settle();
    assert.equal(cache.peek('k'), 2);
  });

  test('with staleWhileRevalidate off, a refresh that ends in time gives the new value', async () => {
    const { clock, cache } = setup<number>({ ttl: 100, staleFor: 10_000, staleWhileRevalidate: false, softTimeout: 50 });
    await cache.get('k', () => 1);
    await clock.advance(200);
    const a = track(cache.get('k', async () => 2));
    await clock.settle();
    assert.equal(a.value, 2);
  });
});

describe('errors are never evictions', () => {
  test('a failed refresh keeps the value and serves it stale', async () => {
    const { clock, cache } = setup<number>({ ttl: 100, staleFor: 10_000, staleWhileRevalidate: false });
    await cache.get('k', () => 1);
    await clock.advance(150);
    const reasons: string[] = [];
    cache.on('stale', (e) => reasons.push(e.reason));
    assert.equal(await cache.get('k', () => Promise.reject(new Error('db down'))), 1);
    assert.deepEqual(reasons, ['error']);
    assert.equal(cache.peek('k'), 1);
    assert.equal(cache.size, 1);
  });

  test('a hard timeout aborts the loader, counts as an error and keeps the value', async () => {
    const { clock, cache } = setup<number>({ ttl: 100, staleFor: 10_000, loadTimeout: 500 });
    await cache.get('k', () => 1);
    await clock.advance(150);
    let signal: AbortSignal | undefined;
    const errors: unknown[] = [];
    cache.on('error', (e) => errors.push(e.error));
    assert.equal(
      await cache.get('k', (ctx) => {
        signal = ctx.signal;
        return new Promise<number>(() => {});
      }),
      1,
    );
    await clock.advance(500);
    assert.equal(signal?.aborted, true);
    assert.ok(signal?.reason instanceof LoadTimeoutError);
    assert.equal(errors.length, 1);
    assert.ok(errors[0] instanceof LoadTimeoutError);
    assert.equal(cache.peek('k'), 1);
  });

  test('with no value the caller gets the error, and only delete() removes a key', async () => {
    const { cache } = setup<number>();
    const boom = new Error('boom');
    await assert.rejects(cache.get('k', () => Promise.reject(boom)), (e) => e === boom);
    assert.equal(await cache.delete('k'), true);
    assert.equal(await cache.delete('k'), false);
  });
});

describe('per-key error backoff', () => {
  test('a key whose loader always fails, requested 200 times over 1 s, calls the loader at most 5 times', async () => {
    const { clock, cache } = setup<number>();
    let calls = 0;
    for (let i = 0; i < 200; i++) {
      await assert.rejects(cache.get('k', () => (calls++, Promise.reject(new Error('down')))));
      await clock.advance(5);
    }
    assert.ok(calls <= 5, `loader called ${calls} times`);
    assert.ok(calls >= 3, `backoff too long: ${calls}`);
  });

  test('during backoff callers get the remembered error or the stale value at once', async () => {
    const { clock, cache } = setup<number>({ ttl: 100, staleFor: 100_000 });
    const boom = new Error('down');
    await assert.rejects(cache.get('a', () => Promise.reject(boom)));
    let calls = 0;
    await assert.rejects(cache.get('a', () => ++calls), (e) => e === boom);
    assert.equal(calls, 0);

    await cache.get('b', () => 1);
    await clock.advance(200);
    const reasons: string[] = [];
    cache.on('stale', (e) => reasons.push(e.reason));
    assert.equal(await cache.get('b', () => Promise.reject(boom)), 1); // refresh fails in background
    await clock.settle();
    assert.equal(await cache.get('b', () => ++calls), 1);
    assert.equal(calls, 0);
    assert.deepEqual(reasons, ['revalidate', 'backoff']);
  });

  test('backoff doubles to its cap and resets on success', async () => {
    const { clock, cache } = setup<number>({ backoff: { base: 100, max: 400, jitter: 0 } });
    const delays: number[] = [];
    cache.on('error', (e) => delays.push(e.retryInMs));
    let fail = true;
    const loader = (): Promise<number> => (fail ? Promise.reject(new Error('x')) : Promise.resolve(1));
    for (let i = 0; i < 5; i++) {
      await assert.rejects(cache.get('k', loader));
      await clock.advance(delays.at(-1) as number);
    }
    assert.deepEqual(delays, [100, 200, 400, 400, 400]);
    fail = false;
    assert.equal(await cache.get('k', loader), 1);
    fail = true;
    await clock.advance(1_000_000);
    await assert.rejects(cache.get('k', loader));
    assert.equal(delays.at(-1), 100);
  });
});

describe('validation and last known good', () => {
  test('an invalid load never replaces a valid value; invalid event; backoff', async () => {
    const { clock, cache } = setup<{ n: number }>({ ttl: 100, staleFor: 100_000, validate: (v) => v.n > 0 || 'n must be positive' });
    await cache.get('cfg', () => ({ n: 1 }));
    await clock.advance(200);
    const invalid: string[] = [];
    cache.on('invalid', (e) => invalid.push(e.reason));
    let calls = 0;
    const bad = (): { n: number } => (calls++, { n: -1 });
    for (let i = 0; i < 100; i++) {
      assert.deepEqual(await cache.get('cfg', bad), { n: 1 });
      await clock.advance(10);
    }
    assert.deepEqual(invalid.slice(0, 1), ['n must be positive']);
    assert.ok(calls <= 5, `loader called ${calls} times`);
    assert.deepEqual(cache.peek('cfg'), { n: 1 });
  });

  test('with no valid value the caller gets ValidationError and nothing is stored', async () => {
    const { cache } = setup<number>({ validate: (v) => v >= 0 });
    await assert.rejects(cache.get('k', () => -5), (e) => e instanceof ValidationError && e.code === 'VALIDATION' && e.key === 'k');
    assert.equal(cache.peek('k'), undefined);
  });

  test('set() of an invalid value throws and keeps the old one', async () => {
    const { cache } = setup<number>({ validate: (v) => v >= 0 });
    await cache.set('k', 1);
    await assert.rejects(cache.set('k', -1), ValidationError);
    assert.equal(cache.peek('k'), 1);
  });

  test('a Standard Schema validator: its output is stored, its issues reported', async () => {
    type Cfg = { port: number };
    const schema = {
      '~standard': {
        version: 1 as const,
        vendor: 'test',
        validate: (v: unknown) =>
          typeof v === 'object' && v !== null && typeof (v as Cfg).port === 'number'
            ? { value: { port: (v as Cfg).port } }
            : { issues: [{ message: 'port must be a number', path: ['port'] }] },
      },
    };
    const { cache } = setup<Cfg>({ validate: schema });
    assert.deepEqual(await cache.get('a', () => ({ port: 80, extra: true }) as Cfg), { port: 80 });
    await assert.rejects(cache.get('b', () => ({ port: 'x' }) as unknown as Cfg), (e) => e instanceof ValidationError && e.reason === 'port must be a number' && e.issues?.length === 1);
  });

  test('an async Standard Schema validator is awaited', async () => {
    const schema = { '~standard': { version: 1 as const, vendor: 't', validate: async (v: unknown) => (v === 1 ? { value: 1 } : { issues: [{ message: 'not one' }] }) } };
    const { cache } = setup<number>({ validate: schema });
    assert.equal(await cache.get('a', () => 1), 1);
    await assert.rejects(cache.get('b', () => 2), /not one/);
  });

  test('a validator that throws rejects the value', async () => {
    const { cache } = setup<number>({
      validate: () => {
        throw new Error('bug in validator');
      },
    });
    await assert.rejects(cache.get('k', () => 1), (e) => e instanceof ValidationError && /bug in validator/.test(e.reason));
  });
});

describe('early refresh and jitter', () => {
  test('a hot key is refreshed before it expires, by about one caller', async () => {
    const clock = new VirtualClock({ seed: 3 });
    const cache = new Cache<number>({ ttl: 10_000, staleFor: 0, ttlJitter: 0, earlyRefresh: 1, clock });
    let calls = 0;
    const loader = async (): Promise<number> => {
      calls++;
      await new Promise<void>((r) => clock.setTimer(r, 200)); // each load takes 200 ms
      return calls;
    };
    await Promise.all([cache.get('hot', loader), clock.advance(200)]);
    // 100 reads a second for 30 s: the key must never be missing (no caller waits).
    let waited = 0;
    for (let t = 0; t < 30_000; t += 10) {
      const p = track(cache.get('hot', loader));
      await clock.settle();
      if (!p.settled) waited++;
      await clock.advance(10);
    }
    assert.equal(waited, 0);
    // About one refresh per ttl window (30 s / 10 s), never a burst.
    assert.ok(calls >= 3 && calls <= 6, `calls ${calls}`);
  });

  test('ttl jitter spreads the expiry of keys loaded together, and never lengthens it', async () => {
    const clock = new VirtualClock({ seed: 9 });
    const cache = new Cache<number>({ ttl: 1000, staleFor: 0, ttlJitter: 0.5, earlyRefresh: 0, clock });
    for (let i = 0; i < 100; i++) await cache.get(`k${i}`, () => i);
    const alive = (): number => Array.from({ length: 100 }, (_, i) => cache.peek(`k${i}`)).filter((v) => v !== undefined).length;
    await clock.advance(499);
    assert.equal(alive(), 100);
    await clock.advance(251);
    const mid = alive();
    assert.ok(mid > 20 && mid < 80, `alive at 750 ms: ${mid}`);
    await clock.advance(250);
    assert.equal(alive(), 0);
  });
});

describe('negative caching', () => {
  test('undefined from the loader is cached as absent for absentTtl', async () => {
    const { clock, cache } = setup<string | undefined>({ ttl: 60_000, absentTtl: 1000, staleFor: 0 });
    let calls = 0;
    const loader = (): undefined => void calls++;
    for (let i = 0; i < 10; i++) assert.equal(await cache.get('missing', loader), undefined);
    assert.equal(calls, 1);
    await clock.advance(1000);
    await cache.get('missing', loader);
    assert.equal(calls, 2);
  });
});

describe('origin budget', () => {
  test('loads across keys never exceed the budget; beyond the wait, OverloadedError', async () => {
    const clock = new VirtualClock();
    const guard = new ConcurrencyLimiter({ limit: 4, maxQueue: 4, queueTimeout: 100, clock });
    const cache = new Cache<number>({ clock, guard, earlyRefresh: 0 });
    let running = 0;
    let peak = 0;
    const loader = async (): Promise<number> => {
      running++;
      peak = Math.max(peak, running);
      await new Promise<void>((r) => clock.setTimer(r, 50));
      running--;
      return 1;
    };
    const results = Array.from({ length: 20 }, (_, i) => track(cache.get(`k${i}`, loader)));
    await clock.settle();
    const refused = results.filter((r) => r.error instanceof OverloadedError).length;
    assert.equal(refused, 12);
    await clock.advance(200);
    assert.equal(peak, 4);
    assert.equal(results.filter((r) => r.value === 1).length, 8);
  });

  test('a caller with a stale value gets it when the budget is full; others get OverloadedError', async () => {
    const clock = new VirtualClock();
    const guard = new ConcurrencyLimiter({ limit: 1, maxQueue: 0, clock });
    const cache = new Cache<number>({ clock, guard, ttl: 100, staleFor: 10_000, earlyRefresh: 0, ttlJitter: 0 });
    await cache.get('old', () => 1);
    await clock.advance(200);
    const hold = deferred<number>();
    const blocker = track(cache.get('busy', () => hold.promise));
    await clock.settle();
    assert.equal(await cache.get('old', () => 2), 1);
    await assert.rejects(cache.get('cold', () => 3), OverloadedError);
    hold.resolve(0);
    await clock.settle();
    assert.equal(blocker.value, 0);
  });
});

describe('a load refused by the origin budget is not the key\'s failure', () => {
  // A RateLimiter whose queueTimeout is longer than the cache's loadTimeout: a queued load meets its load timeout (or
  // its deadline) in the queue, never having reached the origin. Held against the key, it left a failure marker in the
  // shared tier and every process backed the key off (the lab's discord-2019 served stale settings 94–141 s past the
  // nodes' recovery).
  test("a load whose deadline passes in the budget's queue leaves no failure marker: another process loads the key at once", async () => {
    const clock = new VirtualClock();
    const store = new InMemorySharedStore({ clock });
    const shared = { store, namespace: 'app' };
    const options = { clock, loadTimeout: 100, earlyRefresh: 0, ttlJitter: 0, backoff: { base: 1_000, max: 30_000, jitter: 0 } };
    const a = new Cache<number>({ ...options, shared, guard: new RateLimiter({ clock, rate: 1, burst: 1, queueTimeout: 1_000 }) });
    const b = new Cache<number>({ ...options, shared });
    // The second's one token, spent.
    assert.equal(await a.get('other', () => 1), 1);
    let origin = 0;
    const refused = track(a.get('k', () => ++origin));
    await clock.advance(150);
    assert.ok(refused.error instanceof LoadTimeoutError, String(refused.error));
    assert.equal(origin, 0, 'the load never reached the origin');
    // Had the refusal been held against the key, b would get a LeaseBackoffError for the next second, with no load.
    const loaded = track(b.get('k', () => 7));
    await clock.advance(50);
    assert.equal(loaded.value, 7);
  });
});

describe('bounded memory', () => {
  test('maxEntries evicts the least recently used and reports it', async () => {
    const { cache } = setup<number>({ maxEntries: 3 });
    const evicted: string[] = [];
    cache.on('evict', (e) => evicted.push(`${e.key}:${e.reason}`));
    for (const k of ['a', 'b', 'c']) await cache.get(k, () => 1);
    await cache.get('a', () => 1); // a is now most recent
    await cache.get('d', () => 1);
    assert.deepEqual(evicted, ['b:capacity']);
    assert.equal(cache.size, 3);
  });

  test('maxBytes with a size function bounds the summed size; an oversize value is not kept', async () => {
    const { cache } = setup<string>({ maxBytes: 10, size: (v) => v.length });
    const evicted: string[] = [];
    cache.on('evict', (e) => evicted.push(`${e.key}:${e.reason}`));
    await cache.get('a', () => 'xxxx');
    await cache.get('b', () => 'xxxx');
    await cache.get('c', () => 'xxxx');
    assert.equal(cache.peek('a'), undefined);
    assert.deepEqual(evicted, ['a:capacity']);
    assert.equal(await cache.get('big', () => 'x'.repeat(11)), 'x'.repeat(11));
    assert.deepEqual(evicted, ['a:capacity', 'big:oversize']);
  });

  test('a size function that returns nonsense fails that load with ConfigError and stores nothing', async () => {
    const { cache } = setup<string>({ maxBytes: 10, size: (v) => (v === 'bad' ? Number.NaN : 1) });
    await cache.get('good', () => 'ok');
    await assert.rejects(cache.get('k', () => 'bad'), ConfigError);
    assert.equal(cache.peek('k'), undefined);
    assert.equal(cache.peek('good'), 'ok');
  });

  test('peek does not refresh recency', async () => {
    const { cache } = setup<number>({ maxEntries: 2 });
    await cache.get('a', () => 1);
    await cache.get('b', () => 2);
    cache.peek('a');
    await cache.get('c', () => 3);
    assert.equal(cache.peek('a'), undefined);
    assert.equal(cache.peek('b'), 2);
  });

  test('maxBytes without size is a ConfigError', () => {
    assert.throws(() => new Cache({ maxBytes: 10 }), ConfigError);
  });
});

describe('bad input: a clear error, nothing lost', () => {
  test('an async validator that never settles ends with the load timeout; the key is not held (issue 13, item 3)', async () => {
    const clock = new VirtualClock({ seed: 1 });
    let loads = 0;
    const cache = new Cache<number>({ clock, ttl: 1_000, loadTimeout: 500, ttlJitter: 0, earlyRefresh: 0, validate: hangingSchema<number>(() => true) });
    const first = track(cache.get('k', () => ++loads));
    await clock.advance(500);
    assert.ok(first.settled, 'settled at the load timeout');
    assert.ok(first.error instanceof LoadTimeoutError, String(first.error));
    const again = track(cache.get('k', () => ++loads));
    await clock.advance(500 + 60_000);
    assert.ok(again.settled, 'a later get is not stuck behind the first flight');
    assert.ok(again.error !== undefined);
  });

  test('per-call options on a hit: not an object is refused at once; a bad value is refused where it is read, at the first miss (issue 13, item 5)', async () => {
    const { clock, cache } = setup<number>({ ttl: 1_000 });
    await cache.set('k', 1);
    for (const bad of [null, 5, 'ttl']) await assert.rejects(cache.get('k', () => 2, bad as never), ConfigError);
    assert.equal(await cache.get('k', () => 2, { ttl: -1 }), 1, 'a fresh hit does not read the values (docs/cache.md)');
    await clock.advance(1_500);
    await assert.rejects(cache.get('k', () => 2, { ttl: -1 }), ConfigError);
    assert.equal(cache.peek('k'), 1, 'nothing stored is lost');
  });

  test('a loader that throws or rejects with a hostile value (a revoked Proxy) still settles, with a LoaderError (issue 13, item 4)', async () => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    const { clock, cache } = setup<number>({ ttl: 1_000, staleFor: 60_000 });
    await cache.set('kept', 7);
    await clock.advance(1_500);
    for (const [i, loader] of [() => Promise.reject(proxy), (): never => { throw proxy; }].entries()) {
      await assert.rejects(cache.get(`cold-${i}`, loader), (error: unknown) => error instanceof LoaderError && /cannot be described/.test(error.message));
      // A key with a value serves it: the hostile failure is a failure, not an eviction.
      assert.equal(await cache.get('kept', loader), 7);
      await clock.advance(60_000);
      await cache.set('kept', 7);
      await clock.advance(1_500);
    }
  });

  test('empty or non-string keys and non-function loaders are ArgumentErrors', async () => {
    const { cache } = setup<number>();
    await cache.set('keep', 1);
    await assert.rejects(cache.get('', () => 1), ArgumentError);
    await assert.rejects(cache.get(42 as unknown as string, () => 1), ArgumentError);
    await assert.rejects(cache.get('k', 'nope' as unknown as () => number), ArgumentError);
    await assert.rejects(cache.delete(''), ArgumentError);
    await assert.rejects(cache.set('', 1), ArgumentError);
    assert.equal(cache.peek('keep'), 1);
  });

  test('negative, NaN and Infinity durations are ConfigErrors, per cache and per call', async () => {
    for (const bad of [-1, Number.NaN, Infinity, '5' as unknown as number]) {
      assert.throws(() => new Cache({ ttl: bad }), ConfigError);
      assert.throws(() => new Cache({ staleFor: bad }), ConfigError);
      assert.throws(() => new Cache({ loadTimeout: bad }), ConfigError);
    }
    assert.throws(() => new Cache({ loadTimeout: 0 }), ConfigError);
    assert.throws(() => new Cache({ maxEntries: 0 }), ConfigError);
    assert.throws(() => new Cache({ ttlJitter: 2 }), ConfigError);
    assert.throws(() => new Cache({ backoff: { base: 100, max: 10 } }), ConfigError);
    const { cache } = setup<number>();
    await cache.set('keep', 1);
    await assert.rejects(cache.get('k', () => 1, { ttl: -5 }), ConfigError);
    await assert.rejects(cache.get('k', () => 1, { waitTimeout: Infinity }), ConfigError);
    assert.equal(cache.peek('keep'), 1);
  });

  test('a loader that throws synchronously is a failed load, not a crash', async () => {
    const { cache } = setup<number>();
    await assert.rejects(
      cache.get('k', () => {
        throw new Error('sync');
      }),
      /sync/,
    );
  });

  test('a loader that rejects with a non-Error gives a LoaderError carrying it', async () => {
    const { cache } = setup<number>();
    await assert.rejects(cache.get('k', () => Promise.reject('a string')), (e) => e instanceof LoaderError && e.cause === 'a string');
    await assert.rejects(
      cache.get('j', () => {
        throw null;
      }),
      (e) => e instanceof LoaderError && e.cause === null,
    );
  });

  test('a loader that never settles ends in LoadTimeoutError and frees the key', async () => {
    const { clock, cache } = setup<number>({ loadTimeout: 1000 });
    const p = track(cache.get('k', () => new Promise<number>(() => {})));
    await clock.advance(1000);
    assert.ok(p.error instanceof LoadTimeoutError);
    assert.equal((p.error as LoadTimeoutError).phase, 'load');
    assert.equal(cache.loading, 0);
  });

  test('a listener that throws does not break the cache', async () => {
    const { cache } = setup<number>();
    cache.on('load', () => {
      throw new Error('bad listener');
    });
    assert.equal(await cache.get('k', () => 1), 1);
  });
});

describe('set, delete, clear supersede loads in flight', () => {
  test('a load that started before delete() does not write back its value', async () => {
    const { clock, cache } = setup<number>();
    const d = deferred<number>();
    const waiter = track(cache.get('k', () => d.promise));
    await clock.settle();
    await cache.delete('k');
    d.resolve(1);
    await clock.settle();
    assert.equal(waiter.value, 1);
    assert.equal(cache.peek('k'), undefined);
  });

  test('a load that started before set() cannot overwrite the newer value', async () => {
    const { clock, cache } = setup<number>();
    const d = deferred<number>();
    track(cache.get('k', () => d.promise));
    await clock.settle();
    await cache.set('k', 2);
    d.resolve(1);
    await clock.settle();
    assert.equal(cache.peek('k'), 2);
  });

  test('clear() empties the cache and stray loads do not refill it', async () => {
    const { clock, cache } = setup<number>();
    const d = deferred<number>();
    await cache.set('a', 1);
    track(cache.get('b', () => d.promise));
    await clock.settle();
    cache.clear();
    d.resolve(2);
    await clock.settle();
    assert.equal(cache.size, 0);
  });

  test('a set() during a load that hangs does not let a second load of the key reach the origin (principle 2)', async () => {
    // Found by the property test: the origin hangs, a set() supersedes the load, the set value goes stale, and a read started a second load beside the first.
    const { clock, cache } = setup<number>({ ttl: 1_000, staleFor: 2_000, loadTimeout: 5_000 });
    let running = 0;
    let most = 0;
    let calls = 0;
    const loader = ({ signal }: { signal: AbortSignal }): Promise<number> => {
      calls++;
      most = Math.max(most, ++running);
      return new Promise((_, reject) => signal.addEventListener('abort', () => {
        running--;
        reject(signal.reason);
      }));
    };
    const first = track(cache.get('k', loader));
    await clock.settle();
    await cache.set('k', 2);
    await clock.advance(1_000);
    assert.equal(await cache.get('k', loader), 2, 'stale at once while it revalidates');
    await clock.advance(500);
    assert.equal(calls, 1, 'the revalidation waits for the superseded load to land');
    assert.equal(cache.loading, 2, 'both count as loads in flight');
    await clock.advance(3_500);
    assert.ok(first.error instanceof LoadTimeoutError, 'the superseded load ends at its own load timeout');
    assert.equal(calls, 2, 'then the revalidation calls the origin');
    assert.equal(most, 1);
    await clock.advance(5_000);
    assert.equal(cache.loading, 0);
  });

  test("a load waiting for a superseded one is bounded by its own load timeout, and takes none of the superseded load's result", async () => {
    const { clock, cache } = setup<number>({ loadTimeout: 1_000 });
    const old = deferred<number>();
    const first = track(cache.get('k', () => old.promise));
    await clock.advance(500);
    await cache.delete('k');
    const fresh = deferred<number>();
    let called = false;
    const second = track(cache.get('k', () => {
      called = true;
      return fresh.promise;
    }));
    old.resolve(1);
    await clock.settle();
    assert.equal(first.value, 1, "the superseded load's callers still get its result");
    assert.equal(called, true, 'the next load starts once the superseded one has landed');
    assert.equal(second.settled, false, 'and does not take its result');
    fresh.resolve(3);
    await clock.settle();
    assert.equal(second.value, 3);
    assert.equal(cache.peek('k'), 3);

    const hung = track(cache.get('h', () => new Promise<number>(() => {})));
    await clock.advance(900);
    await cache.delete('h');
    const waiting = track(cache.get('h', () => 4));
    await clock.advance(100);
    assert.ok(hung.error instanceof LoadTimeoutError);
    await clock.settle();
    assert.equal(waiting.value, 4, 'landed at 1,000 ms: the waiting load then ran within its own time');
    const late = track(cache.get('g', () => new Promise<number>(() => {})));
    await clock.settle();
    await cache.delete('g');
    let lateCalled = false;
    const blocked = track(cache.get('g', () => {
      lateCalled = true;
      return 5;
    }, { loadTimeout: 200 }));
    await clock.advance(200);
    assert.ok(blocked.error instanceof LoadTimeoutError, 'its own 200 ms ran out while the superseded load held the origin');
    assert.equal(lateCalled, false);
    assert.equal(late.settled, false);
    await clock.advance(800);
    assert.ok(late.error instanceof LoadTimeoutError);
  });

  test('set() clears a key backoff', async () => {
    const { cache } = setup<number>();
    await assert.rejects(cache.get('k', () => Promise.reject(new Error('x'))));
    await cache.set('k', 3);
    assert.equal(await cache.get('k', () => 4), 3);
  });
});
