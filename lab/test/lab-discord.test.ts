import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadScenario } from '../src/lab/lab.js';
import { runIsolated } from '../src/lab/engine/parallel.js';
import { ScenarioError, triggerEndS } from '../src/lab/scenario.js';
import { type ServiceScenario } from '../src/lab/world/service.js';
import { checkScenario, worldOf } from '../src/lab/world/worlds.js';
import { assertBars, seedName, VERDICT_SEEDS } from './support/bars.js';
import { scenarioDoc } from './support/scenario-doc.js';

// discord-2019 is a service scenario (issue 28): a cache tier on 12 nodes in
// front of the database, per-population keys, naive's three bugs as switches.
// Simulations run in worker threads (see test/lab-facebook.test.ts), started together
// so they share the machine's cores while the unit tests below run.
const discord = loadScenario('discord-2019') as Promise<ServiceScenario>;
const bySeed = new Map(VERDICT_SEEDS.map((seed) => [seed, discord.then((s) => runIsolated(s, seed))]));
/**
 * The scenario without the operators' ejection, its degraded nodes held `size` s,
 * watched 5 minutes after they recover rather than to the scenario's 16-minute
 * horizon: the loop holds or it does not within seconds (issue 25).
 */
const degradedOnly = (size: number): Promise<ServiceScenario> =>
  discord.then((s) => {
    const base = { ...s, faults: s.faults.filter((f) => f.kind !== 'eject-cache') };
    const resized = worldOf(base).trigger.resize(base, size) as ServiceScenario;
    return { ...resized, durationS: triggerEndS(resized) + 300 };
  });
const edge = new Map([1, 3].map((size) => [size, degradedOnly(size).then((s) => runIsolated(s, 1))]));

describe('discord-2019, at the default seed and one drawn at random', () => {
  for (const seed of VERDICT_SEEDS) {
    test(`${seedName(seed)}: naive stays down, damper stays up`, async () => {
      const run = await bySeed.get(seed)!;
      const damper = run.variants.damper.summary;
      // naive: the herd on the database outlives the degraded nodes by more than 10 minutes.
      assertBars(run);
      assert.equal(damper.invalidServed, 0);
      // The ejection is unconditional (operators reacted to the cache nodes' dashboards): it happened in both.
      assert.deepEqual(run.variants.naive.skippedFaults, []);
      assert.deepEqual(run.variants.damper.skippedFaults, []);
    });
  }
});

describe('priority shedding (issue 7): while the nodes are degraded, the origin budget sheds low priority first', () => {
  for (const seed of VERDICT_SEEDS) {
    test(`${seedName(seed)}: push-settings reads are shed, user-object reads are answered`, async () => {
      const s = await discord;
      const run = await bySeed.get(seed)!;
      const counts = run.variants.damper.populations;
      assert.ok(counts !== undefined, 'the world counts per population');
      const normal = counts['user-objects']!;
      const low = counts['push-settings']!;
      assert.ok(normal.requests > 0 && low.requests > 0);
      const shedShare = (c: { requests: number; shed: number }): number => c.shed / c.requests;
      // Some reads miss the server's memory and the cluster: the budget (a rate, 40 % of the database's capacity) is called upon, and sheds low priority.
      assert.ok(low.shed >= 100, `only ${low.shed} push-settings reads shed`);
      assert.ok(shedShare(low) >= 5 * shedShare(normal), `shed: low ${low.shed}/${low.requests}, normal ${normal.shed}/${normal.requests}`);
      // Normal priority keeps the objective through the degradation, and the database stays within the budget's rate.
      assert.ok(normal.good / normal.requests >= s.objective.goodputRatio, `user-objects goodput ${normal.good}/${normal.requests}`);
      assert.ok(run.variants.damper.summary.peakOriginQps <= 0.45 * s.database!.capacityQps, `damper's origin peak ${run.variants.damper.summary.peakOriginQps}/s`);
      // The naive code has no budget: it sheds nothing (it fails instead).
      const naive = run.variants.naive.populations!;
      assert.equal(naive['user-objects']!.shed + naive['push-settings']!.shed, 0);
    });
  }

  test('each population reads keys of its own, and the servers hold fewer keys than there are; a bad bound names its field', async () => {
    const s = await discord;
    const keys = s.clients.reduce((sum, c) => sum + (c.keys?.count ?? 0), 0);
    assert.equal(keys, 900);
    assert.ok(s.cache?.processEntries !== undefined && s.cache.processEntries < keys, `processEntries ${s.cache?.processEntries} of ${keys} keys`);
    const doc = scenarioDoc('discord-2019') as Record<string, unknown> & { cache: Record<string, unknown> };
    doc.cache.processEntries = 0;
    assert.throws(
      () => checkScenario(doc, 'x.json'),
      (e: unknown) => e instanceof ScenarioError && e.message === 'x.json: cache.processEntries: must be ≥ 1, got 0',
    );
  });
});

