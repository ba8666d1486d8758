import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { slotCost } from '../src/lab/real/database-calibration.js';

/**
 * A real run's database sleeps each query's service time less what the
 * query costs its slot beyond the sleep (database-calibration.ts), so its
 * capacity is the scenario's: read here from the instants the answers came.
 */
describe('what a query costs its slot beyond its sleep is read from when the answers came, and taken off', () => {
  const service = 33;
  const held = 34.4;

  test('slots staggered: answers held ÷ workers apart', () => {
    const ends = Array.from({ length: 48 }, (_, i) => 1_000 + 12 + (i * held) / 4);
    const cost = slotCost(ends, 4, service);
    assert.ok(Math.abs(cost.measuredMs - held) < 1e-9, String(cost.measuredMs));
    assert.ok(Math.abs(cost.overheadMs - 1.4) < 1e-9, String(cost.overheadMs));
  });

  test('slots in step (each round’s answers together, in any order): within 1 % of the time held', () => {
    const ends = Array.from({ length: 48 }, (_, i) => 1_000 + held * (Math.floor(i / 4) + 1)).reverse();
    const cost = slotCost(ends, 4, service);
    assert.ok(Math.abs(cost.measuredMs - held) < held / 100, String(cost.measuredMs));
    assert.ok(cost.overheadMs > 1 && cost.overheadMs < 1.5, String(cost.overheadMs));
  });

  test('never a negative overhead, never more than half the service time; too few answers measure nothing', () => {
    assert.equal(slotCost(Array.from({ length: 20 }, (_, i) => i * 5), 2, 11).overheadMs, 0);
    assert.equal(slotCost(Array.from({ length: 20 }, (_, i) => i * 50), 2, 11).overheadMs, 5.5);
    assert.throws(() => slotCost([1, 2, 3], 2, 10), RangeError);
  });
});
