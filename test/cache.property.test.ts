import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Backoff, Cache, VirtualClock } from '../src/index.js';

/**
 * Model-based properties of the cache: random interleavings of reads, origin
 * behaviour changes (healthy, failing, hanging, serving invalid values) and
 * time steps, run on the virtual clock against the real Cache.
 */

interface Value {
  readonly key: string;
  readonly version: number;
  readonly valid: boolean;
  readonly loadedAt: number;
}

type Origin = 'ok' | 'error' | 'invalid' | 'hang';

type Step =
  | { readonly kind: 'get'; readonly key: string; readonly count: number }
  | { readonly kind: 'origin'; readonly key: string; readonly mode: Origin; readonly latency: number }
  | { readonly kind: 'advance'; readonly ms: number }
  | { readonly kind: 'set'; readonly key: string };

const KEYS = ['a', 'b', 'c'];
const TTL = 1_000;
const STALE_FOR = 3_000;
const LOAD_TIMEOUT = 2_000;

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('get' as const), key: fc.constantFrom(...KEYS), count: fc.integer({ min: 1, max: 5 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('origin' as const), key: fc.constantFrom(...KEYS), mode: fc.constantFrom<Origin>('ok', 'ok', 'error', 'invalid', 'hang'), latency: fc.integer({ min: 0, max: 600 }) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.oneof(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 1_500 })) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('set' as const), key: fc.constantFrom(...KEYS) }) },
);

/** The origin's log, in the order things happened. */
type Event = { readonly type: 'start' | 'end'; readonly key: string; readonly call: number; readonly at: number; readonly ok?: boolean } | { readonly type: 'set'; readonly key: string };

test('cache invariants hold under random interleavings of reads, failures and time', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 80 }), fc.integer({ min: 1, max: 1000 }), async (steps, seed) => {
      const clock = new VirtualClock({ seed });
      const backoff = new Backoff({ base: 100, max: 2_000, jitter: 0.2 });
      const cache = new Cache<Value>({ clock, ttl: TTL, staleFor: STALE_FOR, loadTimeout: LOAD_TIMEOUT, ttlJitter: 0, earlyRefresh: 1, backoff, validate: (v) => v.valid });
      const origin = new Map<string, { mode: Origin; latency: number }>(KEYS.map((k) => [k, { mode: 'ok', latency: 50 }]));
      const inFlight = new Map<string, number>();
      const log: Event[] = [];
      let callSeq = 0;
      // What the model says each key holds: the last value the cache committed.
      const committed = new Map<string, Value>();
      let version = 0;

      // Assertions inside a loader or a listener would be caught by the cache
      // (as a load failure, or an isolated listener error): record them instead.
      const violations: string[] = [];
      cache.on('load', ({ key }) => {
        const v = cache.peek(key);
        if (v === undefined || !v.valid) violations.push(`committed ${JSON.stringify(v)} for "${key}"`);
        else committed.set(key, v);
      });

      const loader = ({ key, signal }: { key: string; signal: AbortSignal }): Promise<Value> => {
        const n = (inFlight.get(key) ?? 0) + 1;
        // Invariant: at most one load per key in flight.
        if (n !== 1) violations.push(`${n} loads of "${key}" in flight at ${clock.now()}`);
        inFlight.set(key, n);
        const call = callSeq++;
        log.push({ type: 'start', key, call, at: clock.now() });
        const { mode, latency } = origin.get(key)!;
        let ended = false;
        return new Promise<Value>((resolve, reject) => {
          const finish = (ok: boolean, settle: () => void): void => {
            if (ended) return;
            ended = true;
            log.push({ type: 'end', key, call, at: clock.now(), ok });
            inFlight.set(key, 0);
            settle();
          };
          signal.addEventListener('abort', () => finish(false, () => reject(signal.reason)), { once: true });
          if (mode === 'hang') return;
          clock.setTimer(() => {
            if (mode === 'error') finish(false, () => reject(new Error(`origin error for ${key}`)));
            // An invalid value counts as a failure for the backoff schedule.
            else finish(mode === 'ok', () => resolve({ key, version: ++version, valid: mode === 'ok', loadedAt: clock.now() }));
          }, latency);
        });
      };

      const served: Promise<void>[] = [];
      const check = (v: Value, key: string): void => {
        assert.equal(v.key, key);
        // Invariant: an invalid value is never served.
        assert.ok(v.valid, 'served an invalid value');
        // Invariant: a served value is never older than ttl + staleFor.
        assert.ok(clock.now() - v.loadedAt <= TTL + STALE_FOR, `served a value ${clock.now() - v.loadedAt} ms old`);
      };

      for (const s of steps) {
        switch (s.kind) {
          case 'get':
            for (let i = 0; i < s.count; i++) served.push(cache.get(s.key, loader).then((v) => check(v, s.key), () => undefined));
            break;
          case 'origin':
            origin.set(s.key, { mode: s.mode, latency: s.latency });
            break;
          case 'set': {
            const v = { key: s.key, version: ++version, valid: true, loadedAt: clock.now() };
            log.push({ type: 'set', key: s.key });
            await cache.set(s.key, v);
            // A set is not a load: it emits no `load` event, so the model records it here.
            committed.set(s.key, v);
            break;
          }
          case 'advance':
            await clock.advance(s.ms);
            break;
        }
        await clock.settle();
        assert.deepEqual(violations, []);
        // Invariant: an error never removes or replaces a value. The cache holds
        // exactly the last committed value while it may be served.
        for (const key of KEYS) {
          const last = committed.get(key);
          const expected = last !== undefined && clock.now() - last.loadedAt < TTL + STALE_FOR ? last : undefined;
          assert.equal(cache.peek(key), expected, `peek("${key}") at ${clock.now()}`);
        }
      }
      await clock.advance(LOAD_TIMEOUT + 1);
      await Promise.all(served);
      assert.deepEqual(violations, []);

      // Invariant: loads of a failing key follow the backoff schedule. A set()
      // resets the schedule, and a load it superseded does not count.
      for (const key of KEYS) {
        let failures = 0;
        let lastEnd = 0;
        let superseded = -1;
        let open = -1;
        for (const e of log) {
          if (e.key !== key) continue;
          if (e.type === 'set') {
            failures = 0;
            superseded = open;
          } else if (e.type === 'start') {
            if (failures > 0) assert.ok(e.at - lastEnd >= backoff.minDelay(failures) - 1e-9, `"${key}" retried ${e.at - lastEnd} ms after failure ${failures}`);
            open = e.call;
          } else {
            open = -1;
            if (e.call === superseded) continue;
            failures = e.ok === true ? 0 : failures + 1;
            lastEnd = e.at;
          }
        }
      }
    }),
    { numRuns: 150 },
  );
});

