import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { hostLimitLines, hostLimits, lagBoundMs, LAG_P99_MS, limitedShare, MAX_LIMITED_SHARE, secondRanges } from '../src/lab/real/host-limits.js';
import { type HostSeries } from '../src/lab/real/real-run.js';

const series = (name: string, cpu: number[], lag: (number | null)[] = cpu.map(() => null)): HostSeries => ({ name, cpu, lagP99Ms: lag, lagMaxMs: lag });

/** Four seconds on two cores: idle, the host full (users saturated, tier1 late), tier1 later still, redis busy alone. */
const run = [
  series('users', [0.2, 1.0, 0.95, 0.1], [1, 2, 3, 1]),
  series('tier1', [0.3, 0.9, 0.6, 0.1], [2, 30, 150, 2]),
  series('redis0', [0.1, 0.2, 0.3, 0.95]),
];

describe('the host, not the modelled capacity, may have limited a second (issue 30, item 4)', () => {
  test('each reason holds in its seconds, with its worst second and process', () => {
    const limits = hostLimits(run, 2);
    assert.deepEqual(limits.seconds, [1, 2]);
    assert.deepEqual(
      limits.limits.map((l) => [l.reason, l.seconds, l.worst.second, l.worst.process]),
      [
        ['host-busy', [1, 2], 1, 'users'],
        ['process-saturated', [1, 2], 1, 'users'],
        ['loop-late', [1, 2], 2, 'tier1'],
      ],
    );
    assert.ok(Math.abs(limits.limits[0]!.worst.value - 2.1) < 1e-9, 'all processes together');
    assert.deepEqual(hostLimitLines(limits), [
      'host busy in 2 s (1–2): the processes together used ≥ 90% of the 2 cores; worst second 1: 2.10 cores, most by users',
      'a process saturated in 2 s (1–2): a single-threaded process used ≥ 0.9 core; worst: users, 1.00 core in second 1',
      'event loops late in 2 s (1–2): a p99 delay above 20 ms; worst: tier1, 150 ms in second 2',
    ]);
  });

  test('a process without an event loop counts as single-threaded only when named so', () => {
    assert.deepEqual(hostLimits(run, 2).limits.find((l) => l.reason === 'process-saturated')?.seconds, [1, 2]);
    const named = hostLimits(run, 2, { singleThreaded: ['redis0'] });
    assert.deepEqual(named.limits.find((l) => l.reason === 'process-saturated')?.seconds, [1, 2, 3]);
    assert.deepEqual(named.seconds, [1, 2, 3]);
  });

  test('the bounds are the caller’s, and the lines say the ones used', () => {
    const more = hostLimits(run, 4, { lagP99Ms: 100 });
    assert.deepEqual(more.limits.map((l) => [l.reason, l.seconds]), [['process-saturated', [1, 2]], ['loop-late', [2]]], 'four cores are not full at 2.1');
    assert.match(hostLimitLines(more)[1]!, /above 100 ms/);
  });

  test('an idle run: nothing to say', () => {
    const idle = hostLimits([series('users', [0.1, 0.2], [1, 2])], 2);
    assert.deepEqual([idle.seconds, idle.limits, hostLimitLines(idle)], [[], [], []]);
    assert.deepEqual(hostLimits([], 2).seconds, []);
  });

  test('the share of a trigger window the host limited, to refuse a run by', () => {
    const limits = hostLimits(run, 2);
    assert.equal(limitedShare(limits, 0, 4), 0.5);
    assert.equal(limitedShare(limits, 2, 4), 0.5);
    assert.equal(limitedShare(limits, 3, 4), 0);
    assert.ok(limitedShare(limits, 0, 4) > MAX_LIMITED_SHARE);
  });

  test('the event-loop bound shrinks with a time-scaled objective', () => {
    assert.equal(lagBoundMs(250), LAG_P99_MS);
    assert.equal(lagBoundMs(2000), LAG_P99_MS);
    assert.equal(lagBoundMs(25), 2.5);
  });

  test('seconds are written as runs', () => {
    assert.equal(secondRanges([3, 4, 5, 7, 9, 10]), '3–5, 7, 9–10');
    assert.equal(secondRanges([]), '');
  });
});
