import assert from 'node:assert/strict';
import { type ScenarioRun } from '../../src/lab/results.js';

/** The default seed and three others: every shipped scenario meets its bars at each. */
export const SEEDS = [1, 2, 3, 4];
export const TEN_MINUTES = 600;

/**
 * The lab's bars (issues 3 and 7), the same for every shipped scenario:
 * naive is not healthy again 10 simulated minutes after the trigger ends and,
 * unless `amplification: false` (a world where goodput stands in for it),
 * its origin peak is ≥ 10× baseline; damper is healthy within 30 s with its
 * origin within 2× of baseline; both saw the same traffic.
 */
export function assertBars(run: ScenarioRun, options: { amplification?: boolean } = {}): void {
  const naive = run.variants.naive.summary;
  const damper = run.variants.damper.summary;
  assert.ok(naive.recoverySeconds === null || naive.recoverySeconds > TEN_MINUTES, `naive recovered after ${naive.recoverySeconds} s`);
  if (options.amplification !== false) assert.ok(naive.amplification >= 10, `naive amplification ${naive.amplification}`);
  assert.equal(damper.recovered, true);
  assert.ok(damper.recoverySeconds !== null && damper.recoverySeconds <= 30, `damper recovery ${damper.recoverySeconds} s`);
  assert.ok(damper.amplification <= 2, `damper amplification ${damper.amplification}`);
  assert.equal(naive.simulatedRequests, damper.simulatedRequests, 'both variants see the same traffic');
}
