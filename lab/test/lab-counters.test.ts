import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RATIO_WINDOW_MS, SAMPLE_MS } from '../src/lab/judge/characteristic.js';
import { VirtualClock } from 'damper';
import { LabCounters } from '../src/lab/judge/lab-counters.js';

describe('lab counters: a naive variant’s ratios, Δnumerator ÷ Δdenominator over the window', () => {
  test('over the counts since the start until a whole window has passed, then over the window alone', async () => {
    const clock = new VirtualClock({ seed: 1 });
    const counters = new LabCounters(clock);
    const cache = counters.cache('');
    const windowS = RATIO_WINDOW_MS / SAMPLE_MS;
    for (let s = 0; s <= windowS + 10; s++) {
      if (s > 0) await clock.advance(SAMPLE_MS);
      counters.sample(s * SAMPLE_MS);
      // Each second: 10 reads; 1 load each in the first window, 5 each after it.
      cache.requests += 10;
      cache.loads += s < windowS ? 1 : 5;
    }
    const amplification = counters.series()['damper.cache.origin_amplification']?.[''];
    assert.ok(amplification);
    assert.equal(amplification[0], 0, 'nothing counted yet: the denominator did not move');
    assert.equal(amplification[1], 0.1);
    assert.equal(amplification[windowS], 0.1, 'the first whole window');
    // At windowS + 10 s the window holds 50 s of 1 load and 10 s of 5.
    assert.equal(amplification[windowS + 10], (50 * 1 + 10 * 5) / (windowS * 10));
    assert.deepEqual(counters.series()['damper.cache.stale_ratio']?.['']?.slice(0, 3), [0, 0, 0], 'a cache that never serves stale has a stale ratio of 0');
  });

  test('only what a world registers exists: no retries, no retry ratio', async () => {
    const clock = new VirtualClock({ seed: 1 });
    const counters = new LabCounters(clock);
    const retry = counters.retry('tier=0');
    counters.sample(0);
    retry.firstAttempts += 4;
    retry.retries += 6;
    await clock.advance(SAMPLE_MS);
    counters.sample(SAMPLE_MS);
    const series = counters.series();
    assert.deepEqual(Object.keys(series), ['damper.retry.ratio']);
    assert.deepEqual(series['damper.retry.ratio'], { 'tier=0': [0, 1.5] }, 'retries per first attempt may pass 1');
  });

  test('shed ratio: shed ÷ (admitted + shed)', () => {
    const clock = new VirtualClock({ seed: 1 });
    const counters = new LabCounters(clock);
    const limiter = counters.limiter('');
    limiter.admitted = 3;
    limiter.shed = 1;
    counters.sample(0);
    assert.deepEqual(counters.series()['damper.limiter.shed_ratio'], { '': [0.25] });
  });
});
