import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { REPORT_METRICS, renderReport } from '../src/lab/report.js';
import { VARIANTS, type Series } from '../src/lab/results.js';
import { labRunFixture } from './fixtures/lab-run.js';

const run = labRunFixture();
const html = renderReport(run);

function dataIsland(page: string): { seed: number; scenarios: { name: string; series: Record<string, Series> }[] } {
  const m = /<script type="application\/json" id="lab-data">([\s\S]*?)<\/script>/.exec(page);
  assert.ok(m?.[1], 'the page has a JSON data island');
  return JSON.parse(m[1]) as ReturnType<typeof dataIsland>;
}

test('report: one self-contained document that loads nothing from the network', () => {
  assert.match(html, /^<!doctype html>\n<html lang="en">/);
  assert.ok(html.trimEnd().endsWith('</html>'));
  assert.equal(html.match(/<html[\s>]/g)?.length, 1, 'exactly one document');
  assert.doesNotMatch(html, /\bsrc\s*=\s*["']?\s*(https?:)?\/\//i, 'no src= pointing at the network');
  assert.doesNotMatch(html, /\bhref\s*=\s*["']?\s*(https?:)?\/\//i, 'no href= pointing at the network');
  assert.doesNotMatch(html, /@import/i);
  assert.doesNotMatch(html, /url\(\s*["']?\s*(https?:)?\/\//i, 'no CSS url() pointing at the network');
  assert.doesNotMatch(html, /<script[^>]*\bsrc=/i, 'every script is inline');
  assert.doesNotMatch(html, /<link(?![^>]*rel="icon"[^>]*href="data:)[^>]*>/i, 'no stylesheet or font links');
});

test('report: uPlot and its stylesheet are inlined', () => {
  const require = createRequire(import.meta.url);
  const js = readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8');
  const css = readFileSync(require.resolve('uplot/dist/uPlot.min.css'), 'utf8');
  assert.ok(html.includes(js.trim()), 'the uPlot bundle, byte for byte');
  assert.ok(html.includes(css.trim()), 'the uPlot stylesheet, byte for byte');
});

test('report: one chart container per scenario × metric × variant', () => {
  const containers = [...html.matchAll(/<div class="chart" data-scenario="([^"]*)" data-metric="([^"]*)" data-variant="([^"]*)"/g)].map((m) => `${m[1]}/${m[2]}/${m[3]}`);
  const expected = run.scenarios.flatMap((s) => REPORT_METRICS.flatMap((m) => VARIANTS.map((v) => `${s.name}/${m.key}/${v}`)));
  assert.equal(expected.length, 2 * 6 * 2);
  assert.deepEqual(containers, expected);
});

test('report: the JSON data island parses back to the run’s series, nulls included', () => {
  const data = dataIsland(html);
  assert.equal(data.seed, run.seed);
  assert.deepEqual(
    data.scenarios.map((s) => s.name),
    run.scenarios.map((s) => s.name),
  );
  for (const [i, s] of run.scenarios.entries()) {
    for (const v of VARIANTS) assert.deepEqual(data.scenarios[i]?.series[v], s.variants[v].series, `${s.name}/${v}`);
  }
  const nulls = run.scenarios.flatMap((s) => VARIANTS.flatMap((v) => [...s.variants[v].series.p99Ms, ...s.variants[v].series.hitRatio])).filter((x) => x === null);
  assert.ok(nulls.length > 0, 'the fixture exercises gaps');
});

test('report: text from the run is escaped, and no data can close its script element', () => {
  // The fixture's description and a fault label carry markup.
  assert.ok(html.includes('&#60;script&#62;alert(&#34;not code&#34;)&#60;/script&#62;'));
  assert.ok(html.includes('fix the key &#60;/script&#62;&#60;b&#62;'));
  assert.doesNotMatch(html, /alert\("not code"\)/);
  const island = /<script type="application\/json" id="lab-data">([\s\S]*?)<\/script>/.exec(html)?.[1] ?? '';
  assert.doesNotMatch(island, /</, 'every < in the island is \\u003c');
  const labels = dataIsland(html).scenarios.flatMap((s) => (s as unknown as { faults: { label: string }[] }).faults.map((f) => f.label));
  assert.ok(labels.includes('operators take the site offline and fix the key </script><b>'), 'and it still parses back to the same text');
  // Every <script> opened is closed by its own </script>: nothing inside ends one early.
  assert.equal(html.match(/<script[\s>]/g)?.length, html.match(/<\/script>/g)?.length);
  assert.equal(html.match(/<script[\s>]/g)?.length, 3);
});

test('report: each scenario shows its title, description, verdict, a summary of both variants and a legend for its fault spans', () => {
  for (const s of run.scenarios) {
    const section = html.slice(html.indexOf(`<section class="scenario" id="scenario-${s.name}">`));
    const own = section.slice(0, section.indexOf('</section>'));
    assert.ok(own.length > 0, s.name);
    assert.match(own, new RegExp(`<h2>${s.title.replace(/[()]/g, '\\$&')} `));
    assert.ok(own.includes(`<p class="verdict">`));
    for (const key of ['recovered', 'recoverySeconds', 'baselineOriginQps', 'peakOriginQps', 'amplification', 'errorRate', 'goodputRatio', 'p99Ms', 'invalidServed']) {
      assert.match(own, new RegExp(`<th scope="row" title="${key}">[^<]+</th><td[^>]*>[^<]+</td><td[^>]*>[^<]+</td></tr>`), `${s.name}: ${key} row with both variants`);
    }
    for (const kind of new Set(s.faults.map((f) => f.kind))) assert.ok(own.includes(`<span class="swatch ${kind}">`), `${s.name}: ${kind} legend`);
  }
});

test('report: the same run renders the same bytes', () => {
  assert.equal(renderReport(labRunFixture()), html);
});
