import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { HardTimeout } from '../src/cache/hard-timeout.js';
import { LoadTimeoutError } from '../src/errors.js';
import { VirtualClock } from '../src/time/virtual.js';

describe('a load’s hard timeout makes its signal only when asked, and nobody can tell', () => {
  test('asked before the timeout: aborts at it with LoadTimeoutError', async () => {
    const clock = new VirtualClock();
    const hard = new HardTimeout(clock, 'k', 100);
    const { signal } = hard;
    assert.equal(signal.aborted, false);
    assert.equal(hard.signal, signal, 'one signal per load');
    await clock.advance(100);
    assert.ok(signal.aborted && signal.reason instanceof LoadTimeoutError && signal.reason.phase === 'load');
    assert.equal(hard.expired, signal.reason);
  });

  test('asked after the timeout: comes already aborted, with the same error', async () => {
    const clock = new VirtualClock();
    const hard = new HardTimeout(clock, 'k', 100);
    await clock.advance(99);
    assert.equal(hard.expired, undefined);
    await clock.advance(1);
    const expired: unknown = hard.expired;
    assert.ok(expired instanceof LoadTimeoutError);
    assert.ok(hard.signal.aborted);
    assert.equal(hard.signal.reason, expired);
  });

  test('cancelled: no timer left, the signal never aborts', async () => {
    const clock = new VirtualClock();
    const hard = new HardTimeout(clock, 'k', 100);
    hard.cancel();
    assert.equal(clock.pendingTimers, 0);
    await clock.advance(200);
    assert.equal(hard.expired, undefined);
    assert.equal(hard.signal.aborted, false);
  });
});
