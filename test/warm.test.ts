import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ArgumentError, Cache, type CacheOptions, ConcurrencyLimiter, ConfigError, OverloadedError, type Snapshot, sleep, VirtualClock } from '../src/index.js';
import { deferred, track } from './helpers.js';

function setup<V>(options: CacheOptions<V> = {}, start = 0): { clock: VirtualClock; cache: Cache<V> } {
  const clock = new VirtualClock({ seed: 1, start });
  const cache = new Cache<V>({ ttlJitter: 0, earlyRefresh: 0, clock, ...options });
  return { clock, cache };
}

const keys = (n: number, prefix = 'k'): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

/** A loader that takes `ms` of virtual time and records starts and peak concurrency. */
function meteredLoader(clock: VirtualClock, ms: number, fail?: (key: string) => boolean) {
  const m = { starts: [] as number[], inFlight: 0, peak: 0, calls: 0 };
  const loader = async ({ key }: { key: string }): Promise<string> => {
    m.calls++;
    m.starts.push(clock.now());
    m.peak = Math.max(m.peak, ++m.inFlight);
    try {
      await sleep(clock, ms);
      if (fail?.(key) === true) throw new Error(`no ${key}`);
      return `v:${key}`;
    } finally {
      m.inFlight--;
    }
  };
  return { m, loader };
}

describe('warm: pacing', () => {
  test('never more than `rate` load starts in any virtual second, evenly spaced', async () => {
    const { clock, cache } = setup<string>();
    const { m, loader } = meteredLoader(clock, 10);
    const run = track(cache.warm(keys(100), loader, { rate: 20, concurrency: 4 }));
    await clock.runUntilIdle();
    assert.equal(run.settled, true);
    assert.deepEqual({ ...run.value, failures: undefined }, { loaded: 100, skipped: 0, failed: 0, failures: undefined, durationMs: 4960, aborted: false });
    // Sliding window: any 1 s window holds at most 20 starts.
    for (let i = 20; i < m.starts.length; i++) assert.ok(m.starts[i]! - m.starts[i - 20]! >= 1000, `start ${i} too early`);
    const perSecond = new Map<number, number>();
    for (const t of m.starts) perSecond.set(Math.floor(t / 1000), (perSecond.get(Math.floor(t / 1000)) ?? 0) + 1);
    assert.deepEqual([...perSecond.values()], [20, 20, 20, 20, 20]);
    assert.equal(clock.pendingTimers, 0);
  });

  test('property: whatever the rate, concurrency and load times, starts are at least 1000 / rate ms apart and at most `concurrency` loads run', async () => {
    await fc.assert(
      fc.asyncProperty(fc.double({ min: 0.5, max: 500, noNaN: true }), fc.integer({ min: 1, max: 8 }), fc.array(fc.integer({ min: 0, max: 300 }), { minLength: 1, maxLength: 40 }), async (rate, concurrency, loadMs) => {
        const { clock, cache } = setup<string>();
        const m = { starts: [] as number[], inFlight: 0, peak: 0 };
        const loader = async ({ key }: { key: string }): Promise<string> => {
          m.starts.push(clock.now());
          m.peak = Math.max(m.peak, ++m.inFlight);
          await sleep(clock, loadMs[Number(key.slice(1))]!);
          m.inFlight--;
          return key;
        };
        const run = track(cache.warm(keys(loadMs.length), loader, { rate, concurrency }));
        await clock.runUntilIdle();
        assert.equal(run.value?.loaded, loadMs.length);
        assert.ok(m.peak <= concurrency, `peak ${m.peak} > ${concurrency}`);
        for (let i = 1; i < m.starts.length; i++) assert.ok(m.starts[i]! - m.starts[i - 1]! >= 1000 / rate - 1e-6, `starts ${i - 1} and ${i} ${m.starts[i]! - m.starts[i - 1]!} ms apart at ${rate}/s`);
        assert.equal(clock.pendingTimers, 0);
      }),
      { numRuns: 60 },
    );
  });

  test('never more than `concurrency` loads in flight', async () => {
    const { clock, cache } = setup<string>();
    const { m, loader } = meteredLoader(clock, 500);
    const run = track(cache.warm(keys(30), loader, { rate: 1000, concurrency: 3 }));
    await clock.runUntilIdle();
    assert.equal(run.value?.loaded, 30);
    assert.equal(m.peak, 3);
    assert.equal(clock.pendingTimers, 0);
  });

  test('a key is read from the source only when a slot is free for it', async () => {
    const { clock, cache } = setup<string>();
    const { loader } = meteredLoader(clock, 1000);
    const pulls: number[] = [];
    async function* source(): AsyncGenerator<string> {
      for (const k of keys(5)) {
        pulls.push(clock.now());
        yield k;
      }
    }
    const run = track(cache.warm(source(), loader, { rate: 1000, concurrency: 2 }));
    await clock.runUntilIdle();
    assert.equal(run.value?.loaded, 5);
    // The third key waits for the first load to end, not only for its start.
    assert.deepEqual(pulls, [0, 0, 1000, 1001, 2000]);
  });

  test('a key source that fails rejects the warm-up with its error', async () => {
    const { clock, cache } = setup<string>();
    const { loader } = meteredLoader(clock, 10);
    const broken = new Error('source down');
    async function* source(): AsyncGenerator<string> {
      yield 'k0';
      throw broken;
    }
    const run = track(cache.warm(source(), loader, { rate: 1000, concurrency: 1 }));
    await clock.runUntilIdle();
    assert.equal(run.error, broken);
    assert.equal(cache.peek('k0'), 'v:k0');
    assert.equal(clock.pendingTimers, 0);
  });

  test('defaults: concurrency 4, rate 50/s, and an async iterable of keys', async () => {
    const { clock, cache } = setup<string>();
    const { m, loader } = meteredLoader(clock, 1000);
    async function* source(): AsyncGenerator<string> {
      for (const k of keys(20)) yield k;
    }
    const run = track(cache.warm(source(), loader));
    await clock.runUntilIdle();
    assert.equal(run.value?.loaded, 20);
    assert.equal(m.peak, 4);
    assert.deepEqual(m.starts.slice(0, 4), [0, 20, 40, 60]);
  });
});

