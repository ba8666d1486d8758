import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Flights, type Outcome } from '../src/cache/flight.js';
import { deferred } from './helpers.js';

describe('one load per key in flight (principle 2, in this process)', () => {
  test('a second start for a key in flight is a broken invariant, not a second load', () => {
    const flights = new Flights<number>();
    const d = deferred<Outcome<number>>();
    flights.start('k', 'read', () => d.promise);
    assert.throws(() => flights.start('k', 'read', () => d.promise), /one load per key in flight/);
    assert.equal(flights.size, 1);
  });

  test('a caller joins the flight in progress; it lands once its outcome is decided, before its waiters hear it', async () => {
    const flights = new Flights<number>();
    const d = deferred<Outcome<number>>();
    const flight = flights.start('k', 'warm', (f) => {
      assert.equal(f.kind, 'warm');
      return d.promise;
    });
    assert.equal(flights.get('k'), flight, 'joined while in flight');
    const heard = flight.promise.then((outcome) => ({ outcome, inFlight: flights.get('k') }));
    d.resolve({ ok: true, value: 7 });
    assert.deepEqual(await heard, { outcome: { ok: true, value: 7 }, inFlight: undefined }, 'landed before its waiters heard: a read on its heels starts anew');
  });

  test('supersede (a newer write) frees the key: the old flight lands nothing and cannot evict its successor', async () => {
    const flights = new Flights<number>();
    const old = deferred<Outcome<number>>();
    const first = flights.start('k', 'read', () => old.promise);
    flights.supersede('k');
    assert.equal(first.superseded, true);
    const second = flights.start('k', 'read', () => new Promise(() => {}));
    old.resolve({ ok: true, value: 1 });
    await first.promise;
    assert.equal(flights.get('k'), second, 'the old flight landing does not remove the new one');
    flights.supersedeAll();
    assert.equal(second.superseded, true);
    assert.equal(flights.size, 0);
  });
});
