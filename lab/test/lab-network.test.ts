import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { VirtualClock } from 'damper';
import { loadScenario } from '../src/lab/lab.js';
import { Recorder } from '../src/lab/judge/metrics.js';
import { Network } from '../src/lab/engine/network.js';
import { runIsolated } from '../src/lab/engine/parallel.js';
import { type Delay } from '../src/lab/schema/common.js';
import { type ServiceScenario } from '../src/lab/world/service.js';
import { Database, type Row } from '../src/lab/world/database.js';

/** facebook-2010 cut to one minute, a 1 s invalid value at 20 s, each hop costing `hopDelay`. */
const shortFacebook = (hopDelay: Delay): Promise<ServiceScenario> =>
  loadScenario('facebook-2010').then((s) => {
    const f = s as ServiceScenario;
    return { ...f, durationS: 60, baseline: { fromS: 0, toS: 10 }, faults: [{ ...f.faults[0]!, startS: 20, endS: 21 }], network: { hopDelay } };
  });
const runs = [0, 5].map((ms) => shortFacebook({ kind: 'constant', ms }).then((s) => runIsolated(s, 1)));

describe('network hops between tiers', () => {
  test('a constant 0 costs no draw and no timer', async () => {
    const clock = new VirtualClock({ seed: 1 });
    const network = new Network(clock, { kind: 'constant', ms: 0 }, 1);
    assert.equal(network.free, true);
    let ran = false;
    network.hop(() => (ran = true));
    assert.equal(ran, true, 'a free hop is a plain call');
    assert.equal(clock.nextTimerAt(), undefined);
  });

  test('a constant hop is a timer of that many whole ms, rounded up', async () => {
    const clock = new VirtualClock({ seed: 1 });
    const network = new Network(clock, { kind: 'constant', ms: 4.2 }, 1);
    let at = -1;
    network.hop(() => (at = clock.now()));
    await clock.advance(10);
    assert.equal(at, 5);
  });

  test('exponential hops have their mean, log-normal ones their median (whole ms, rounded up)', () => {
    const clock = new VirtualClock({ seed: 1 });
    const n = 40_000;
    const exponential = new Network(clock, { kind: 'exponential', meanMs: 20 }, 7);
    const draws = Array.from({ length: n }, () => exponential.hopMs());
    const mean = draws.reduce((a, d) => a + d, 0) / n;
    // Rounding up adds about half a millisecond to the mean.
    assert.ok(Math.abs(mean - 20.5) < 0.5, `exponential mean ${mean}`);
    const lognormal = new Network(clock, { kind: 'lognormal', medianMs: 30, sigma: 0.8 }, 7);
    const sorted = Array.from({ length: n }, () => lognormal.hopMs()).sort((a, b) => a - b);
    const median = sorted[n / 2]!;
    assert.ok(median >= 29 && median <= 31, `log-normal median ${median}`);
    assert.ok(sorted[Math.floor(n * 0.99)]! > 3 * median, 'log-normal has a long tail');
  });

  test('a query to the database costs a hop there and a hop back', async () => {
    const clock = new VirtualClock({ seed: 1 });
    // 1 worker at 100 q/s: 10 ms of service.
    const db = new Database(clock, new Recorder(60), { capacityQps: 100, workers: 1, maxQueue: 10 }, new Network(clock, { kind: 'constant', ms: 3 }, 1));
    let at = -1;
    void db.query('k').then((row) => {
      assert.equal((row as Row).valid, true);
      at = clock.now();
    });
    await clock.advance(50);
    assert.equal(at, 3 + 10 + 3);
  });

  test('facebook-2010: a 5 ms hop adds 10 ms to a request answered by the cache tier', async () => {
    const [free, hops] = await Promise.all(runs);
    // damper answers almost every request from its cache: its p99 is a hit's latency (the web server's 1 ms), and a hop each way.
    assert.equal(free!.variants.damper.summary.p99Ms, 1);
    assert.equal(hops!.variants.damper.summary.p99Ms, 11);
    // The network draws from a source of its own: the traffic is the same.
    assert.equal(hops!.variants.damper.summary.simulatedRequests, free!.variants.damper.summary.simulatedRequests);
  });
});