describe('warm: per-key outcomes', () => {
  test('fresh keys are skipped without a load and without using the rate', async () => {
    const { clock, cache } = setup<string>();
    await cache.set('k0', 'kept');
    await cache.set('k1', 'kept');
    const { m, loader } = meteredLoader(clock, 1);
    const run = track(cache.warm(['k0', 'k1', 'k2', 'k2'], loader, { rate: 1, concurrency: 1 }));
    await clock.runUntilIdle();
    assert.deepEqual([run.value?.loaded, run.value?.skipped, run.value?.failed], [1, 3, 0]);
    assert.equal(m.calls, 1);
    assert.deepEqual(m.starts, [0]);
    assert.equal(cache.peek('k0'), 'kept');
  });

  test('a failing key is counted and the rest are loaded; onKey sees every outcome', async () => {
    const { clock, cache } = setup<string>();
    const { loader } = meteredLoader(clock, 5, (k) => k === 'k3');
    const seen: string[] = [];
    const run = track(cache.warm([...keys(8), ''], loader, { rate: 100, onKey: (k, o) => seen.push(`${k}:${o.status}`) }));
    await clock.runUntilIdle();
    assert.equal(run.value?.loaded, 7);
    assert.equal(run.value?.failed, 2);
    assert.deepEqual(run.value?.failures.map((f) => f.key).sort(), ['', 'k3']);
    assert.ok(run.value?.failures.some((f) => f.error instanceof ArgumentError));
    assert.equal(seen.length, 9);
    assert.ok(seen.includes('k3:failed'));
    for (const k of keys(8)) if (k !== 'k3') assert.equal(cache.peek(k), `v:${k}`);
  });

  test('coalesces with a concurrent get of the same key: one loader call', async () => {
    const { clock, cache } = setup<number>();
    let calls = 0;
    const d = deferred<number>();
    const live = track(cache.get('a', () => (calls++, d.promise)));
    const run = track(cache.warm(['a'], () => (calls++, d.promise)));
    await clock.settle();
    d.resolve(7);
    await clock.runUntilIdle();
    assert.equal(calls, 1);
    assert.equal(live.value, 7);
    assert.equal(run.value?.loaded, 1);
  });

  test('abort stops the warm-up at once and leaves no timer behind', async () => {
    const { clock, cache } = setup<string>();
    const { m, loader } = meteredLoader(clock, 0);
    const ac = new AbortController();
    const run = track(cache.warm(keys(10), loader, { rate: 1, concurrency: 2, signal: ac.signal }));
    await clock.advance(2500);
    ac.abort();
    await clock.settle();
    assert.equal(run.settled, true);
    assert.equal(run.value?.aborted, true);
    assert.equal(run.value?.loaded, 3);
    assert.equal(clock.pendingTimers, 0);
    await clock.advance(10_000);
    assert.equal(m.calls, 3);
  });

  test('an already-aborted signal loads nothing', async () => {
    const { clock, cache } = setup<string>();
    const { m, loader } = meteredLoader(clock, 0);
    const summary = await cache.warm(keys(5), loader, { signal: AbortSignal.abort() });
    assert.equal(summary.aborted, true);
    assert.equal(m.calls, 0);
    assert.equal(clock.pendingTimers, 0);
  });
});

