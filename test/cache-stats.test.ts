import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Cache, type CacheOptions, type CacheStats, CircuitBreaker, createSystemClock, Events, InMemorySharedStore, VirtualClock } from '../src/index.js';
import { deferred } from './helpers.js';

function setup<V>(options: CacheOptions<V> = {}): { clock: VirtualClock; cache: Cache<V> } {
  const clock = new VirtualClock({ seed: 1 });
  const cache = new Cache<V>({ ttlJitter: 0, earlyRefresh: 0, clock, ...options });
  return { clock, cache };
}

/** The counters of a cache that has done nothing, for `{ ...ZERO, changed }` expectations. */
const ZERO: CacheStats = { requests: 0, hits: 0, stale: 0, staleBy: { revalidate: 0, error: 0, backoff: 0, timeout: 0 }, misses: 0, errors: 0, loads: 0, warmLoads: 0, loadErrors: 0, backoffRefusals: 0, validationRejections: 0, coalesced: 0, evictions: 0, entries: 0, loading: 0, shared: undefined };

describe('stats: every get ends as one outcome, and loads are the origin queries', () => {
  test('hits, misses and coalesced waiters: one load for ten callers', async () => {
    const { cache } = setup<number>();
    const d = deferred<number>();
    let calls = 0;
    const gets = Array.from({ length: 10 }, () => cache.get('k', () => (calls++, d.promise)));
    assert.deepEqual(cache.stats(), { ...ZERO, entries: 0, loading: 1, coalesced: 9, loads: 1 });
    d.resolve(1);
    await Promise.all(gets);
    await cache.get('k', () => 2);
    assert.equal(calls, 1);
    assert.deepEqual(cache.stats(), { ...ZERO, requests: 11, hits: 1, misses: 10, loads: 1, coalesced: 9, entries: 1 });
  });

  test('a failing origin: errors, then backoff refusals without loads (the Facebook loop, counted)', async () => {
    const { clock, cache } = setup<number>({ ttl: 1_000, staleFor: 60_000 });
    await cache.get('k', () => 1);
    await clock.advance(1_001);
    const down = (): Promise<number> => Promise.reject(new Error('db down'));
    // Stale while revalidating: the caller gets the value, the refresh fails in the background.
    assert.equal(await cache.get('k', down), 1);
    await clock.settle();
    // Backing off: three more reads, no load.
    for (let i = 0; i < 3; i++) assert.equal(await cache.get('k', down), 1);
    // A key with no value: its error, then its remembered error while it backs off.
    await assert.rejects(cache.get('cold', down), /db down/);
    await assert.rejects(cache.get('cold', down), /db down/);
    const s = cache.stats();
    assert.deepEqual(s, { ...ZERO, requests: 7, misses: 1, stale: 4, staleBy: { revalidate: 1, error: 0, backoff: 3, timeout: 0 }, errors: 2, loads: 3, loadErrors: 2, backoffRefusals: 4, entries: 2 });
    assert.equal(s.loads / s.requests, 3 / 7, 'origin amplification stays below one while the origin fails');
  });

  test('an invalid value is a validation rejection, and the last known good is served', async () => {
    const { clock, cache } = setup<number>({ ttl: 1_000, staleFor: 60_000, validate: (v) => v > 0 || 'not positive' });
    await cache.get('k', () => 5);
    await clock.advance(1_001);
    assert.equal(await cache.get('k', () => -1), 5);
    await clock.settle();
    assert.deepEqual(cache.stats(), { ...ZERO, requests: 2, misses: 1, stale: 1, staleBy: { ...ZERO.staleBy, revalidate: 1 }, loads: 2, validationRejections: 1, entries: 1 });
  });

  test('evictions are counted, and a set is neither a request nor a load', async () => {
    const { cache } = setup<number>({ maxEntries: 2 });
    await cache.set('a', 1);
    await cache.set('b', 2);
    await cache.set('c', 3);
    assert.deepEqual(cache.stats(), { ...ZERO, evictions: 1, entries: 2 });
  });

  test('warm-up loads are counted apart: they are not read-driven origin load', async () => {
    const { clock, cache } = setup<number>();
    const warming = cache.warm(['a', 'b', 'c'], ({ key }) => key.length);
    await clock.runUntilIdle();
    await warming;
    await cache.get('a', () => 0);
    const s = cache.stats();
    assert.equal(s.loads, 3);
    assert.equal(s.warmLoads, 3);
    assert.equal(s.requests, 1);
    assert.equal((s.loads - s.warmLoads) / s.requests, 0, 'the origin amplification of a warmed cache read once');
  });

  test('stale on error is told from routine revalidation', async () => {
    const { clock, cache } = setup<number>({ ttl: 1_000, staleFor: 60_000, staleWhileRevalidate: false });
    await cache.get('k', () => 1);
    await clock.advance(1_001);
    assert.equal(await cache.get('k', () => Promise.reject(new Error('down'))), 1);
    assert.deepEqual(cache.stats().staleBy, { revalidate: 0, error: 1, backoff: 0, timeout: 0 });
  });

  test('with a shared tier: its reads, hits and the bus', async () => {
    const clock = new VirtualClock({ seed: 1 });
    const store = new InMemorySharedStore({ clock });
    const a = new Cache<number>({ clock, ttlJitter: 0, earlyRefresh: 0, shared: { store } });
    const b = new Cache<number>({ clock, ttlJitter: 0, earlyRefresh: 0, shared: { store } });
    await clock.settle();
    await a.get('k', () => 1);
    assert.equal(await b.get('k', () => 2), 1, 'b reads a’s value from the shared tier');
    assert.deepEqual(b.stats().shared, { reads: 1, hits: 1, errors: 0, leaseWaits: 0, busUp: true, busGaps: 0, tagInvalidationsHeard: 0 });
    assert.equal(b.stats().loads, 0, 'no origin query in b');
    assert.equal(a.stats().shared?.hits, 0);
    await a.close();
    await b.close();
  });
});

