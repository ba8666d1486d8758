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

  test('a caller joins the flight in progress; it lands once its outcome is decided', async () => {
    const flights = new Flights<number>();
    const flight = flights.start('k', 'warm', async (f) => {
      assert.equal(f.kind, 'warm');
      flights.land('k', f);
      return { ok: true, value: 7 };
    });
    assert.equal(flights.get('k'), undefined, 'landed before its promise settled: a read on its heels starts anew');
    assert.deepEqual(await flight.promise, { ok: true, value: 7 });
  });

  test('supersede (a newer write) frees the key: the old flight lands nothing and cannot evict its successor', async () => {
    const flights = new Flights<number>();
    const old = deferred<Outcome<number>>();
    const first = flights.start('k', 'read', () => old.promise);
    flights.supersede('k');
    assert.equal(first.superseded, true);
    const second = flights.start('k', 'read', () => new Promise(() => {}));
    flights.land('k', first);
    assert.equal(flights.get('k'), second, 'the old flight landing does not remove the new one');
    flights.supersedeAll();
    assert.equal(second.superseded, true);
    assert.equal(flights.size, 0);
  });
});