describe('warm: origin budget', () => {
  test('warm-up loads and live gets share the guard: never more than its limit at the origin; live gets win', async () => {
    const clock = new VirtualClock({ seed: 1 });
    const guard = new ConcurrencyLimiter({ limit: 2, clock });
    const cache = new Cache<string>({ ttlJitter: 0, earlyRefresh: 0, clock, guard });
    const { m, loader } = meteredLoader(clock, 50);
    const run = track(cache.warm(keys(40, 'w'), loader, { rate: 200, concurrency: 4 }));
    const live: ReturnType<typeof track<string>>[] = [];
    for (let i = 0; i < 10; i++) {
      live.push(track(cache.get(`live${i}`, loader)));
      await clock.advance(25);
    }
    await clock.runUntilIdle();
    assert.ok(m.peak <= 2, `peak origin concurrency ${m.peak}`);
    assert.ok(live.every((l) => l.value?.startsWith('v:live')), `every live get served: ${live.map((l) => String(l.value ?? (l.error as Error)?.message)).join(', ')}`);
    const s = run.value!;
    assert.equal(s.loaded, 40, "refused warm-up loads are tried again at later slots, once live traffic leaves capacity");
    assert.equal(s.loaded + s.failed, 40);
    assert.ok(s.failures.every((f) => f.error instanceof OverloadedError), 'warm-up failures are only sheds');
    // A shed warm-up key is not held against the key: the next get loads it at once.
    if (s.failures.length > 0) {
      const key = s.failures[0]!.key;
      assert.equal(await cache.get(key, () => 'later'), 'later');
    }
    assert.equal(clock.pendingTimers, 0);
  });
});

describe('warm: bad input', () => {
  test('bad options throw ConfigError; bad keys or loader ArgumentError', async () => {
    const { cache } = setup<string>();
    const l = (): string => 'x';
    for (const o of [{ concurrency: 0 }, { concurrency: 1.5 }, { rate: 0 }, { rate: -1 }, { rate: Number.NaN }, { rate: Infinity }, { priority: 'urgent' }, { signal: {} }]) {
      await assert.rejects(cache.warm(['a'], l, o as never), ConfigError, JSON.stringify(o));
    }
    await assert.rejects(cache.warm(42 as never, l), ArgumentError);
    await assert.rejects(cache.warm(['a'], 'nope' as never), ArgumentError);
    assert.equal(cache.size, 0);
  });
});

