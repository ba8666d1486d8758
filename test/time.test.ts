import assert from 'node:assert/strict';
import fc from 'fast-check';
import { test } from 'node:test';
import { ArgumentError, ConfigError, createSystemClock, forbidRealTime, RealTimeInSimulationError, seededRandom, sleep, VirtualClock } from '../src/index.js';
import { track } from './helpers.js';

test('VirtualClock fires timers in time order, ties in the order they were set', async () => {
  const clock = new VirtualClock();
  const fired: string[] = [];
  clock.setTimer(() => fired.push('c@30'), 30);
  clock.setTimer(() => fired.push('a@10'), 10);
  clock.setTimer(() => fired.push('b1@20'), 20);
  clock.setTimer(() => fired.push('b2@20'), 20);
  await clock.advance(25);
  assert.deepEqual(fired, ['a@10', 'b1@20', 'b2@20']);
  assert.equal(clock.now(), 25);
  await clock.advance(5);
  assert.deepEqual(fired, ['a@10', 'b1@20', 'b2@20', 'c@30']);
});

test('VirtualClock lets promise continuations run between timers', async () => {
  const clock = new VirtualClock();
  const seen: number[] = [];
  const chain = async (): Promise<void> => {
    await sleep(clock, 10);
    seen.push(clock.now());
    await sleep(clock, 10);
    seen.push(clock.now());
  };
  const done = track(chain());
  await clock.advance(100);
  assert.deepEqual(seen, [10, 20]);
  assert.equal(done.settled, true);
});

test('a cancelled timer never fires and is not pending', async () => {
  const clock = new VirtualClock();
  let fired = false;
  const t = clock.setTimer(() => (fired = true), 10);
  assert.equal(clock.pendingTimers, 1);
  t.cancel();
  t.cancel();
  assert.equal(clock.pendingTimers, 0);
  await clock.advance(20);
  assert.equal(fired, false);
});

test('runUntilIdle drains every timer and refuses to spin forever', async () => {
  const clock = new VirtualClock();
  let n = 0;
  const tick = (): void => {
    n++;
    if (n < 5) clock.setTimer(tick, 100);
  };
  clock.setTimer(tick, 100);
  await clock.runUntilIdle();
  assert.equal(n, 5);
  assert.equal(clock.now(), 500);
  const forever = (): void => void clock.setTimer(forever, 1000);
  forever();
  await assert.rejects(clock.runUntilIdle(10_000), /still pending/);
});

test('advance rejects a negative or non-finite step', async () => {
  const clock = new VirtualClock();
  await assert.rejects(clock.advance(-1), ArgumentError);
  await assert.rejects(clock.advance(Number.NaN), ArgumentError);
});

test('sleep rejects with the signal reason and cancels its timer', async () => {
  const clock = new VirtualClock();
  const ac = new AbortController();
  const p = sleep(clock, 1000, ac.signal);
  ac.abort(new Error('stop'));
  await assert.rejects(p, /stop/);
  assert.equal(clock.pendingTimers, 0);
  await assert.rejects(sleep(clock, 1, ac.signal), /stop/);
});

test('seeded random: same seed, same sequence; in [0, 1); seeds differ', () => {
  const a = seededRandom(42);
  const b = seededRandom(42);
  const c = seededRandom(43);
  const xs = Array.from({ length: 1000 }, () => a());
  assert.deepEqual(xs, Array.from({ length: 1000 }, () => b()));
  assert.notDeepEqual(xs.slice(0, 10), Array.from({ length: 10 }, () => c()));
  assert.ok(xs.every((x) => x >= 0 && x < 1));
  const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
  assert.ok(Math.abs(mean - 0.5) < 0.05, `mean ${mean}`);
});

test('two VirtualClocks with one seed draw the same jitter', () => {
  const a = new VirtualClock({ seed: 7 });
  const b = new VirtualClock({ seed: 7 });
  assert.equal(a.random(), b.random());
});

test('system clock is monotonic and its timers do not hold the process open', async () => {
  const clock = createSystemClock(1);
  const t0 = clock.now();
  assert.ok(clock.now() >= t0);
  // A child process that only arms a long damper timer must exit at once.
  const { spawnSync } = await import('node:child_process');
  const r = spawnSync(process.execPath, ['--import', 'tsx', '-e', "import('./src/index.ts').then(m => m.systemClock.setTimer(() => {}, 60000))"], { timeout: 20_000 });
  assert.equal(r.status, 0, String(r.stderr));
});

