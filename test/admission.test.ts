import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Admission, ConcurrencyLimiter, ConfigError, type Door, type Refusal, type RequestScope, VirtualClock } from '../src/index.js';

// The transport-free core of damper's admission (damperAdmission,
// damperFastify and the lab's simulated servers are adapters over it), in
// virtual time: a server whose work takes `ms` and whose requests the test
// sends with their own deadline, priority and caller.

function server(options: { limit: number; maxQueue: number; ms: number; retryAfter?: number; timeout?: number }) {
  const clock = new VirtualClock({ seed: 1 });
  const admission = new Admission({ clock, limiter: new ConcurrencyLimiter({ clock, limit: options.limit, maxQueue: options.maxQueue }), ...(options.retryAfter === undefined ? {} : { retryAfter: options.retryAfter }), ...(options.timeout === undefined ? {} : { timeout: options.timeout }) });
  const served: { key: string; scope: RequestScope; at: number }[] = [];
  const refused: { key: string; refusal: Refusal }[] = [];
  const send = (key: string, request: { remainingMs?: number; caller?: AbortController; priority?: 'low' | 'normal' | 'critical' } = {}): void => {
    const door: Door = {
      serve: (scope) => {
        served.push({ key, scope, at: clock.now() });
        return new Promise<void>((over) => clock.setTimer(over, options.ms));
      },
      refuse: (refusal) => void refused.push({ key, refusal }),
    };
    admission.admit({ key, priority: request.priority, remainingMs: request.remainingMs, signal: (request.caller ?? new AbortController()).signal }, door);
  };
  return { clock, admission, served, refused, send };
}

describe('overload is answered by shedding early, not by a queue every caller times out in', () => {
  test('beyond the limit and its queue a request is shed at once, with when to come back', async () => {
    const s = server({ limit: 2, maxQueue: 1, ms: 100, retryAfter: 3 });
    for (let i = 0; i < 5; i++) s.send(`r${i}`);
    await s.clock.advance(0);
    assert.deepEqual(
      s.refused.map((r) => [r.key, r.refusal]),
      [
        ['r3', { reason: 'shed', retryAfter: 3 }],
        ['r4', { reason: 'shed', retryAfter: 3 }],
      ],
    );
    await s.clock.runUntilIdle();
    assert.deepEqual(
      s.served.map((x) => [x.key, x.at]),
      [
        ['r0', 0],
        ['r1', 0],
        ['r2', 100],
      ],
      'the queued one starts when a slot is given back: the slot is held until the work is over',
    );
    assert.deepEqual(s.admission.stats(), { admitted: 3, shed: 2, expired: 0, gone: 0, badRequests: 0, failed: 0 });
  });
});

describe('work whose caller has gone is never started', () => {
  test('a request with no time left is refused as expired before it holds anything', async () => {
    const s = server({ limit: 1, maxQueue: 10, ms: 100 });
    s.send('late', { remainingMs: 0 });
    assert.deepEqual(s.refused, [{ key: 'late', refusal: { reason: 'expired' } }]);
    assert.equal(s.admission.limiter.stats().inFlight, 0);
  });

  test('one whose deadline passes while it waits is refused as expired; one whose caller left is dropped unanswered', async () => {
    const s = server({ limit: 1, maxQueue: 10, ms: 100 });
    const caller = new AbortController();
    s.send('first');
    s.send('hurried', { remainingMs: 50 });
    s.send('leaves', { caller });
    await s.clock.advance(10);
    caller.abort();
    await s.clock.runUntilIdle();
    assert.deepEqual(
      s.served.map((x) => x.key),
      ['first'],
    );
    assert.deepEqual(s.refused, [{ key: 'hurried', refusal: { reason: 'expired' } }]);
    assert.equal(s.admission.stats().gone, 1);
  });

  test("an admitted request's scope carries its deadline (the earlier of its own and `timeout`) and aborts at it", async () => {
    const s = server({ limit: 1, maxQueue: 1, ms: 1_000, timeout: 300 });
    s.send('own', { remainingMs: 200, priority: 'critical' });
    s.send('default');
    await s.clock.advance(0);
    const [own] = s.served;
    assert.equal(own!.scope.deadline, 200);
    assert.equal(own!.scope.priority, 'critical');
    await s.clock.advance(199);
    assert.equal(own!.scope.signal.aborted, false);
    await s.clock.advance(1);
    assert.equal(own!.scope.signal.aborted, true, 'the deadline passed: the work is told to stop');
    await s.clock.runUntilIdle();
    assert.deepEqual(s.refused, [{ key: 'default', refusal: { reason: 'expired' } }], 'the second waited past its 300 ms timeout behind the first');
  });
});

describe('bad input is refused at the boundary', () => {
  test('bad options are ConfigErrors', () => {
    assert.throws(() => new Admission({ limiter: {} as ConcurrencyLimiter }), ConfigError);
    assert.throws(() => new Admission({ timeout: 0 }), ConfigError);
    assert.throws(() => new Admission({ retryAfter: -1 }), ConfigError);
  });
});
