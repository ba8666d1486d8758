import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { simulate } from '../src/lab/engine/engine.js';
import { loadScenario, runScenario } from '../src/lab/lab.js';
import { resultsJson } from '../src/lab/judge/results.js';
import { type ServiceScenario } from '../src/lab/world/service.js';
import { runIsolated } from '../src/lab/engine/parallel.js';
import { VirtualClock } from 'damper';
import { RealTimeInSimulationError } from 'damper';

// The lab's run itself, whatever the scenario: the same seed gives the same
// bytes wherever it runs, and real time or randomness inside a run throws.

describe('determinism', () => {
  test('the same scenario and seed give a byte-identical results.json', async () => {
    const scenario = (await loadScenario('facebook-2010')) as ServiceScenario;
    const short: ServiceScenario = { ...scenario, durationS: 140, faults: scenario.faults.filter((f) => f.kind === 'invalid-value').map((f) => ({ ...f, startS: 120, endS: 125 })) };
    // One run in this thread, one in a worker: where a run happens must not matter either.
    const a = resultsJson({ seed: 5, scenarios: [await runScenario(short, 5)] });
    const b = resultsJson({ seed: 5, scenarios: [await runIsolated(short, 5)] });
    assert.equal(a, b);
    const c = resultsJson({ seed: 6, scenarios: [await runIsolated(short, 6)] });
    assert.notEqual(a, c, 'a different seed gives a different run');
  });

  for (const [what, call] of [
    ['Date.now()', () => Date.now()],
    ['performance.now()', () => performance.now()],
    ['Math.random()', () => Math.random()],
    ['setTimeout()', () => setTimeout(() => {}, 1)],
  ] as const) {
    test(`${what} inside a run throws, and works again after it`, async () => {
      const clock = new VirtualClock();
      let steps = 0;
      await assert.rejects(
        simulate({
          clock,
          durationMs: 10,
          world: {
            step() {
              if (++steps === 3) call();
              return false;
            },
          },
        }),
        (e) => e instanceof RealTimeInSimulationError && e.message.includes(what),
      );
      assert.equal(typeof Date.now(), 'number');
      assert.equal(typeof Math.random(), 'number');
    });
  }
});