describe('the collapse comes from the feedback loop, not from the script', () => {
  test('nodes degraded for 1 s: the same naive code recovers by itself; for 3 s it does not', async () => {
    const short = (await edge.get(1)!).variants.naive.summary;
    assert.ok(short.recoverySeconds !== null && short.recoverySeconds <= 30, `1 s: naive recovery ${short.recoverySeconds}`);
    const longer = (await edge.get(3)!).variants.naive.summary;
    assert.equal(longer.recoverySeconds, null, `3 s: naive recovered after ${longer.recoverySeconds} s`);
    for (const run of [await edge.get(1)!, await edge.get(3)!]) assert.equal(run.variants.damper.summary.recoverySeconds, 0);
  });
});

describe('the scenario file', () => {
  test('the shipped scenario parses, and a bad node index or key names its field', async () => {
    const s = await discord;
    assert.equal(s.world, 'service');
    const doc = scenarioDoc('discord-2019') as Record<string, unknown> & { faults: Record<string, unknown>[]; keys?: unknown };
    doc.faults[0]!.nodes = [1, 99];
    assert.throws(
      () => checkScenario(doc, 'x.json'),
      (e: unknown) => e instanceof ScenarioError && e.message === 'x.json: faults[0].nodes[1]: must be a cache node index from 0 to 11, got 99',
    );
    doc.faults[0]!.nodes = [1];
    doc.keys = { count: 10 };
    assert.throws(
      () => checkScenario(doc, 'x.json'),
      (e: unknown) => e instanceof ScenarioError && e.message === 'x.json: keys: read by no population: each reads keys of its own',
    );
    delete doc.keys;
    const cache = doc.cache as Record<string, unknown>;
    const nodes = cache.nodes;
    delete cache.nodes;
    assert.throws(
      () => checkScenario(doc, 'x.json'),
      (e: unknown) => e instanceof ScenarioError && /^x\.json: cache\.originRateQps: only with cache\.nodes/m.test(e.message) && /^x\.json: cache\.naive\.breaker: only with cache\.nodes/m.test(e.message),
    );
    cache.nodes = nodes;
    doc.faults.push({ kind: 'invalid-value', key: 'push-settings:300', startS: 10, endS: 20, label: 'bad' });
    assert.throws(
      () => checkScenario(doc, 'x.json'),
      (e: unknown) => e instanceof ScenarioError && e.message === 'x.json: faults[2].key: must be user-objects:0 … user-objects:599, push-settings:0 … push-settings:299, got "push-settings:300"',
    );
  });

  test('the sweep’s trigger axis resizes the degraded span and moves what followed it', async () => {
    const s = await discord;
    const world = worldOf(s);
    assert.equal(world.trigger.size(s), 180);
    const longer = world.trigger.resize(s, 400) as ServiceScenario;
    assert.equal(longer.faults[0]!.endS, 520);
    assert.equal(longer.faults[1]!.startS, 180, 'the ejection began during the trigger: it stays');
    assert.ok(longer.durationS >= 520 + 600);
  });
});
