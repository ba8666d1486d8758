import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  amplificationAgrees,
  compareFidelity,
  compareVariant,
  fidelityJson,
  type FigureComparison,
  type FidelityRow,
  hostPeaks,
  type NumberComparison,
  peakOriginAgrees,
  recoveryAgrees,
  spreadOf,
  triggerGoodputAgrees,
  verdictClass,
} from '../src/lab/judge/fidelity.js';
import { describeVariant } from '../src/lab/judge/verdict.js';
import { type FidelityVariant } from '../src/lab/real/real-run.js';
import { fidelityFixture, fixtureScenario, judgedRun, type Profile, realRun, withSummary } from './fixtures/fidelity.js';

const scenario = fixtureScenario();
const figure = (row: FidelityRow, name: FigureComparison['figure']): FigureComparison => row.figures.find((c) => c.figure === name)!;
const numbers = (row: FidelityRow, name: FigureComparison['figure']): NumberComparison => figure(row, name) as NumberComparison;

describe('a verdict is read from the summary as the verdict’s words read it', () => {
  const cases: { profile: Omit<Profile, 'noise'>; verdict: string; words: RegExp }[] = [
    { profile: { triggerGoodput: 0.4, recoveryS: null, storm: 4 }, verdict: 'stuck', words: /never recovered/ },
    // Healthy again at 50 s, after the operators' restart at 45 s.
    { profile: { triggerGoodput: 0.4, recoveryS: 20, storm: 4 }, verdict: 'operator-forced', words: /recovered only after the operators acted/ },
    { profile: { triggerGoodput: 0.4, recoveryS: 6, storm: 2 }, verdict: 'recovered', words: /recovered by itself 6 s/ },
    { profile: { triggerGoodput: 0.5, recoveryS: 0, storm: 1 }, verdict: 'recovered', words: /healthy again as soon as the trigger ended/ },
    { profile: { triggerGoodput: 0.97, recoveryS: 0, storm: 1 }, verdict: 'stayed healthy', words: /stayed healthy throughout/ },
  ];
  for (const c of cases) {
    test(`${c.verdict}: ${c.words.source}`, () => {
      const run = judgedRun(scenario, { ...c.profile, noise: 1 });
      assert.equal(verdictClass(scenario, run), c.verdict);
      assert.match(describeVariant(scenario, 'naive', run), c.words, 'the page’s verdict and the report’s words are one reading');
    });
  }
});

describe('the bars of issue 30, item 4', () => {
  test('goodput during the trigger: within 10 points, exactly 10 included despite float noise', () => {
    assert.ok(triggerGoodputAgrees(0.4, 0.5));
    assert.ok(triggerGoodputAgrees(0.4, 0.3), '0.4 − 0.3 is 0.10000000000000003 in floats');
    assert.ok(!triggerGoodputAgrees(0.4, 0.5001));
    assert.ok(!triggerGoodputAgrees(0.4, 0.2999));
  });

  test('recovery: within max(3 s, 25 %) of the simulation’s', () => {
    assert.ok(recoveryAgrees(0, 3), '3 s floor');
    assert.ok(!recoveryAgrees(0, 4));
    assert.ok(recoveryAgrees(20, 25), '25 % of 20 s is 5 s');
    assert.ok(!recoveryAgrees(20, 26));
    assert.ok(recoveryAgrees(400, 300) && !recoveryAgrees(400, 299), '25 % of 400 s is 100 s');
  });

  test('recovery: never agrees only with never, however long the other took', () => {
    assert.ok(recoveryAgrees(null, null));
    assert.ok(!recoveryAgrees(null, 500), 'stuck in the simulation, recovered at 500 s for real');
    assert.ok(!recoveryAgrees(500, null), 'and the reverse');
  });

  test('amplification: within 25 % of the simulation’s; a peak under a tiny baseline: 25 %, at least 1 q/s', () => {
    assert.ok(amplificationAgrees(4, 5) && amplificationAgrees(4, 3));
    assert.ok(!amplificationAgrees(4, 5.01) && !amplificationAgrees(4, 2.99));
    assert.ok(peakOriginAgrees(0.2, 1.2), 'under 1 q/s apart');
    assert.ok(!peakOriginAgrees(0.2, 1.3));
    assert.ok(peakOriginAgrees(40, 50) && !peakOriginAgrees(40, 51));
  });
});

