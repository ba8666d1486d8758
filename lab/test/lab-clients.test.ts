import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { VirtualClock } from 'damper';
import { type ClientWorld, Clients } from '../src/lab/engine/clients.js';
import { Recorder } from '../src/lab/judge/metrics.js';
import { Network } from '../src/lab/engine/network.js';
import { retryDelayMs } from '../src/lab/engine/retry-delay.js';
import { type Backoff, type FaultSpanDoc, type ScenarioCommon } from '../src/lab/schema/common.js';

describe('a naive client’s retry delays, per backoff', () => {
  const never = (): number => assert.fail('no draw without full jitter');

  test('none retries at once; fixed waits the same each time', () => {
    assert.deepEqual([1, 2, 3].map((n) => retryDelayMs({ kind: 'none' }, n, never)), [0, 0, 0]);
    assert.deepEqual([1, 2, 3].map((n) => retryDelayMs({ kind: 'fixed', delayMs: 250 }, n, never)), [250, 250, 250]);
  });

  test('exponential doubles from baseMs up to maxMs', () => {
    const b: Backoff = { kind: 'exponential', baseMs: 100, maxMs: 1000 };
    assert.deepEqual([1, 2, 3, 4, 5, 6, 2000].map((n) => retryDelayMs(b, n, never)), [100, 200, 400, 800, 1000, 1000, 1000]);
  });

  test('full jitter draws whole ms uniformly below the exponential delay', () => {
    const b: Backoff = { kind: 'full-jitter', baseMs: 100, maxMs: 1000 };
    let u = 0;
    const sweep = (): number => (u = (u + 0.618_034) % 1);
    for (const [n, cap] of [[1, 100], [3, 400], [9, 1000]] as const) {
      const draws = Array.from({ length: 2000 }, () => retryDelayMs(b, n, sweep));
      assert.ok(draws.every((d) => Number.isInteger(d) && d >= 0 && d < cap), `retry ${n}: outside [0, ${cap})`);
      const mean = draws.reduce((a, d) => a + d, 0) / draws.length;
      assert.ok(Math.abs(mean - (cap - 1) / 2) < cap * 0.02, `retry ${n}: mean ${mean}, cap ${cap}`);
    }
    assert.equal(retryDelayMs(b, 1, () => 0), 0);
  });
});

/** A scenario of one population and nothing else, for the clients alone. */
function bare(backoff: Backoff): ScenarioCommon {
  const fault: FaultSpanDoc = { kind: 'none', startS: 1, endS: 2, label: 'nothing', trigger: true };
  return {
    name: 'bare', title: 'bare', description: '', source: '', scaling: '', durationS: 20,
    baseline: { fromS: 0, toS: 1 }, objective: { p99Ms: 100, goodputRatio: 0.9, holdS: 1 },
    clients: [{ name: 'c', rate: 1, timeoutMs: 50, retries: 4, retryDelayMs: 0, backoff, priority: 'normal' }],
    faults: [fault], network: { hopDelay: { kind: 'constant', ms: 0 } },
  };
}

/** Runs `bare(backoff)` against a system that fails every request at once; the gaps between each request's attempts. */
async function retryGaps(backoff: Backoff): Promise<number[][]> {
  const clock = new VirtualClock({ seed: 1 });
  const scenario = bare(backoff);
  const starts = new Map<string, number[]>();
  let next = 0;
  const world: ClientWorld<FaultSpanDoc> = {
    send(req, replies) {
      const s = starts.get(req.key) ?? [];
      s.push(req.start);
      starts.set(req.key, s);
      replies.fail(req);
    },
    fault: () => {},
    keys: () => () => `r${next++}`,
  };
  const clients = new Clients({ clock, recorder: new Recorder(scenario.durationS), scenario, seed: 1, network: new Network(clock, scenario.network.hopDelay, 1) }, world);
  await clients.run();
  // Requests whose retries outlive the run are left out.
  return [...starts.values()].filter((s) => s.length === 5).map((s) => s.slice(1).map((t, i) => t - s[i]!));
}

describe('the client driver retries per its population’s backoff, in virtual time', () => {
  test('exponential: 100, 200, then capped at 300 ms', async () => {
    const gaps = await retryGaps({ kind: 'exponential', baseMs: 100, maxMs: 300 });
    assert.ok(gaps.length >= 5, `${gaps.length} requests`);
    for (const g of gaps) assert.deepEqual(g, [100, 200, 300, 300]);
  });

  test('full jitter: each gap below its cap, and not the same for every request', async () => {
    const gaps = await retryGaps({ kind: 'full-jitter', baseMs: 100, maxMs: 300 });
    for (const g of gaps) g.forEach((d, i) => assert.ok(d >= 0 && d < [100, 200, 300, 300][i]!, `gap ${d} of retry ${i + 1}`));
    assert.ok(new Set(gaps.map((g) => g.join())).size > 1);
  });

  test('none: every retry at once', async () => {
    for (const g of await retryGaps({ kind: 'none' })) assert.deepEqual(g, [0, 0, 0, 0]);
  });
});

describe('arrivals: Poisson by default, or a load generator’s fixed interval', () => {
  /** `bare`'s one population at 200/s, `arrivals` as given, against a system that answers at once; offered requests per second, the load doubled from 10 s. */
  async function offered(arrivals: 'poisson' | 'fixed' | undefined): Promise<readonly number[]> {
    const clock = new VirtualClock({ seed: 1 });
    const base = bare({ kind: 'none' });
    const scenario: ScenarioCommon = { ...base, clients: [{ ...base.clients[0]!, rate: 200, retries: 0, ...(arrivals === undefined ? {} : { arrivals }) }] };
    const recorder = new Recorder(scenario.durationS);
    const world: ClientWorld<FaultSpanDoc> = { send: (req, replies) => replies.answer(req), fault: () => {} };
    const clients = new Clients({ clock, recorder, scenario, seed: 1, network: new Network(clock, scenario.network.hopDelay, 1) }, world);
    clock.setTimer(() => (clients.load = 2), 10_000);
    await clients.run();
    return recorder.series().offered;
  }

  test('fixed: exactly rate × load every second, one every 1000 ÷ (rate × load) ms', async () => {
    const fixed = await offered('fixed');
    assert.deepEqual(fixed.slice(0, 10), Array(10).fill(200));
    assert.deepEqual(fixed.slice(11, 20), Array(9).fill(400), 'the doubled load from the second after the change');
  });

  test('poisson (the default): the same mean, bursts and lulls around it', async () => {
    const poisson = await offered(undefined);
    assert.deepEqual(await offered('poisson'), poisson, 'absent is poisson');
    const first = poisson.slice(0, 10);
    assert.ok(first.some((n) => n !== 200), 'not every second at the rate');
    assert.ok(Math.abs(first.reduce((a, n) => a + n, 0) / 10 - 200) < 15, `mean ${first.join(', ')}`);
  });
});
