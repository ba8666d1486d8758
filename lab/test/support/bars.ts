import assert from 'node:assert/strict';
import { type ScenarioRun } from '../../src/lab/judge/results.js';

/**
 * The default seed, the one `npm start` and the docs show: every shipped
 * scenario meets its bars, and its own checks, at it. Seeds 2 and 3 were
 * tried in every run too, until the suite outgrew its 12-minute budget
 * (2026-12-05: 1,370 CPU s on 2 cores): each incident's runs at those two
 * seeds were ~70 CPU s of it, and a fixed seed tries nothing a drawn one
 * does not, where a drawn one tries a new seed in each run.
 */
export const SEEDS = [1];

/**
 * A seed drawn at random for this test run (its verdicts must hold at any
 * seed, not only at the ones tried: issue 28), or `DAMPER_LAB_SEED` to
 * replay one: the tests name it. Seeds 5–24 were checked by hand for every
 * shipped scenario (docs/lab.md, "Verdicts at any seed").
 */
export const DRAWN_SEED = drawnSeed();

/** The seeds each shipped scenario's verdicts and its own checks are tested at: {@link SEEDS} and {@link DRAWN_SEED}. */
export const VERDICT_SEEDS = [...SEEDS, DRAWN_SEED];

function drawnSeed(): number {
  const given = process.env.DAMPER_LAB_SEED;
  if (given === undefined || given === '') return 5 + Math.floor(Math.random() * 1_000_000);
  const seed = Number(given);
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffff_ffff) throw new Error(`DAMPER_LAB_SEED must be an integer from 0 to 4294967295, got "${given}"`);
  return seed;
}

/** How a test names a seed: the drawn one says how to replay it. */
export function seedName(seed: number): string {
  return seed === DRAWN_SEED && !SEEDS.includes(seed) ? `seed ${seed} (drawn for this run; replay with DAMPER_LAB_SEED=${seed})` : `seed ${seed}`;
}
export const TEN_MINUTES = 600;

/** damper's share of the best possible goodput during the trigger, in every shipped scenario at every seed (issue 11). */
export const TRIGGER_EFFICIENCY = 0.9;

/**
 * The lab's bars (issues 3, 7 and 11), the same for every shipped scenario:
 * naive is stuck — not healthy again by itself: it never recovers, or only
 * once operators act (and the run says so, `operatorForced`), and then not
 * within 10 simulated minutes of the trigger's end — and, unless
 * `amplification: false` (a world where goodput stands in for it), its
 * origin peak is ≥ 10× baseline; damper serves at least 90 % of the best
 * possible during the trigger, is healthy within 30 s of its end with no
 * operator's help, with its origin within 2× of baseline; both saw the same
 * traffic.
 */
export function assertBars(run: ScenarioRun, options: { amplification?: boolean } = {}): void {
  const naive = run.variants.naive.summary;
  const damper = run.variants.damper.summary;
  assert.ok(naive.recoverySeconds === null || (naive.operatorForced && naive.recoverySeconds > TEN_MINUTES), `naive recovered after ${naive.recoverySeconds} s (operatorForced: ${naive.operatorForced})`);
  if (options.amplification !== false) assert.ok(naive.amplification >= 10, `naive amplification ${naive.amplification}`);
  assert.ok(damper.trigger.efficiency >= TRIGGER_EFFICIENCY, `damper served ${damper.trigger.efficiency} of the best possible during the trigger`);
  assert.equal(damper.recovered, true);
  assert.equal(damper.operatorForced, false, 'damper recovered by itself');
  assert.ok(damper.recoverySeconds !== null && damper.recoverySeconds <= 30, `damper recovery ${damper.recoverySeconds} s`);
  assert.ok(damper.amplification <= 2, `damper amplification ${damper.amplification}`);
  assert.equal(naive.simulatedRequests, damper.simulatedRequests, 'both variants see the same traffic');
}
