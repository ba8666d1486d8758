import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { NaiveBreaker } from '../src/lab/world/naive-breaker.js';

describe('naive’s breaker in front of the cache (discord-2019’s bug 1 is its caller’s)', () => {
  test('opens after `failures` in a row, lets one call through after `openMs`, and opens again on its failure', () => {
    const breaker = new NaiveBreaker({ failures: 3, openMs: 5000 });
    breaker.failure(0);
    breaker.failure(1);
    breaker.success();
    breaker.failure(2);
    breaker.failure(3);
    assert.equal(breaker.isOpen(3), false, 'a success in between starts the count again');
    breaker.failure(4);
    assert.equal(breaker.isOpen(4), true);
    assert.equal(breaker.isOpen(5003), true);
    assert.equal(breaker.isOpen(5004), false, 'half open: one call goes through');
    breaker.failure(5100);
    assert.equal(breaker.isOpen(5101), true, 'its failure opens it again at once');
  });

  test('a call that began before it opened and fails after counts towards the next opening; its success does not close it', () => {
    const breaker = new NaiveBreaker({ failures: 2, openMs: 1000 });
    breaker.failure(0);
    breaker.failure(0);
    breaker.success();
    assert.equal(breaker.isOpen(10), true);
    breaker.failure(20);
    breaker.failure(30);
    assert.equal(breaker.isOpen(1025), true, 'two late failures opened it again, from 30');
    assert.equal(breaker.isOpen(1030), false);
  });
});
