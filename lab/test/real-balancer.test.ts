import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadScenario } from '../src/lab/lab.js';
import { compareVariant, verdictClass } from '../src/lab/judge/fidelity.js';
import { runFidelity } from '../src/lab/real/fidelity-run.js';

/**
 * The lab against real processes (issue 30), a hung server behind a
 * balancer: test/fixtures/real-balancer.json in virtual time and for real,
 * one real run per variant, held to the fidelity page's bars (item 4). A
 * file of its own, apart from real.test.ts's storm, so the suite's runner
 * can weigh it at what it uses (light: 70–140 calls/s over two servers).
 */
describe('a hung server behind a balancer agrees with its simulation: the same verdict, goodput during the trigger within 10 points, recovery within max(3 s, 25 %), amplification within 25 %', () => {
  // test/fixtures/real-balancer.json: two servers on processor sharing behind a balancer; one is SIGSTOPped for 8 s
  // during a spike, then killed and started again on its port. naive's balancer probes pages by response time; damper's
  // checks liveness over /health, and the breaker of the one server left is held to the ejection bound.
  // Skipped until 2026-12-05, while damper's p99 disagreed (272 ms simulated, 5,120 ms real): the simulation's hung
  // server went on shedding through its admission, where a stopped process answers nothing (docs/lab.md, "Measured").
  // damper's goodput during the trigger spreads with chance both ways (63.5–77.8 % simulated at seeds 1–60, one seed
  // below this run’s bar), so a real run may still fall outside it now and then: it passed 3 runs in a row, and the
  // 15 real runs since the fix all agreed (the lowest served 71.4 %).
  // Run by hand (DAMPER_REAL_BALANCER=1), not in the suite, as real-database's: the suite's real fidelity run is
  // real.test's storm (issue 30, item 5), and with this one beside it CI read 685–740 s of tests against a 12-minute
  // budget for the whole run (2026-12-05); its trigger goodput also spreads across the bar by chance (above).
  test('real-balancer: a hung server behind a balancer, restarted: both recover, each figure within its bar', { skip: process.env.DAMPER_REAL_BALANCER === '1' ? false : 'a second real fidelity run, beside real.test’s storm, past the suite’s budget: DAMPER_REAL_BALANCER=1 runs it' }, async () => {
    const scenario = await loadScenario('test/fixtures/real-balancer.json');
    const fidelity = await runFidelity(scenario, { scale: 1, timeScale: 1 }, { seed: 1, runs: 1 });
    const served = { naive: 0, damper: 0 };
    for (const variant of ['naive', 'damper'] as const) {
      const v = fidelity.variants[variant]!;
      const row = compareVariant(scenario, v);
      const words = row.figures.map((f) => `${f.figure}: simulated ${JSON.stringify(f.simulated)}, real ${JSON.stringify(f.real)}, ${f.agrees === false ? 'DISAGREES' : 'agrees'}`).join('; ');
      assert.equal(verdictClass(scenario, v.simulated), 'recovered', `${variant}'s simulation: ${words}`);
      assert.ok(row.agrees, `${variant}: ${words}`);
      served[variant] = v.simulated.summary.trigger.goodputRatio;
    }
    // What the fixture is for: with both servers out (one by its health checks, one by its breaker) damper served less than naive (44 % against 50 %).
    assert.ok(served.damper > served.naive + 0.1, `damper served ${served.damper} of the requests during the trigger, naive ${served.naive}`);
  });
});