describe('three real runs against one simulation', () => {
  const naive = { triggerGoodput: 0.4, recoveryS: null, storm: 4 } as const;
  const variant = (change: (runs: FidelityVariant['real']) => FidelityVariant['real'] = (r) => r): FidelityVariant => ({
    simulated: judgedRun(scenario, { ...naive, noise: 1 }),
    real: change([2, 3, 4].map((n) => realRun(scenario, { ...naive, noise: n }))),
  });
  const judged = (row: FidelityRow): Record<string, string> =>
    Object.fromEntries(row.figures.filter((c) => c.role === 'judged').map((c) => [c.figure, `${c.agreeing}/${c.real.length}${c.agrees ? ' ✓' : ' ✗'}`]));

  test('runs drawn to the same profile agree on every judged figure', () => {
    const row = compareVariant(scenario, variant());
    assert.equal(row.runs, 3);
    assert.deepEqual(judged(row), { verdict: '3/3 ✓', triggerGoodput: '3/3 ✓', recoverySeconds: '3/3 ✓', amplification: '3/3 ✓' });
    assert.ok(row.agrees);
  });

  test('one run 11 points short during the trigger: that figure disagrees, 2 of 3, and so does the row; nothing else', () => {
    const row = compareVariant(scenario, variant((r) => [r[0]!, r[1]!, withSummary(r[2]!, { trigger: { ...r[2]!.summary.trigger, goodputRatio: 0.29 } })]));
    assert.deepEqual(judged(row), { verdict: '3/3 ✓', triggerGoodput: '2/3 ✗', recoverySeconds: '3/3 ✓', amplification: '3/3 ✓' });
    assert.ok(!row.agrees);
  });

  test('one run amplifies 30 % more: amplification disagrees, 2 of 3', () => {
    const row = compareVariant(scenario, variant((r) => [withSummary(r[0]!, { amplification: r[0]!.summary.amplification * 1.3 }), r[1]!, r[2]!]));
    assert.deepEqual(judged(row), { verdict: '3/3 ✓', triggerGoodput: '3/3 ✓', recoverySeconds: '3/3 ✓', amplification: '2/3 ✗' });
  });

  test('stuck in the simulation, one run recovered at 500 s: the verdict and the recovery disagree', () => {
    const row = compareVariant(scenario, variant((r) => [r[0]!, r[1]!, withSummary(r[2]!, { recovered: true, recoverySeconds: 500 })]));
    assert.deepEqual(judged(row), { verdict: '2/3 ✗', triggerGoodput: '3/3 ✓', recoverySeconds: '2/3 ✗', amplification: '3/3 ✓' });
    assert.deepEqual(numbers(row, 'recoverySeconds').spread, { min: 500, median: null, max: null }, 'never ranks after every number');
  });

  test('the same recovery time, but only after the operators acted: the verdict alone disagrees', () => {
    const recovered = { triggerGoodput: 0.4, recoveryS: 10, storm: 4 } as const;
    const row = compareVariant(scenario, {
      simulated: judgedRun(scenario, { ...recovered, noise: 1 }),
      real: [2, 3, 4].map((n) => realRun(scenario, { ...recovered, noise: n })).map((r, i) => (i === 1 ? withSummary(r, { operatorForced: true }) : r)),
    });
    assert.deepEqual((figure(row, 'verdict') as { real: readonly string[] }).real, ['recovered', 'operator-forced', 'recovered']);
    assert.deepEqual(judged(row), { verdict: '2/3 ✗', triggerGoodput: '3/3 ✓', recoverySeconds: '3/3 ✓', amplification: '3/3 ✓' });
  });

  test('the figures shown for information never make a row disagree', () => {
    const row = compareVariant(scenario, variant((r) => r.map((x) => withSummary(x, { p99Ms: x.summary.p99Ms * 10, errorRate: 0.01 }))));
    assert.ok(row.agrees);
    assert.equal(figure(row, 'p99Ms').role, 'shown');
    assert.equal(figure(row, 'p99Ms').agrees, null);
    assert.equal(figure(row, 'errorRate').agreeing, null);
  });

  test('a baseline under 1 q/s: the peak origin rate is compared instead of a quotient of noise', () => {
    const cached = { triggerGoodput: 0.97, recoveryS: 0, storm: 1, baselineOriginQps: 0.5 } as const;
    const v: FidelityVariant = { simulated: judgedRun(scenario, { ...cached, noise: 1 }), real: [2, 3].map((n) => realRun(scenario, { ...cached, noise: n })) };
    // One real run's baseline was 0.1 q/s: its amplification is several times the simulation's, its peak is not.
    const noisy = { ...v, real: [withSummary(v.real[0]!, { baselineOriginQps: 0.1, amplification: v.real[0]!.summary.peakOriginQps / 0.1 }), v.real[1]!] };
    const row = compareVariant(scenario, noisy);
    assert.equal(figure(row, 'amplification'), undefined);
    assert.deepEqual(judged(row), { verdict: '2/2 ✓', triggerGoodput: '2/2 ✓', recoverySeconds: '2/2 ✓', peakOriginQps: '2/2 ✓' });
  });

  test('no real run: refused, not an empty agreement', () => {
    assert.throws(() => compareVariant(scenario, { simulated: judgedRun(scenario, { ...naive, noise: 1 }), real: [] }), /at least one real run/);
  });
});