describe('snapshot and restore', () => {
  async function warmCache(): Promise<Cache<number>> {
    const { clock, cache } = setup<number>({ ttl: 1000, staleFor: 5000 });
    await cache.get('a', () => 1);
    await cache.get('b', () => 2);
    await cache.get('gone', () => 3);
    await clock.advance(400);
    await cache.set('late', 4);
    await clock.advance(0);
    return cache;
  }

  test('snapshot → JSON → restore on a fresh cache with another clock origin; windows are relative', async () => {
    const old = await warmCache();
    const json = JSON.stringify(old.snapshot());
    const snap = JSON.parse(json) as Snapshot<number>;
    assert.equal(snap.version, 1);
    assert.deepEqual(snap.entries.find((e) => e.key === 'a'), { key: 'a', value: 1, freshMs: 600, servableMs: 5600 });

    const { clock, cache } = setup<number>({ ttl: 1000, staleFor: 5000 }, 1e9);
    const summary = await cache.restore(snap, { elapsedMs: 100 });
    assert.deepEqual(summary, { restored: 4, invalid: 0, expired: 0, kept: 0 });
    let calls = 0;
    await clock.advance(499);
    assert.equal(await cache.get('a', () => ++calls), 1);
    assert.equal(calls, 0, 'still fresh 500 ms after restore');
    await clock.advance(1);
    assert.equal(cache.peek('a'), 1);
    await clock.advance(5499 - 500);
    assert.equal(cache.peek('a'), 1, 'servable until 5500 ms');
    await clock.advance(1);
    assert.equal(cache.peek('a'), undefined);
  });

  test('elapsedMs past the window expires entries; maxAgeMs caps what remains', async () => {
    const old = await warmCache();
    const snap = old.snapshot();
    const { clock, cache } = setup<number>();
    assert.deepEqual(await cache.restore(snap, { elapsedMs: 6000 }), { restored: 0, invalid: 0, expired: 4, kept: 0 });
    assert.deepEqual(await cache.restore(snap, { maxAgeMs: 200 }), { restored: 4, invalid: 0, expired: 0, kept: 0 });
    await clock.advance(200);
    assert.equal(cache.peek('a'), undefined);
  });

  test('invalid values are skipped and never stored; the key is not put in backoff', async () => {
    const { cache } = setup<number>({ validate: (v) => v >= 0 || 'negative' });
    const snap: Snapshot<number> = { format: 'damper.cache.snapshot', version: 1, entries: [
      { key: 'ok', value: 1, freshMs: 1000, servableMs: 2000 },
      { key: 'bad', value: -1, freshMs: 1000, servableMs: 2000 },
    ] };
    assert.deepEqual(await cache.restore(snap), { restored: 1, invalid: 1, expired: 0, kept: 0 });
    assert.equal(cache.peek('bad'), undefined);
    assert.equal(await cache.get('bad', () => 5), 5);
  });

  test('a newer value already cached, or a load in flight, is never overwritten', async () => {
    const { clock, cache } = setup<number>();
    await cache.set('a', 99);
    const d = deferred<number>();
    const loading = track(cache.get('b', () => d.promise));
    await clock.settle();
    const snap: Snapshot<number> = { format: 'damper.cache.snapshot', version: 1, entries: [
      { key: 'a', value: 1, freshMs: 1000, servableMs: 2000 },
      { key: 'b', value: 1, freshMs: 1000, servableMs: 2000 },
    ] };
    assert.deepEqual(await cache.restore(snap), { restored: 0, invalid: 0, expired: 0, kept: 2 });
    d.resolve(42);
    await clock.settle();
    assert.equal(loading.value, 42);
    assert.equal(cache.peek('a'), 99);
    assert.equal(cache.peek('b'), 42);
  });

  test('a malformed snapshot rejects with ArgumentError and changes nothing', async () => {
    const { cache } = setup<number>();
    await cache.set('x', 1);
    const good = { key: 'y', value: 2, freshMs: 10, servableMs: 20 };
    const bad: unknown[] = [
      null,
      'snapshot',
      { format: 'other', version: 1, entries: [] },
      { format: 'damper.cache.snapshot', version: 2, entries: [] },
      { format: 'damper.cache.snapshot', version: 1 },
      { format: 'damper.cache.snapshot', version: 1, entries: [good, { key: 'x', value: 3, freshMs: -1, servableMs: 20 }] },
      { format: 'damper.cache.snapshot', version: 1, entries: [good, { key: 'z', value: 3, freshMs: 30, servableMs: 20 }] },
      { format: 'damper.cache.snapshot', version: 1, entries: [good, { key: '', value: 3, freshMs: 1, servableMs: 2 }] },
      { format: 'damper.cache.snapshot', version: 1, entries: [good, { key: 'z', freshMs: 1, servableMs: 2 }] },
      { format: 'damper.cache.snapshot', version: 1, entries: [good, good] },
    ];
    for (const s of bad) await assert.rejects(cache.restore(s as never), ArgumentError, JSON.stringify(s));
    assert.equal(cache.size, 1);
    assert.equal(cache.peek('x'), 1);
    assert.equal(cache.peek('y'), undefined);
  });

  test('bad restore options throw ConfigError', async () => {
    const { cache } = setup<number>();
    const snap = cache.snapshot();
    for (const o of [{ elapsedMs: -1 }, { elapsedMs: Number.NaN }, { maxAgeMs: 'long' }, 5]) {
      await assert.rejects(cache.restore(snap, o as never), ConfigError, JSON.stringify(o));
    }
  });
});