describe('load events: what a histogram of load times is built on', () => {
  test('set() emits no load event; a load reports its own duration', async () => {
    const { clock, cache } = setup<number>();
    const loads: number[] = [];
    cache.on('load', ({ ms }) => loads.push(ms));
    await cache.set('a', 1);
    assert.deepEqual(loads, [], 'a set took no load: a load of 0 ms would drag a histogram down');
    const got = cache.get('b', () => new Promise<number>((resolve) => clock.setTimer(() => resolve(2), 37)));
    await clock.advance(37);
    assert.equal(await got, 2);
    assert.deepEqual(loads, [37]);
  });

  test('an error event carries the failed load’s duration', async () => {
    const { clock, cache } = setup<number>();
    const failed: number[] = [];
    cache.on('error', ({ ms }) => failed.push(ms));
    const got = cache.get('k', () => new Promise<number>((_, reject) => clock.setTimer(() => reject(new Error('x')), 12)));
    await clock.advance(12);
    await assert.rejects(got);
    assert.deepEqual(failed, [12]);
  });

  test('the system clock measures a sub-millisecond load as more than 0 ms', async () => {
    // now() reuses its reading for up to 1 ms (it is on the hit path); a load
    // is timed with precise(), so a 0.3 ms load is not reported as 0.
    const clock = createSystemClock(1);
    const cache = new Cache<number>({ clock });
    const loads: number[] = [];
    cache.on('load', ({ ms }) => loads.push(ms));
    // Bounded above by the whole get as measured around it, not by a figure a
    // busy machine can exceed (a 0.3 ms spin preempted for 68 ms was seen).
    const started = performance.now();
    await cache.get('k', () => {
      const until = performance.now() + 0.3;
      while (performance.now() < until);
      return 1;
    });
    const whole = performance.now() - started;
    assert.equal(loads.length, 1);
    assert.ok(loads[0]! >= 0.3 && loads[0]! <= whole, `load took ${loads[0]} ms, the whole get ${whole} ms`);
  });
});

describe('a listener that throws is isolated, and seen', () => {
  test('the other listeners still run, and onListenerError gets the error and the event', () => {
    const seen: unknown[] = [];
    const events = new Events<{ ping: (n: number) => void }>((error, event) => seen.push([event, (error as Error).message]));
    const got: number[] = [];
    events.on('ping', () => {
      throw new Error('broken dashboard');
    });
    events.on('ping', (n) => got.push(n));
    events.emit('ping', 1);
    assert.deepEqual(got, [1]);
    assert.deepEqual(seen, [['ping', 'broken dashboard']]);
  });

  test('a handler that throws too does not reach the emitter', () => {
    const events = new Events<{ ping: () => void }>(() => {
      throw new Error('handler broken');
    });
    events.on('ping', () => {
      throw new Error('listener broken');
    });
    assert.doesNotThrow(() => events.emit('ping', undefined as never));
  });

  test('by default it is a process warning, DAMPER_LISTENER_ERROR', async () => {
    const warned = new Promise<Error & { code?: string }>((resolve) => process.once('warning', resolve));
    const { cache } = setup<number>();
    cache.on('load', () => {
      throw new Error('broken alert');
    });
    assert.equal(await cache.get('k', () => 1), 1, 'the read is unaffected');
    const warning = await warned;
    assert.equal(warning.code, 'DAMPER_LISTENER_ERROR');
    assert.match(warning.message, /"load".*broken alert/);
    // Once per event: a listener that throws on every load is one warning, not a flood.
    let more = 0;
    const count = (w: Error & { code?: string }): void => void (w.code === 'DAMPER_LISTENER_ERROR' && more++);
    process.on('warning', count);
    for (let i = 0; i < 5; i++) await cache.get(`k${i}`, () => i);
    await new Promise((resolve) => setImmediate(resolve));
    process.off('warning', count);
    assert.equal(more, 0);
  });

  test("a cache's onListenerError option receives what its listeners throw", async () => {
    const seen: string[] = [];
    const { cache } = setup<number>({ onListenerError: (error, event) => seen.push(`${event}: ${(error as Error).message}`) });
    cache.on('load', () => {
      throw new Error('oops');
    });
    await cache.get('k', () => 1);
    assert.deepEqual(seen, ['load: oops']);
  });

  test('every class with events takes onListenerError: a breaker, say', async () => {
    const seen: string[] = [];
    const breaker = new CircuitBreaker({ clock: new VirtualClock({ seed: 1 }), consecutiveFailures: 1, onListenerError: (error, event) => seen.push(`${event}: ${(error as Error).message}`) });
    breaker.on('state', () => {
      throw new Error('pager down');
    });
    await assert.rejects(breaker.execute(() => Promise.reject(new Error('x'))), /x/);
    assert.equal(breaker.state, 'open', 'the transition happened all the same');
    assert.deepEqual(seen, ['state: pager down']);
  });
});