test('system clock: a cached reading is refreshed within 16 reads, even without an event-loop turn', () => {
  const clock = createSystemClock(1);
  const first = clock.now();
  // Busy-wait (no sleep, no event-loop turn) until the OS clock has moved 2 ms.
  const until = performance.now() + 2;
  while (performance.now() < until);
  let latest = first;
  for (let i = 0; i < 16; i++) latest = clock.now();
  assert.ok(latest - first >= 2, `reading lagged: ${latest - first} ms`);
});

test('VirtualClock: sweeping out cancelled timers never changes which timer fires next', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.record({ ms: fc.integer({ min: 0, max: 50 }), cancelAfter: fc.option(fc.integer({ min: 0, max: 300 }), { nil: undefined }) }), { minLength: 1, maxLength: 300 }),
      async (plans) => {
        // Enough cancellations to cross the sweep threshold (more dead than alive) several times over.
        const clock = new VirtualClock();
        const fired: number[] = [];
        const timers = plans.map((p, i) => clock.setTimer(() => fired.push(i), p.ms));
        plans.forEach((p, i) => {
          if (p.cancelAfter !== undefined && p.cancelAfter % 3 !== 0) timers[i]!.cancel();
        });
        const expected = plans
          .map((p, i) => ({ i, due: p.ms, cancelled: p.cancelAfter !== undefined && p.cancelAfter % 3 !== 0 }))
          .filter((t) => !t.cancelled)
          .sort((a, b) => a.due - b.due || a.i - b.i)
          .map((t) => t.i);
        assert.equal(clock.pendingTimers, expected.length);
        await clock.advance(60);
        assert.deepEqual(fired, expected);
        assert.equal(clock.pendingTimers, 0);
      },
    ),
    { numRuns: 200 },
  );
});

test('forbidRealTime: every real clock, timer and Math.random throws; the ban records the first offence even when it was swallowed', () => {
  const outer = forbidRealTime();
  try {
    assert.throws(() => Date.now(), RealTimeInSimulationError);
    const inner = forbidRealTime();
    assert.equal(Reflect.get(inner, 'violation'), undefined, 'a ban sees only offences since it began');
    try {
      Math.random();
    } catch {
      // swallowed, as a user's callback inside a guard might
    }
    inner();
    assert.match(String(inner.violation?.message), /^Math\.random\(\) was called inside a simulated run/);
    assert.throws(() => setTimeout(() => {}, 1), RealTimeInSimulationError, 'nested bans share one patch: the outer one still holds');
    assert.match(outer.violation?.message ?? '', /^Date\.now\(\)/, 'the outer ban keeps its own first offence');
  } finally {
    outer();
  }
  assert.equal(typeof Date.now(), 'number', 'lifted when the last ban is');
  assert.equal(forbidRealTime.length, 0);
});

test('VirtualClock: bad options and bad instants are typed errors, and time stays finite (issue 13, item 7)', async () => {
  for (const options of [null, 5, 'x']) assert.throws(() => new VirtualClock(options as never), ConfigError);
  for (const start of [Number.NaN, Infinity, -Infinity, '0']) assert.throws(() => new VirtualClock({ start: start as never }), /start must be a finite number/);
  for (const seed of [Number.NaN, 1.5, '1']) assert.throws(() => new VirtualClock({ seed: seed as never }), /seed must be an integer/);
  const clock = new VirtualClock({ start: 100 });
  for (const ms of [Number.NaN, -1, Infinity, '5']) await assert.rejects(clock.advance(ms as never), ArgumentError);
  for (const t of [Number.NaN, Infinity, -Infinity, undefined]) {
    await assert.rejects(clock.advanceTo(t as never), ArgumentError);
    assert.throws(() => clock.skipTo(t as never), ArgumentError);
  }
  await assert.rejects(clock.runUntilIdle(Number.NaN), ArgumentError);
  assert.throws(() => clock.setTimer(() => {}, Number.NaN), ArgumentError);
  assert.throws(() => clock.setTimer(42 as never, 1), ArgumentError);
  const fired: number[] = [];
  clock.setTimer(() => fired.push(clock.now()), -5);
  clock.setTimer(() => fired.push(clock.now()), Infinity);
  await clock.advance(10);
  assert.deepEqual(fired, [100], 'a negative delay fires at once; an infinite one waits (capped to the longest timer)');
  assert.equal(clock.now(), 110);
  assert.ok(Number.isFinite(clock.nextTimerAt()!), 'an infinite delay is capped, as on the system clock');
});
