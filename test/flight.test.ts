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
    assert.equal(flights.get('k'), undefined);
    assert.equal(flights.size, 1, 'a superseded flight that has not landed is still a load in flight');
  });

  test("a superseded flight keeps the key's place at the origin: the next flight names it as its predecessor until it lands", async () => {
    const flights = new Flights<number>();
    const hung = deferred<Outcome<number>>();
    const first = flights.start('k', 'read', () => hung.promise);
    flights.supersede('k');
    const second = flights.start('k', 'revalidate', () => new Promise(() => {}));
    assert.equal(second.predecessor, first);
    assert.equal(flights.size, 2);
    flights.supersede('k');
    const third = flights.start('k', 'read', () => new Promise(() => {}));
    assert.equal(third.predecessor, second, 'the newest superseded flight, which itself waits for the first');
    hung.resolve({ ok: false, error: new Error('timed out') });
    await first.promise;
    assert.equal(flights.size, 2, 'the first has landed; the second still drains');
    assert.equal(flights.start('j', 'read', () => new Promise(() => {})).predecessor, undefined, 'another key has none');
  });
});
