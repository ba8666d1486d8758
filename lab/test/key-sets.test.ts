import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { seededRandom } from 'damper';
import { KeySets, lruHeld } from '../src/lab/world/key-sets.js';

const open = (name: string, rate: number, keys?: { count: number; exponent: number }) => ({ name, rate, ...(keys === undefined ? {} : { keys }) });

describe('each population reads its own keys, or the scenario’s (discord-2019’s push settings beside its user objects)', () => {
  const sets = new KeySets([open('users', 350, { count: 600, exponent: 0 }), open('push', 150, { count: 300, exponent: 0 }), open('web', 500)], { count: 100, exponent: 1 });

  test('a population’s picker draws only its own keys', () => {
    const random = seededRandom(1);
    for (let i = 0; i < 2000; i++) {
      const user = sets.pickerOf('users')(random);
      assert.ok(/^users:\d+$/.test(user) && Number(user.slice(6)) < 600, user);
      assert.match(sets.pickerOf('push')(random), /^push:\d+$/);
      assert.match(sets.pickerOf('web')(random), /^key:\d+$/);
    }
    assert.throws(() => sets.pickerOf('nobody'), /population "nobody" reads no keys/);
  });

  test('a key’s share is its readers’ share of the rate times its share in its set; keys ranked by it', () => {
    assert.equal(sets.keys.length, 1000);
    const total = sets.shares.reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(total - 1) < 1e-9, `shares add up to ${total}`);
    for (let i = 1; i < sets.shares.length; i++) assert.ok(sets.shares[i]! <= sets.shares[i - 1]! + 1e-15, `rank ${i}`);
    // key:0 takes half the reads' Zipf head; a user object 0.35 ÷ 600, a push setting 0.15 ÷ 300.
    assert.equal(sets.keys[0], 'key:0');
    const share = (key: string): number => sets.shares[sets.keys.indexOf(key)]!;
    assert.ok(Math.abs(share('users:17') - 0.35 / 600) < 1e-12);
    assert.ok(Math.abs(share('push:17') - 0.15 / 300) < 1e-12);
    assert.ok(Math.abs(sets.shareOfTop(1000) - 1) < 1e-9);
    assert.equal(sets.shareOfTop(0), 0);
  });

  test('one set keeps its own order: hot keys as given, then the Zipf ranks', () => {
    const one = new KeySets([open('web', 10)], { count: 3, exponent: 1, hot: [{ key: 'sitevars', share: 0.1 }] });
    assert.deepEqual(one.keys, ['sitevars', 'key:0', 'key:1', 'key:2']);
  });
});

describe('what an LRU holds in the steady state (Che’s approximation)', () => {
  test('the probabilities add up to the capacity; uniform reads hold every key alike', () => {
    const uniform = new Float64Array(900).fill(1 / 900);
    const held = lruHeld(uniform, 845);
    assert.ok(Math.abs(held.reduce((a, b) => a + b, 0) - 845) < 1e-6);
    for (const p of held) assert.ok(Math.abs(p - 845 / 900) < 1e-9);
  });

  test('under Zipf’s law the popular keys are held almost surely, the tail rarely', () => {
    const sets = new KeySets([open('web', 100)], { count: 20_000, exponent: 0.9 });
    const held = lruHeld(sets.shares, 2000);
    assert.ok(held[0]! > 0.999 && held[99]! > 0.95, `head ${held[0]}, rank 100 ${held[99]}`);
    assert.ok(held[19_999]! < 0.1, `tail ${held[19_999]}`);
    assert.ok(Math.abs(held.reduce((a, b) => a + b, 0) - 2000) < 1e-3);
  });

  test('a cache as large as the keys holds them all', () => {
    assert.deepEqual([...lruHeld(new Float64Array([0.5, 0.5]), 2)], [1, 1]);
  });
});
