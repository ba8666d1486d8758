import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { alertSentence } from '../src/lab/judge/alert-words.js';
import { type ChartData, characteristicMetrics, REPORT_METRICS, renderReport, reportMetrics } from '../src/lab/report/report.js';
import { VARIANTS } from '../src/lab/judge/results.js';
import { labRunFixture } from './fixtures/lab-run.js';

const run = labRunFixture();
const html = renderReport(run);

function dataIsland(page: string): ChartData {
  const m = /<script type="application\/json" id="lab-data">([\s\S]*?)<\/script>/.exec(page);
  assert.ok(m?.[1], 'the page has a JSON data island');
  return JSON.parse(m[1]) as ChartData;
}

/** The scenario's own `<section>`. */
function section(name: string): string {
  const from = html.indexOf(`<section class="scenario" id="scenario-${name}">`);
  assert.ok(from >= 0, name);
  return html.slice(from, html.indexOf('</section>', from));
}

/** The page as people read it: without the inlined uPlot, the page script and the data island. */
const prose = html.replace(/<script[\s\S]*?<\/script>/g, '').replace(/<style>[\s\S]*?<\/style>/g, '');

const uncached = run.scenarios.find((s) => !s.cached);
const cached = run.scenarios.find((s) => s.cached);

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

test('report: links sweep.html, which damper lab sweep and damper lab check write to the same folder', () => {
  assert.match(prose, /<p class="sibling">Beside this page: <a href="sweep.html">sweep.html<\/a>, a scenario’s vulnerable region over two axes[^<]*, if <code>damper lab sweep<\/code> or <code>damper lab check<\/code> wrote it to this folder\.<\/p>/);
  assert.deepEqual([...prose.matchAll(/href="(?!#|data:)([^"]+)"/g)].map((m) => m[1]), ['sweep.html'], 'the one link that leaves the page');
});

test('report: uPlot and its stylesheet are inlined', () => {
  const require = createRequire(import.meta.url);
  const js = readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8');
  const css = readFileSync(require.resolve('uplot/dist/uPlot.min.css'), 'utf8');
  assert.ok(html.includes(js.trim()), 'the uPlot bundle, byte for byte');
  assert.ok(html.includes(css.trim()), 'the uPlot stylesheet, byte for byte');
});

test('report: one chart container per scenario × metric × variant, and no hit ratio or stale answers where there is no cache', () => {
  const containers = [...html.matchAll(/<div class="chart" data-scenario="([^"]*)" data-metric="([^"]*)" data-variant="([^"]*)"/g)].map((m) => `${m[1]}/${m[2]}/${m[3]}`);
  const charted = run.scenarios.flatMap((s) => reportMetrics(s).flatMap((m) => VARIANTS.map((v) => `${s.name}/${m.key}/${v}`)));
  assert.ok(cached && uncached, 'the fixture has a cached and an uncached scenario');
  assert.equal(charted.length, (REPORT_METRICS.length + REPORT_METRICS.length - 2) * 2);
  // Each scenario's characteristic metrics follow its other charts, for the variants that have them.
  const expected = run.scenarios.flatMap((s) => [
    ...reportMetrics(s).flatMap((m) => VARIANTS.map((v) => `${s.name}/${m.key}/${v}`)),
    ...characteristicMetrics(s).flatMap((m) => VARIANTS.filter((v) => m.key in s.variants[v].characteristics).map((v) => `${s.name}/${m.key}/${v}`)),
  ]);
  assert.deepEqual(containers, expected);
  assert.doesNotMatch(section(uncached.name), /data-metric="(hitRatio|staleRatio)"/, `${uncached.name} has no cache: no hit-ratio or stale-answers chart`);
  assert.match(section(cached.name), /data-metric="hitRatio"/);
  assert.match(section(cached.name), /data-metric="staleRatio"/);
});

test('report: the characteristic metrics of both variants, the highest of each gauge’s series, and a note where a variant has none', () => {
  const data = dataIsland(html);
  for (const [i, s] of run.scenarios.entries()) {
    const own = section(s.name);
    assert.ok(own.includes(`<p class="alerts">${alertSentence(s).replace(/&/g, '&#38;')}</p>`), `${s.name}: which alerts fired, in words`);
    for (const v of VARIANTS) {
      for (const [gauge, byName] of Object.entries(s.variants[v].characteristics)) {
        const all = Object.values(byName);
        const top = all[0]!.map((_, t) => Math.max(...all.map((xs) => xs[t]!)));
        assert.deepEqual(data.scenarios[i]?.characteristics[v][gauge as keyof (typeof data.scenarios)[number]['characteristics']['naive']], top, `${s.name}/${v}/${gauge}`);
      }
    }
  }
  assert.ok(uncached);
  assert.match(section(uncached.name), /<div class="chart-absent">naive has no concurrency limiter here: no shed ratio<\/div>/);
  assert.match(section(uncached.name), /Not measured here: origin amplification \(neither variant has a cache\); stale ratio \(neither variant has a cache\)\./);
  assert.doesNotMatch(section(uncached.name), /data-metric="damper\.cache\./, 'no cache gauges where there is no cache');
});

test('report: the goodput chart has the best possible beside it; the origin chart the capacity of each second', () => {
  const data = dataIsland(html);
  for (const [i, s] of run.scenarios.entries()) {
    for (const v of VARIANTS) assert.deepEqual(data.scenarios[i]?.series[v].bestGoodput, s.variants[v].series.bestGoodput, `${s.name}/${v}: best possible, per second`);
    assert.deepEqual(data.scenarios[i]?.originCapacity, s.originCapacity, `${s.name}: the capacity line, per second`);
  }
  assert.ok(uncached && new Set(uncached.originCapacity).size > 1, 'the fixture’s capacity drops during its trigger');
  assert.match(html, /goodput[^<]*; wide pale line: the best possible with the capacity left/, 'the goodput row says what its second line is');
  assert.match(section(uncached.name), /<span class="line best"><\/span>best possible goodput/, 'and the legend names it');
  assert.match(section(uncached.name), /origin capacity 2,000 q\/s, 1,500 q\/s at the lowest/, 'the capacity legend gives its range');
});

test('report: one notation for ratios, `1.2×` as in the terminal and the verdicts; a p99 under 1 ms is `<1`', () => {
  assert.doesNotMatch(prose, /×\s?\d/, 'no factor written before its number');
  for (const s of run.scenarios) {
    const amplification = new RegExp(`title="amplification">[^<]+</th><td[^>]*>([^<]+)</td><td[^>]*>([^<]+)</td>`).exec(section(s.name));
    assert.ok(amplification, s.name);
    for (const cell of amplification.slice(1)) assert.match(cell, /^(\d\.\d|[1-9]\d+)×$/, `${s.name}: amplification as 1.2× or 65×`);
  }
  assert.ok(cached && cached.variants.damper.summary.p99Ms < 1, 'the fixture has a sub-millisecond p99');
  assert.match(section(cached.name), /title="p99Ms">[^<]+<\/th><td[^>]*>[\d,]+ ms<\/td><td[^>]*>&#60;1 ms<\/td>/);
  assert.doesNotMatch(prose, /\b0(\.0)? ms/, 'never a p99 of 0 ms');
});

test('report: the summary says how each variant did during the trigger, after it, and whether the operators forced it', () => {
  for (const s of run.scenarios) {
    const own = section(s.name);
    assert.ok(own.includes(`<p class="verdict">${s.verdict}</p>`), `${s.name}: the run’s verdict, as it is`);
    const groups = [...own.matchAll(/<tr class="group"><th scope="rowgroup"[^>]*>([^<]+)<\/th><\/tr>/g)].map((m) => m[1]);
    assert.deepEqual(groups, [`during the trigger, ${s.triggerStartS} s–${s.triggerEndS} s`, 'after it', 'whole run']);
    const cells = (key: string): string[] => {
      const m = new RegExp(`<th scope="row" title="${key.replace('.', '\\.')}">[^<]+</th><td[^>]*>([^<]+)</td><td[^>]*>([^<]+)</td></tr>`).exec(own);
      assert.ok(m, `${s.name}: a ${key} row`);
      return [m[1]!, m[2]!];
    };
    const pct = (r: number): string => (r >= 1 ? '100%' : `${(r * 100).toFixed(1)}%`);
    assert.deepEqual(cells('trigger.goodputRatio'), VARIANTS.map((v) => pct(s.variants[v].summary.trigger.goodputRatio)));
    assert.deepEqual(cells('trigger.bestGoodputRatio'), VARIANTS.map((v) => pct(s.variants[v].summary.trigger.bestGoodputRatio)));
    assert.deepEqual(cells('trigger.efficiency'), VARIANTS.map((v) => pct(s.variants[v].summary.trigger.efficiency)));
    assert.deepEqual(cells('operatorForced'), VARIANTS.map((v) => (s.variants[v].summary.operatorForced ? 'yes' : 'no')));
  }
  assert.ok(run.scenarios.some((s) => s.variants.naive.summary.operatorForced), 'the fixture has a forced recovery');
});

test('report: the trigger window is marked apart from operator spans', () => {
  const data = dataIsland(html);
  for (const [i, s] of run.scenarios.entries()) {
    assert.equal(data.scenarios[i]?.triggerStartS, s.triggerStartS);
    assert.equal(data.scenarios[i]?.triggerEndS, s.triggerEndS);
    assert.match(section(s.name), new RegExp(`<span class="swatch trigger-window"></span>the trigger window \\(${s.triggerStartS}–${s.triggerEndS} s\\)`));
  }
  const css = /<style>\n(\s*:root[\s\S]*?)<\/style>/.exec(html)?.[1] ?? '';
  const rule = (selector: string): string => new RegExp(`${selector.replace('.', '\\.')} \\{([^}]*)\\}`).exec(css)?.[1] ?? '';
  assert.match(rule('.swatch.operator'), /repeating-linear-gradient/, 'operator spans are hatched');
  assert.doesNotMatch(rule('.swatch.trigger'), /repeating/, 'the trigger is a tint');
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
  // The data island, uPlot, the chart kit, the page's own script.
  assert.equal(html.match(/<script[\s>]/g)?.length, 4);
});

test('report: each scenario shows its title, description, verdict, a summary of both variants and a legend for its fault spans', () => {
  for (const s of run.scenarios) {
    const section = html.slice(html.indexOf(`<section class="scenario" id="scenario-${s.name}">`));
    const own = section.slice(0, section.indexOf('</section>'));
    assert.ok(own.length > 0, s.name);
    assert.match(own, new RegExp(`<h2>${s.title.replace(/[()]/g, '\\$&')} `));
    assert.ok(own.includes(`<p class="verdict">`));
    for (const key of ['recovered', 'recoverySeconds', 'operatorForced', 'trigger\\.goodputRatio', 'trigger\\.bestGoodputRatio', 'trigger\\.efficiency', 'baselineOriginQps', 'peakOriginQps', 'amplification', 'errorRate', 'goodputRatio', 'p99Ms', 'invalidServed']) {
      assert.match(own, new RegExp(`<th scope="row" title="${key}">[^<]+</th><td[^>]*>[^<]+</td><td[^>]*>[^<]+</td></tr>`), `${s.name}: ${key} row with both variants`);
    }
    for (const kind of new Set(s.faults.map((f) => f.kind))) assert.ok(own.includes(`<span class="swatch ${kind}">`), `${s.name}: ${kind} legend`);
  }
});

const here = (path: string): string => fileURLToPath(new URL(path, import.meta.url));
/** Renders the fixture in a process of its own, from the build or (with tsx) from the TypeScript sources. */
function renderElsewhere(args: readonly string[], report: string, fixture: string): string {
  const script = `const [{ renderReport }, { labRunFixture }] = await Promise.all([import(${JSON.stringify(report)}), import(${JSON.stringify(fixture)})]); process.stdout.write(renderReport(labRunFixture()));`;
  const r = spawnSync(process.execPath, [...args, '--input-type=module', '-e', script], { encoding: 'utf8', maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

test('report: the same run renders the same bytes, in another process too', () => {
  assert.ok(renderElsewhere([], here('../src/lab/report/report.js'), here('./fixtures/lab-run.js')) === html, 'a fresh process renders the same page');
});

test('report: the page script is a file of its own, compiled beside report.js, inlined as compiled', () => {
  const compiled = readFileSync(here('../src/lab/report/report-page.js'), 'utf8');
  assert.doesNotMatch(compiled, /^\s*(import|export)\b/m, 'a plain script: tsc emitted no import or export');
  const scripts = [...html.matchAll(/<script>\n([\s\S]*?)<\/script>/g)].map((m) => m[1]);
  assert.equal(scripts.at(-1)?.trimEnd(), compiled.replace(/\/\/# sourceMappingURL=\S+\s*$/, '').trimEnd(), 'the last script is the compiled page script, without its source-map comment');
  const kit = readFileSync(here('../src/lab/report/chart-kit.js'), 'utf8');
  assert.equal(scripts.at(-2)?.trimEnd(), kit.replace(/\/\/# sourceMappingURL=\S+\s*$/, '').trimEnd(), 'the chart kit before it, as compiled');
  const source = readFileSync(here('../../src/lab/report/report.ts'), 'utf8');
  assert.doesNotMatch(source, /String\.raw|new uPlot|getElementById/, 'no browser code left inline in report.ts');
});

test('report: run from the TypeScript sources (tsx), the page script is transpiled to the same bytes', () => {
  const root = here('../../');
  const fromSource = renderElsewhere(['--import', 'tsx'], `${root}src/lab/report/report.ts`, `${root}test/fixtures/lab-run.ts`);
  assert.ok(fromSource === html, 'the page from src/ is the page from the build');
});

test('report: eslint checks the page script as browser code, and keeps the Clock rules on the library', async () => {
  // From the repository's root, where the one eslint config lives.
  const eslint = new ESLint({ cwd: here('../../../') });
  const page = 'lab/src/lab/report/report-page.ts';
  const [result] = await eslint.lintFiles([page]);
  assert.ok(result, 'linted');
  assert.deepEqual(result.messages, [], 'the page script passes lint');
  const config = (await eslint.calculateConfigForFile(page)) as { languageOptions: { globals: Record<string, unknown> } };
  assert.ok('requestAnimationFrame' in config.languageOptions.globals, 'with browser globals');
  const messages = async (code: string, filePath: string): Promise<string[]> => (await eslint.lintText(code, { filePath }))[0]!.messages.map((m) => m.ruleId ?? '');
  assert.deepEqual(await messages('requestAnimationFrame(() => undefined);\n', page), [], 'a page may wait for a frame');
  assert.deepEqual(await messages('(function (): void { process.exit(1); })();\n', page), ['no-restricted-globals'], 'no Node in the page');
  assert.deepEqual(await messages('export const now = (): number => Date.now();\n', 'lab/src/lab/report/report.ts'), ['no-restricted-properties'], 'the lab still reads time through the Clock');
  assert.deepEqual(await messages('export const now = (): number => Date.now();\n', 'src/cache/cache.ts'), ['no-restricted-properties'], 'and so does the library');
});
