import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { bestGoodput, originCapacity } from '../src/lab/judge/best-possible.js';
import { loadScenario } from '../src/lab/lab.js';
import { type Series, type VariantRun } from '../src/lab/judge/results.js';
import { describeVariant, judge } from '../src/lab/judge/verdict.js';
import { type ServiceScenario } from '../src/lab/world/service.js';
import { type Scenario } from '../src/lab/world/worlds.js';

/** A flat series of `n` seconds: `offered` each second, `goodput(s)` answered, p99 `p99(s)`. */
function flat(n: number, offered: number, goodput: (s: number) => number, p99: (s: number) => number = () => 10): Series {
  const seconds = Array.from({ length: n }, (_, s) => s);
  return {
    offered: seconds.map(() => offered),
    goodput: seconds.map(goodput),
    errors: seconds.map((s) => offered - goodput(s)),
    originQps: seconds.map(() => 5),
    p99Ms: seconds.map(p99),
    hitRatio: seconds.map(() => 1),
    staleRatio: seconds.map(() => 0),
    inFlight: seconds.map(() => 0),
  };
}

function measured(series: Series, recoverySeconds: number | null, skippedFaults: number[] = []): VariantRun {
  return {
    series,
    skippedFaults,
    characteristics: {},
    summary: { recovered: recoverySeconds !== null, recoverySeconds, baselineOriginQps: 5, peakOriginQps: 5, amplification: 1, errorRate: 0, goodputRatio: 1, p99Ms: 10, invalidServed: 0, simulatedRequests: 1, simulatedS: series.offered.length },
  };
}

describe('the best possible: what an ideal policy could serve with the capacity left', () => {
  test('retry-storm: a ×4 slowdown leaves the server workers ÷ (4 × the service time at one request per worker)', async () => {
    const s = (await loadScenario('retry-storm')) as ServiceScenario;
    const best = bestGoodput(s, Array.from({ length: s.durationS }, () => 200));
    // 4 workers, 10 ms × (1 + 0.002 × 4) each: 396.8/s healthy, 99.2/s slowed.
    assert.equal(best[100], 200, 'healthy: everything offered');
    assert.equal(best[130], 99.2063);
    assert.equal(best[150], 200, 'the slowdown ends at 150 s');
    assert.equal(originCapacity(s, s.durationS)[130], 99.2063);
    assert.equal(originCapacity(s, s.durationS)[100], 396.8254);
  });

  test('retry-storm: a service time past the users’ timeout leaves nothing to serve in time', async () => {
    const s = (await loadScenario('retry-storm')) as ServiceScenario;
    const slow: ServiceScenario = { ...s, faults: [{ ...s.faults[0]!, factor: 1000 } as ServiceScenario['faults'][number]] };
    assert.equal(bestGoodput(slow, Array.from({ length: s.durationS }, () => 200))[130], 0);
  });

  test('a fault that starts mid-second counts for its part of that second', async () => {
    const s = (await loadScenario('retry-storm')) as ServiceScenario;
    const half: ServiceScenario = { ...s, faults: [{ ...s.faults[0]!, startS: 120.5 }] };
    const best = bestGoodput(half, Array.from({ length: s.durationS }, () => 200));
    assert.equal(best[120], 149.6032, "half of 200, half of 99.2");
  });

  test('servers with cores: a hung server takes its share of the farm’s capacity with it', async () => {
    const s = (await loadScenario('missourian-2010')) as ServiceScenario;
    // 10 cores at 5 ms a cached page: 2,000 pages/s a server (its 150 workers allow more).
    const best = bestGoodput(s, Array.from({ length: s.durationS }, () => 3000));
    assert.equal(best[100], 3000);
    assert.equal(best[200], 2000, 'web1 hung: one server left');
    assert.equal(best[400], 3000, 'restarted');
  });

  test('a cache tier on nodes: reads held in memory, then the nodes left, then the database', async () => {
    const s = (await loadScenario('discord-2019')) as ServiceScenario;
    // Every node killed: only memory (the 845 most read of 900 keys: 600 user objects at 0.7 ÷ 600 of reads each, 245 push settings at 0.3 ÷ 300) and the database (60 q/s) are left.
    const killed: ServiceScenario = { ...s, faults: [{ kind: 'kill-cache', startS: 120, endS: 300, label: 'all down', trigger: true }] };
    const best = bestGoodput(killed, Array.from({ length: s.durationS }, () => 1800));
    assert.equal(best[100], 1800);
    assert.ok(Math.abs(best[200]! - (1800 * (0.7 + 245 * 0.001) + 60)) < 1e-3, `best ${best[200]}`);
    // The shipped degradation leaves far more than the 500 reads/s offered.
    assert.equal(bestGoodput(s, Array.from({ length: s.durationS }, () => 500))[200], 500);
  });

  test('facebook-2010: every key has a last known good value in the cache tier, so everything offered', async () => {
    const s = await loadScenario('facebook-2010');
    assert.deepEqual(bestGoodput(s, [1000, 0, 7]), [1000, 0, 7]);
  });
});

