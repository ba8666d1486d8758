import assert from 'node:assert/strict';
import { test } from 'node:test';
import { VARIANTS } from '../src/lab/judge/results.js';
import { type CellSummary, outcome, summaryOf, type SweepCell, type SweepResult } from '../src/lab/sweep/sweep.js';
import { cellColour, OUTCOME_COLOURS, renderSweepReport } from '../src/lab/sweep/sweep-report.js';

/**
 * A synthetic 3 × 3 sweep with every outcome (quick, slow, stuck), markup in
 * its text, and the scenario's own setting on the grid. No simulation: the
 * page's shape is checked here, its drawing in sweep-report.browser.test.ts.
 */
function fixture(home: { load: number; trigger: number } = { load: 1, trigger: 60 }): SweepResult {
  const loads = [0.5, 1, 1.5];
  const triggers = [5, 32.5, 60];
  const cells: SweepCell[] = [];
  for (const [t, trigger] of triggers.entries()) {
    for (const [l, load] of loads.entries()) {
      // naive: stuck above the anti-diagonal, slow on it, quick below; damper: quick but one slow cell.
      const naive: CellSummary =
        l + t > 2 ? { recovered: false, recoverySeconds: null, amplification: 77.2, goodputRatio: 0.155, simulatedS: 750 } : l + t === 2 ? { recovered: true, recoverySeconds: 420, amplification: 30, goodputRatio: 0.6, simulatedS: 600 } : { recovered: true, recoverySeconds: 2 * (l + t), amplification: 1.9, goodputRatio: 0.999, simulatedS: 200 };
      const damper: CellSummary = l === 2 && t === 2 ? { recovered: true, recoverySeconds: 95, amplification: 2.5, goodputRatio: 0.97, simulatedS: 280 } : { recovered: true, recoverySeconds: 0, amplification: 1.3, goodputRatio: 1, simulatedS: 180 };
      cells.push({ across: load, up: trigger, watchedS: 780, horizonS: 780, variants: { naive, damper } });
    }
  }
  return {
    scenario: 'fixture-<1>',
    title: 'A <script>alert("not code")</script> incident',
    seed: 7,
    operators: false,
    quickS: 60,
    baseRate: 1000,
    variants: VARIANTS,
    across: { kind: 'load', label: 'offered load (× the scenario’s client rates)', values: loads, scenarioValue: home.load },
    up: { kind: 'trigger', label: 'invalid value held (s) <b>', values: triggers, scenarioValue: home.trigger },
    cells,
  };
}

const result = fixture();
const html = renderSweepReport(result);

function ownFigure(page: string, v: string): string {
  const from = page.indexOf(`<figure class="heatmap" data-variant="${v}"`);
  assert.ok(from >= 0, `${v}: a figure`);
  return page.slice(from, page.indexOf('</figure>', from));
}

