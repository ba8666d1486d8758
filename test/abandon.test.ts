import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AbortedError, DeadlineExceededError, LoadTimeoutError } from '../src/errors.js';
import { runAbandonable } from '../src/guard/abandon.js';
import { CircuitBreaker } from '../src/guard/breaker.js';
import { DeadlineGuard } from '../src/guard/deadline-guard.js';
import { deadlineSignal } from '../src/guard/deadline.js';
import { callContext } from '../src/guard/guard.js';
import { VirtualClock } from '../src/time/virtual.js';
import { track } from './helpers.js';

/** A task that never settles and ignores its signal (a driver that will not be cancelled), recording the signal it got. */
function deaf(): { task: (signal: AbortSignal) => Promise<never>; signal: () => AbortSignal | undefined } {
  let got: AbortSignal | undefined;
  return {
    signal: () => got,
    task: (signal) => {
      got = signal;
      return new Promise<never>(() => {});
    },
  };
}

const errors = { timeout: () => new LoadTimeoutError('k', 100, 'load'), aborted: (reason: unknown) => new AbortedError('left', reason) };

describe('work nobody waits for is walked away from, whether or not it heeds its signal', () => {
  test('at the limit: the task’s signal aborts, the call rejects with the timeout, onAbandon says it timed out', async () => {
    const clock = new VirtualClock();
    const t = deaf();
    const left: [unknown, boolean][] = [];
    const call = track(runAbandonable(t.task, { clock, parent: new AbortController().signal, at: 100, ...errors, onAbandon: (e, timedOut) => left.push([e, timedOut]) }));
    await clock.advance(99);
    assert.equal(call.settled, false);
    await clock.advance(1);
    assert.ok(call.error instanceof LoadTimeoutError);
    assert.equal(t.signal()?.aborted, true);
    assert.deepEqual(left, [[call.error, true]]);
    assert.equal(clock.pendingTimers, 0);
  });

  test('when the caller leaves first: rejects with the aborted error built from its reason; the timer is cancelled', async () => {
    const clock = new VirtualClock();
    const caller = new AbortController();
    const t = deaf();
    const call = track(runAbandonable(t.task, { clock, parent: caller.signal, at: 100, ...errors }));
    caller.abort('user left');
    await clock.settle();
    assert.ok(call.error instanceof AbortedError);
    assert.equal((call.error as AbortedError).cause, 'user left');
    assert.equal(clock.pendingTimers, 0);
  });

  test('a parent that already stands for an earlier limit is watched too (no signal of its own is made)', async () => {
    const clock = new VirtualClock();
    const outer = deadlineSignal(clock, { ...callContext(), deadline: 50 });
    const t = deaf();
    const call = track(runAbandonable(t.task, { clock, parent: outer.signal, at: 100, ...errors }));
    assert.equal(t.signal(), outer.signal);
    await clock.advance(50);
    assert.ok(call.error instanceof AbortedError, 'walked away when the outer deadline passed');
    assert.ok((call.error as AbortedError).cause instanceof DeadlineExceededError);
  });

  test('a task that settles after it was left changes nothing but onLateSettle', async () => {
    const clock = new VirtualClock();
    let finish: (v: number) => void = () => {};
    let late = 0;
    const call = track(runAbandonable(() => new Promise<number>((r) => (finish = r)), { clock, parent: new AbortController().signal, at: 10, ...errors, onLateSettle: () => late++ }));
    await clock.advance(10);
    assert.ok(call.error instanceof LoadTimeoutError);
    finish(7);
    await clock.settle();
    assert.equal(late, 1);
    assert.ok(call.error instanceof LoadTimeoutError);
  });

  test('a task’s own failure goes through `failure`; a success is returned as is; nothing is left on the clock', async () => {
    const clock = new VirtualClock();
    const o = { clock, parent: new AbortController().signal, at: 1_000, ...errors, failure: (e: unknown) => new Error(`wrapped ${String(e)}`) };
    assert.equal(await runAbandonable(() => Promise.resolve(3), o), 3);
    await assert.rejects(
      runAbandonable(() => Promise.reject('nope'), o),
      (e: Error) => e.message === 'wrapped nope',
    );
    await assert.rejects(
      runAbandonable(() => {
        throw 'sync';
      }, o),
      (e: Error) => e.message === 'wrapped sync',
    );
    assert.equal(clock.pendingTimers, 0);
  });

  test('a caller already gone, or a limit already past: rejects without calling the task', async () => {
    const clock = new VirtualClock({ start: 500 });
    let called = 0;
    const task = (): Promise<number> => {
      called++;
      return Promise.resolve(1);
    };
    const gone = new AbortController();
    gone.abort('early');
    await assert.rejects(runAbandonable(task, { clock, parent: gone.signal, at: 1_000, ...errors }), AbortedError);
    await assert.rejects(runAbandonable(task, { clock, parent: new AbortController().signal, at: 400, ...errors }), LoadTimeoutError);
    assert.equal(called, 0);
  });
});

describe('every guard that bounds a call walks away alike', () => {
  test('DeadlineGuard walks away when an earlier deadline carried by the call’s signal passes', async () => {
    const clock = new VirtualClock();
    const guard = new DeadlineGuard({ timeout: 1_000, clock });
    const outer = deadlineSignal(clock, { ...callContext(), deadline: 50 });
    const call = track(guard.run(deaf().task, { key: 'k', signal: outer.signal, wait: true }));
    await clock.advance(50);
    assert.ok(call.error instanceof AbortedError, 'it used to wait for the task');
  });

  test('a half-open probe whose caller leaves is left at once, and its slot goes to the next caller', async () => {
    const clock = new VirtualClock();
    const breaker = new CircuitBreaker({ consecutiveFailures: 1, openFor: 100, jitter: 0, probeTimeout: 5_000, clock });
    await assert.rejects(breaker.execute(() => Promise.reject(new Error('down'))));
    await clock.advance(100);
    const caller = new AbortController();
    const probe = track(breaker.execute(deaf().task, { signal: caller.signal }));
    assert.equal(breaker.state, 'half-open');
    caller.abort('gone');
    await clock.settle();
    assert.ok(probe.error instanceof AbortedError);
    assert.equal(breaker.state, 'half-open', 'a caller who left says nothing of the dependency');
    assert.equal(await breaker.execute(() => Promise.resolve('ok')), 'ok', 'the next caller gets the probe');
    assert.equal(breaker.state, 'closed');
  });
});