describe('verdicts: during the trigger, after it, and the operators', () => {
  const fb = (): Promise<Scenario> => loadScenario('facebook-2010');

  test('the trigger window: goodput and the best possible over offered, and their quotient', async () => {
    const s = (await loadScenario('retry-storm')) as ServiceScenario;
    // Half of what is offered answered during the slowdown, when 49.6 % was possible.
    const run = judge(s, measured(flat(s.durationS, 200, (t) => (t >= 120 && t < 150 ? 100 : 200)), 0));
    assert.deepEqual(run.summary.trigger, { goodputRatio: 0.5, bestGoodputRatio: 0.496, efficiency: 1 });
    const worse = judge(s, measured(flat(s.durationS, 200, (t) => (t >= 120 && t < 150 ? 50 : 200)), 0));
    assert.equal(worse.summary.trigger.efficiency, 0.504);
    assert.deepEqual(run.series.bestGoodput.slice(119, 121), [200, 99.2063]);
  });

  test('"stayed healthy" only when the trigger window was healthy too', async () => {
    const s = await fb();
    const healthy = judge(s, measured(flat(s.durationS, 1000, () => 1000), 0));
    assert.match(describeVariant(s, 'damper', healthy), /stayed healthy throughout/);
    // Recovered at once after the trigger, but p99 broke the objective during it.
    const slow = judge(s, measured(flat(s.durationS, 1000, () => 1000, (t) => (t >= 150 && t < 160 ? 5000 : 10)), 0));
    assert.doesNotMatch(describeVariant(s, 'damper', slow), /stayed healthy/);
    assert.match(describeVariant(s, 'damper', slow), /healthy again as soon as the trigger ended/);
  });

  test('a recovery that came only after the operators acted is flagged, and said', async () => {
    const s = await fb();
    // facebook-2010: the trigger ends at 180 s, operators cut traffic at 800 s.
    const rescued = judge(s, measured(flat(s.durationS, 1000, (t) => (t < 120 || t > 860 ? 1000 : 100)), 679));
    assert.equal(rescued.summary.operatorForced, true);
    assert.match(describeVariant(s, 'naive', rescued), /recovered only after the operators acted, 679 s after/);
    // Recovered before the operators' action: its own doing.
    const itself = judge(s, measured(flat(s.durationS, 1000, () => 1000), 20));
    assert.equal(itself.summary.operatorForced, false);
    assert.match(describeVariant(s, 'damper', itself), /recovered by itself 20 s after/);
    // An operator action that did not happen to this variant (skipped) forces nothing.
    const skipped = judge(s, measured(flat(s.durationS, 1000, () => 1000), 679, [1]));
    assert.equal(skipped.summary.operatorForced, false);
  });

  test('results.json fields come in the contract’s order', async () => {
    const s = await fb();
    const keys = Object.keys(judge(s, measured(flat(s.durationS, 1000, () => 1000), 0)).summary);
    assert.deepEqual(keys.slice(0, 3), ['recovered', 'recoverySeconds', 'operatorForced']);
    assert.ok(keys.indexOf('trigger') > keys.indexOf('p99Ms'));
  });
});

describe('the best possible under the users’ timeout (Brooker’s simple_collapse_sim)', () => {
  test('a server of 10,000 workers that slows 10 ms per request held is best at 200 held under a 3 s timeout', async () => {
    const s = (await loadScenario('retry-storm')) as ServiceScenario;
    const brooker: ServiceScenario = {
      ...s,
      servers: { ...s.servers, workers: 10_000, service: { kind: 'constant', ms: 1000 }, slowdownPerInFlight: 0.01 },
      clients: s.clients.map((c) => ({ ...c, timeoutMs: 3000 })),
    };
    // 200 held: 3 s each, 66.7/s. Holding all 10,000 would answer in 101 s, after everyone left.
    assert.equal(bestGoodput(brooker, [500])[0], 66.6667);
    assert.equal(bestGoodput(brooker, [50])[0], 50, 'never more than offered');
    assert.equal(originCapacity(brooker, 1)[0], 99.0099, 'the capacity line: every worker busy');
  });
});