test('sweep page: one self-contained document that loads nothing from the network', () => {
  assert.match(html, /^<!doctype html>\n<html lang="en">/);
  assert.ok(html.trimEnd().endsWith('</html>'));
  assert.equal(html.match(/<html[\s>]/g)?.length, 1);
  assert.doesNotMatch(html, /\b(src|href)\s*=\s*["']?\s*(https?:)?\/\//i, 'no src= or href= pointing at the network');
  assert.doesNotMatch(html, /@import|url\(/i);
  assert.doesNotMatch(html, /<script(?![^>]*type="application\/json")/i, 'no script to run: the heatmaps are SVG');
  assert.doesNotMatch(html, /<link(?![^>]*rel="icon"[^>]*href="data:)[^>]*>/i);
});

test('sweep page: one heatmap per variant, a cell per grid point coloured by its outcome', () => {
  for (const v of VARIANTS) {
    const fig = ownFigure(html, v);
    const cells = [...fig.matchAll(/<g class="cell (\w+)" data-across="([^"]+)" data-up="([^"]+)" data-outcome="(\w+)"><title>[^<]*<\/title><rect [^>]*fill="(#[0-9a-f]{6})"/g)];
    assert.equal(cells.length, 9, `${v}: 3 × 3 cells`);
    for (const [i, m] of cells.entries()) {
      const cell = result.cells[i]!;
      assert.equal(Number(m[2]), cell.across);
      assert.equal(Number(m[3]), cell.up);
      const o = outcome(summaryOf(cell, v), result.quickS);
      assert.equal(m[1], o);
      assert.equal(m[4], o);
      assert.equal(m[5], cellColour(summaryOf(cell, v), result.quickS, cell.watchedS));
      if (o === 'stuck') assert.equal(m[5], OUTCOME_COLOURS.stuck);
    }
  }
  const outcomes = (v: 'naive' | 'damper'): string[] => [...ownFigure(html, v).matchAll(/data-outcome="(\w+)"/g)].map((m) => m[1]!);
  assert.deepEqual(new Set(outcomes('naive')), new Set(['quick', 'slow', 'stuck']), 'the fixture has all three');
  assert.match(ownFigure(html, 'naive'), /Vulnerable region: <strong>3 of 9 cells<\/strong> \(33\.3%\) stuck; 3 recovered slowly, 3 quickly\./);
  assert.match(ownFigure(html, 'damper'), /Vulnerable region: <strong>0 of 9 cells<\/strong> \(0%\) stuck; 1 recovered slowly, 8 quickly\./);
});

test('sweep page: colours: quick cells darker when sooner, slow ones redder when later, stuck one colour', () => {
  const c = (r: number | null): string => cellColour({ recovered: r !== null, recoverySeconds: r, amplification: 1, goodputRatio: 1, simulatedS: 780 }, 60, 780);
  assert.equal(c(0), OUTCOME_COLOURS.quick[0]);
  assert.equal(c(60), OUTCOME_COLOURS.quick[1]);
  assert.equal(c(780), OUTCOME_COLOURS.slow[1]);
  assert.equal(c(null), OUTCOME_COLOURS.stuck);
  const red = (hex: string): number => parseInt(hex.slice(1, 3), 16) - parseInt(hex.slice(3, 5), 16);
  assert.ok(red(c(400)) > red(c(100)), 'later is redder');
});

test('sweep page: axes labelled with their values, the scenario’s own setting ringed, a legend', () => {
  for (const v of VARIANTS) {
    const fig = ownFigure(html, v);
    assert.deepEqual(
      [...fig.matchAll(/<text class="tick x"[^>]*>([^<]+)<\/text>/g)].map((m) => m[1]),
      ['0.5×', '1×', '1.5×'],
    );
    assert.deepEqual(
      [...fig.matchAll(/<text class="tick y"[^>]*>([^<]+)<\/text>/g)].map((m) => m[1]),
      ['5', '32.5', '60'],
    );
    assert.match(fig, /<text class="axis-title x"[^>]*>offered load \(× client rates; 1× = 1,000 req\/s\)<\/text>/);
    assert.match(fig, /<text class="axis-title y"[^>]*>invalid value held \(s\) &#60;b&#62;<\/text>/);
    assert.equal(fig.match(/<g class="scenario-point">/g)?.length, 1, `${v}: the scenario's setting ringed once`);
    // Load 1× is the middle column's centre (x = 92 + 1.5 × 133.33), 60 s the top row's (y = 12 + 66.67).
    assert.match(fig, /<circle class="scenario-point" cx="292" cy="78.67"/);
  }
  for (const words of ['recovered quickly', 'recovered slowly', 'stuck', 'ring']) assert.ok(html.includes(`<strong>${words}</strong>`), words);
  const outside = renderSweepReport(fixture({ load: 1, trigger: 600 }));
  assert.doesNotMatch(outside, /class="scenario-point"/);
  assert.match(outside, /— outside this grid/);
});

test('sweep page: the scenario’s own setting is ringed where it lies between the cells, not on the nearest one', () => {
  // Load 0.9× is four fifths of the way from the 0.5× column to the 1× one; 46.25 s half way between the rows of 32.5 s and 60 s.
  const fig = ownFigure(renderSweepReport(fixture({ load: 0.9, trigger: 46.25 })), 'naive');
  const x = 92 + (0.8 + 0.5) * (400 / 3);
  const y = 12 + (2 - 1.5 + 0.5) * (400 / 3);
  assert.match(fig, new RegExp(`<circle class="scenario-point" cx="${Number(x.toFixed(2))}" cy="${Number(y.toFixed(2))}"`));
  assert.match(fig, /<title>the scenario’s own setting: load = 0\.9×, invalid value held \(s\) &#60;b&#62; = 46\.25<\/title>/);
  // Half a step beyond the last value is still inside the grid's cells; more is outside.
  assert.match(renderSweepReport(fixture({ load: 1.7, trigger: 60 })), /class="scenario-point"/);
  assert.doesNotMatch(renderSweepReport(fixture({ load: 1.8, trigger: 60 })), /class="scenario-point"/);
});

test('sweep page: links report.html, which damper lab writes to the same folder', () => {
  assert.match(html, /<p class="sibling">Beside this page: <a href="report.html">report.html<\/a>, the replay of the scenario’s own point over time[^<]*, if <code>damper lab<\/code> wrote it to this folder\.<\/p>/);
});

test('sweep page: tables with every cell, trigger size down the side, counts per variant', () => {
  for (const v of VARIANTS) {
    const table = html.slice(html.indexOf(`<table class="grid" data-variant="${v}">`));
    const own = table.slice(0, table.indexOf('</table>'));
    const rows = [...own.matchAll(/<tr><th scope="row">([^<]+)<\/th>((?:<td[^>]*>.*?<\/td>)+)<\/tr>/g)];
    assert.deepEqual(
      rows.map((r) => r[1]),
      ['60', '32.5', '5'],
    );
    for (const r of rows) assert.equal(r[2]!.match(/<td/g)?.length, 3);
  }
  assert.match(html, /<tr><th scope="row">stuck<\/th><td>3<\/td><td>0<\/td><\/tr>/);
  assert.match(html, /<td class="slow">420 s<span class="detail">30× · 60.0%<\/span><\/td>/);
});

test('sweep page: one notation for ratios, `1.5×` as in the terminal and the report, never `×1.5`', () => {
  assert.doesNotMatch(html, /×\d/, 'no factor written before its number');
  assert.match(html, /<th scope="col">1\.5×<\/th>/, 'the table’s load columns');
  assert.match(html, /origin peak 77× baseline; goodput 15\.5%/, 'a cell’s title: amplification and goodput as format.ts writes them');
  assert.match(html, /across: load, 0\.5× to 1\.5×; up: invalid value held \(s\) &#60;b&#62;, 5 to 60\./, 'the axis, its unit, then its range');
});

test('sweep page: text is escaped; the data island parses back to the result', () => {
  assert.ok(html.includes('A &#60;script&#62;alert(&#34;not code&#34;)&#60;/script&#62; incident'));
  assert.doesNotMatch(html, /alert\("not code"\)/);
  const island = /<script type="application\/json" id="sweep-data">([\s\S]*?)<\/script>/.exec(html)?.[1] ?? '';
  assert.doesNotMatch(island, /</);
  assert.deepEqual(JSON.parse(island), result);
});

test('sweep page: the same result renders the same bytes', () => {
  assert.equal(renderSweepReport(fixture()), html);
});

test('sweep page: any two axes, each with its kind and label; a page shows only the variants its sweep ran', () => {
  const fields = {
    ...fixture(),
    variants: ['damper'] as const,
    across: { kind: 'field', field: 'server.workers', label: 'server.workers', values: [0.5, 1, 1.5], scenarioValue: 1 },
    up: { kind: 'field', field: 'faults[0].factor', label: 'faults[0].factor', values: [5, 32.5, 60], scenarioValue: 60 },
  } satisfies SweepResult;
  const page = renderSweepReport(fields);
  assert.equal(page.match(/<figure class="heatmap"/g)?.length, 1, 'one heatmap: the variant the sweep ran');
  assert.ok(!page.includes('data-variant="naive"'));
  const fig = ownFigure(page, 'damper');
  assert.deepEqual(
    [...fig.matchAll(/<text class="tick x"[^>]*>([^<]+)<\/text>/g)].map((m) => m[1]),
    ['0.5', '1', '1.5'],
    'a field’s values as set, not as factors',
  );
  assert.match(fig, /<text class="axis-title x"[^>]*>server.workers<\/text>/);
  assert.match(fig, /<text class="axis-title y"[^>]*>faults\[0\].factor<\/text>/);
  assert.match(fig, /damper at server.workers = 1, faults\[0\].factor = 60: /);
  assert.match(page, /across: server.workers, 0.5 to 1.5; up: faults\[0\].factor, 5 to 60. Each cell is one run of the scenario under the damper variant\./);
});

test('sweep page: a peer stack (--stack) gets its heatmap, its table and its column beside damper’s, its caption saying what it replaces', () => {
  const base = fixture();
  const withPeers: SweepResult = {
    ...base,
    variants: [...VARIANTS, 'cockatiel:bulkhead=8', 'bentocache'],
    cells: base.cells.map((c) => ({ ...c, variants: { ...c.variants, 'cockatiel:bulkhead=8': c.variants.naive!, bentocache: c.variants.damper! } })),
  };
  const page = renderSweepReport(withPeers);
  assert.equal(page.match(/<figure class="heatmap"/g)?.length, 4);
  assert.match(ownFigure(page, 'cockatiel:bulkhead=8'), /<figcaption><span class="variant">cockatiel:bulkhead=8<\/span> <span class="note">naive’s system with cockatiel in place of its client tiers<\/span><\/figcaption>/);
  assert.match(ownFigure(page, 'cockatiel:bulkhead=8'), /Vulnerable region: <strong>3 of 9 cells<\/strong>/);
  assert.match(ownFigure(page, 'bentocache'), /naive’s system with bentocache in place of its servers’ cache/);
  assert.match(page, /<table class="grid" data-variant="bentocache">/);
  assert.match(page, /<th scope="col">cells<\/th><th scope="col">naive<\/th><th scope="col">damper<\/th><th scope="col">cockatiel:bulkhead=8<\/th><th scope="col">bentocache<\/th>/);
  assert.match(page, /under each of the variants naive, damper, cockatiel:bulkhead=8, bentocache, on the same seed and traffic/);
});