test('a failing key is retried no sooner than its backoff schedule allows', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.record({ gap: fc.integer({ min: 0, max: 60 }), mode: fc.constantFrom<Origin>('error', 'invalid', 'hang') }), { minLength: 50, maxLength: 400 }),
      fc.integer({ min: 1, max: 1000 }),
      async (requests, seed) => {
        const clock = new VirtualClock({ seed });
        const backoff = new Backoff({ base: 100, max: 1_000, jitter: 0.2 });
        const cache = new Cache<number>({ clock, loadTimeout: 300, backoff, validate: (v) => v > 0 });
        const starts: number[] = [];
        const ends: number[] = [];
        let mode: Origin = 'error';
        const loader = ({ signal }: { signal: AbortSignal }): Promise<number> => {
          starts.push(clock.now());
          const m = mode;
          return new Promise<number>((resolve, reject) => {
            signal.addEventListener('abort', () => (ends.push(clock.now()), reject(signal.reason)), { once: true });
            if (m === 'hang') return;
            clock.setTimer(() => (ends.push(clock.now()), m === 'error' ? reject(new Error('down')) : resolve(-1)), 20);
          });
        };
        const pending: Promise<unknown>[] = [];
        for (const r of requests) {
          mode = r.mode;
          pending.push(cache.get('k', loader).catch(() => undefined));
          await clock.advance(r.gap);
        }
        await clock.advance(301);
        await Promise.all(pending);
        assert.equal(ends.length, starts.length);
        for (let i = 1; i < starts.length; i++) {
          const gap = starts[i]! - ends[i - 1]!;
          assert.ok(gap >= backoff.minDelay(i) - 1e-9, `attempt ${i + 1} came ${gap} ms after failure ${i} (min ${backoff.minDelay(i)})`);
        }
      },
    ),
    { numRuns: 100 },
  );
});