describe('the spread of the real runs', () => {
  test('lowest, upper median, highest; never ranks after every number', () => {
    assert.deepEqual(spreadOf([40, 12, 30]), { min: 12, median: 30, max: 40 });
    assert.deepEqual(spreadOf([12, null, 40]), { min: 12, median: 40, max: null });
    assert.deepEqual(spreadOf([null, 5]), { min: 5, median: null, max: null }, 'the upper median: a value a run had, not a mean of never and 5 s');
    assert.deepEqual(spreadOf([7]), { min: 7, median: 7, max: 7 });
  });
});

describe('fidelity.json', () => {
  test('keys in a fixed order whatever order the summaries were built in, numbers rounded to 4 decimals', () => {
    const f = fidelityFixture();
    const damper = f.variants.damper!;
    const first = damper.real[0]!;
    // The same summary, its keys in reverse order and one figure with more digits than a chart needs.
    const reordered = { ...first, summary: Object.fromEntries(Object.entries({ ...first.summary, errorRate: 0.0123456789 }).reverse()) as unknown as typeof first.summary };
    const rounded = { ...first, summary: { ...first.summary, errorRate: 0.0123 } };
    const json = (r: typeof first): string => fidelityJson({ ...f, variants: { ...f.variants, damper: { ...damper, real: [r, ...damper.real.slice(1)] } } });
    assert.equal(json(reordered), json(rounded));
    const doc = JSON.parse(json(reordered)) as { variants: { damper: { real: { errorRate: number }[] } } };
    assert.equal(doc.variants.damper.real[0]!.errorRate, 0.0123);
  });

  test('what it holds: the bars, each variant’s figures, summaries and host peaks; a variant not run is absent', () => {
    const f = fidelityFixture();
    const doc = JSON.parse(fidelityJson({ ...f, variants: { naive: f.variants.naive! } })) as Record<string, unknown> & { variants: Record<string, { figures: Record<string, unknown>; real: { host: { name: string }[] }[] }> };
    assert.deepEqual(Object.keys(doc), ['scenario', 'seed', 'cores', 'fitting', 'bars', 'agrees', 'variants']);
    assert.deepEqual(doc.bars, { triggerGoodputPoints: 10, recoveryS: 3, recoveryShare: 0.25, amplificationShare: 0.25, baselineFloorQps: 1 });
    assert.deepEqual(Object.keys(doc.variants), ['naive']);
    assert.deepEqual(Object.keys(doc.variants.naive!.figures), ['verdict', 'triggerGoodput', 'recoverySeconds', 'amplification', 'errorRate', 'p99Ms']);
    assert.deepEqual(
      doc.variants.naive!.real[0]!.host.map((h) => h.name),
      ['users', 'tier1', 'tier2', 'server0', 'proxy'],
    );
  });

  test('a run with a database carries what a query was measured to hold its slot beyond its sleep; one without, nothing', () => {
    const f = fidelityFixture();
    const naive = f.variants.naive!;
    const measured = { ...naive, real: [{ ...naive.real[0]!, database: { serviceMs: 33, measuredMs: 34.04321, overheadMs: 1.04321 } }, ...naive.real.slice(1)] };
    const doc = JSON.parse(fidelityJson({ ...f, variants: { naive: measured } })) as { variants: { naive: { real: { database?: unknown }[] } } };
    assert.deepEqual(doc.variants.naive.real[0]!.database, { serviceMs: 33, measuredMs: 34.0432, overheadMs: 1.0432 });
    assert.equal('database' in doc.variants.naive.real[1]!, false);
  });

  test('agrees is false at the top when one variant disagrees', () => {
    const f = fidelityFixture();
    const damper = f.variants.damper!;
    const off = { ...damper, real: damper.real.map((r) => withSummary(r, { recovered: true, recoverySeconds: 9 })) };
    const doc = JSON.parse(fidelityJson({ ...f, variants: { ...f.variants, damper: off } })) as { agrees: boolean; variants: Record<string, { agrees: boolean }> };
    assert.equal(doc.agrees, false);
    assert.equal(doc.variants.naive!.agrees, true);
    assert.equal(doc.variants.damper!.agrees, false);
    assert.deepEqual(
      compareFidelity(f).map((c) => c.variant),
      ['naive', 'damper'],
    );
  });
});

describe('the host’s share of a real run', () => {
  test('per process: mean and highest CPU, worst event-loop p99; null for a process with no event loop', () => {
    const run = realRun(scenario, { triggerGoodput: 0.4, recoveryS: null, storm: 4, noise: 2 });
    const server = run.host.find((h) => h.name === 'server0')!;
    const peaks = hostPeaks({ ...run, host: [{ ...server, cpu: [0.5, 1.5, 1], lagP99Ms: [null, 12, 40] }, { name: 'redis0', cpu: [0.1], lagP99Ms: [null], lagMaxMs: [null] }] });
    assert.deepEqual(peaks, [
      { name: 'server0', cpuMeanCores: 1, cpuMaxCores: 1.5, lagP99MaxMs: 40 },
      { name: 'redis0', cpuMeanCores: 0.1, cpuMaxCores: 0.1, lagP99MaxMs: null },
    ]);
  });
});
