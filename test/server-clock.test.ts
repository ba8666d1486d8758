import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SERVER_CLOCK_MAX_RTT_MS, SERVER_CLOCK_SYNC_MS, ServerClock } from '../src/stores/server-clock.js';
import { sleep, VirtualClock } from '../src/index.js';

/**
 * A server whose clock runs `offset` ms ahead of the local one and answers
 * `TIME` after `rtt` ms, half of it each way (so a sample's midpoint is exact).
 */
function server(clock: VirtualClock, offset: { ms: number }, rtt: { ms: number }): { ask: () => Promise<number>; asked: () => number; fail: { next: boolean } } {
  let asked = 0;
  const fail = { next: false };
  return {
    asked: () => asked,
    fail,
    ask: async () => {
      asked++;
      const trip = rtt.ms;
      await sleep(clock, trip / 2);
      if (fail.next) {
        fail.next = false;
        throw new Error('connection lost');
      }
      const at = clock.now() + offset.ms;
      await sleep(clock, trip / 2);
      return at;
    },
  };
}

describe('freshness is read off the server clock, never this process’s', () => {
  test('no estimate until a sample arrives; then the server’s time to within half the round trip', async () => {
    const clock = new VirtualClock({ start: 1_000 });
    const s = server(clock, { ms: 3_600_000 }, { ms: 4 });
    const estimate = new ServerClock(clock, s.ask);
    assert.equal(estimate.now(), undefined, 'asks, and answers only once it knows');
    assert.equal(s.asked(), 1);
    await clock.advance(4);
    assert.equal(estimate.now(), clock.now() + 3_600_000);
  });

  test('one request per sync period, started by a read, none while one is in flight', async () => {
    const clock = new VirtualClock();
    const s = server(clock, { ms: 50 }, { ms: 10 });
    const estimate = new ServerClock(clock, s.ask);
    for (let i = 0; i < 5; i++) estimate.now();
    assert.equal(s.asked(), 1);
    await clock.advance(SERVER_CLOCK_SYNC_MS - 1);
    estimate.now();
    assert.equal(s.asked(), 1);
    await clock.advance(1);
    estimate.now();
    assert.equal(s.asked(), 2);
    await clock.advance(10 * SERVER_CLOCK_SYNC_MS);
    assert.equal(s.asked(), 2, 'no timer: a clock nobody reads asks nothing');
  });

  test('the sample with the shortest round trip wins; a slow one is not trusted at all', async () => {
    const clock = new VirtualClock();
    const offset = { ms: 500 };
    const rtt = { ms: SERVER_CLOCK_MAX_RTT_MS + 20 };
    const s = server(clock, offset, rtt);
    const estimate = new ServerClock(clock, s.ask);
    estimate.now();
    await clock.advance(rtt.ms);
    assert.equal(estimate.now(), undefined, 'a 120 ms round trip could be 60 ms wrong');
    // An asymmetric, slower sample must not replace a fast one: model it as a sample 20 ms off.
    rtt.ms = 2;
    await clock.advance(SERVER_CLOCK_SYNC_MS);
    estimate.now();
    await clock.advance(2);
    assert.equal(estimate.now(), clock.now() + 500);
    rtt.ms = 40;
    offset.ms = 510; // within the 40 ms sample's own error: it agrees, but is the worse one
    await clock.advance(SERVER_CLOCK_SYNC_MS);
    estimate.now();
    await clock.advance(40);
    assert.equal(estimate.now(), clock.now() + 500, 'the 2 ms sample still decides');
  });

  test('a step of the server’s clock is seen at the next sync: disagreeing samples are dropped', async () => {
    const clock = new VirtualClock();
    const offset = { ms: 0 };
    const s = server(clock, offset, { ms: 2 });
    const estimate = new ServerClock(clock, s.ask);
    estimate.now();
    await clock.advance(2);
    assert.equal(estimate.now(), clock.now());
    offset.ms = 30_000; // NTP stepped the server's clock
    await clock.advance(SERVER_CLOCK_SYNC_MS);
    estimate.now();
    await clock.advance(2);
    assert.equal(estimate.now(), clock.now() + 30_000);
  });

  test('a failed sync keeps the estimate and is tried again after the period', async () => {
    const clock = new VirtualClock();
    const s = server(clock, { ms: 7 }, { ms: 2 });
    const estimate = new ServerClock(clock, s.ask);
    estimate.now();
    await clock.advance(2);
    s.fail.next = true;
    await clock.advance(SERVER_CLOCK_SYNC_MS);
    estimate.now();
    await clock.advance(2);
    assert.equal(estimate.now(), clock.now() + 7);
    assert.equal(s.asked(), 2);
    await clock.advance(SERVER_CLOCK_SYNC_MS);
    estimate.now();
    assert.equal(s.asked(), 3);
  });

  test('a reply that is not a time is not a sample', async () => {
    const clock = new VirtualClock();
    for (const reply of [Number.NaN, Number.POSITIVE_INFINITY]) {
      const estimate = new ServerClock(clock, () => Promise.resolve(reply));
      estimate.now();
      await clock.advance(1);
      assert.equal(estimate.now(), undefined);
    }
  });
});
