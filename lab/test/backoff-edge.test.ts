import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadScenario } from '../src/lab/lab.js';
import { runIsolated } from '../src/lab/engine/parallel.js';
import { type Backoff } from '../src/lab/schema/common.js';
import { service, type ServiceScenario } from '../src/lab/world/service.js';

// Where backoff puts the retry storm's edge: the shipped storm run to its horizon three times. It is the simulation's
// subject, so it runs on one Node (scripts/test.mjs, ONE_NODE); the client driver's backoff and arrivals, which it
// rests on, run on both in lab-clients.test.ts.

/** The shipped retry storm, its naive tiers backing off per `backoff`, its ×4 slowdown held `size` s. */
const storm = (backoff: Backoff, size: number): Promise<ServiceScenario> =>
  loadScenario('retry-storm').then((s) => {
    const { tiers } = s as ServiceScenario;
    return service.trigger.resize({ ...(s as ServiceScenario), tiers: { ...tiers!, each: tiers!.each!.map((t) => ({ ...t, backoff })) } }, size);
  });
const FULL_JITTER: Backoff = { kind: 'full-jitter', baseMs: 1000, maxMs: 30_000 };
// Started at once, each in a worker thread.
const edge = {
  immediateAt2: storm({ kind: 'none' }, 2).then((s) => runIsolated(s, 1)),
  jitterAt2: storm(FULL_JITTER, 2).then((s) => runIsolated(s, 1)),
  jitterAt3: storm(FULL_JITTER, 3).then((s) => runIsolated(s, 1)),
};

describe('naive backoff moves the retry storm’s edge without removing the loop', () => {
  test('a 2 s slowdown collapses immediate retries, not full-jitter ones; 3 s collapses both', async () => {
    const immediate = (await edge.immediateAt2).variants.naive.summary;
    assert.equal(immediate.recoverySeconds, null, `immediate retries recovered after ${immediate.recoverySeconds} s`);
    const jitter = (await edge.jitterAt2).variants.naive.summary;
    assert.ok(jitter.recoverySeconds !== null && jitter.recoverySeconds <= 30, `full jitter: recovery ${jitter.recoverySeconds}`);
    // Backoff spreads the retries but no budget bounds them: past the edge the mid tier, told nothing of its caller
    // leaving, still makes all 4 of its attempts per call. The users' own client's backed-off retries mostly come after
    // their 2-s timeout, and it makes none then (their abort ends its loop): about 4×, not the 16× of immediate retries.
    const longer = (await edge.jitterAt3).variants.naive.summary;
    assert.equal(longer.recoverySeconds, null, `full jitter at 3 s recovered after ${longer.recoverySeconds} s`);
    assert.ok(longer.amplification >= 3.5, `amplification ${longer.amplification}`);
  });
});
