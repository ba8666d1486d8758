import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type FidelityChartData, renderFidelity } from '../src/lab/report/fidelity-page.js';
import { fidelityFixture, OPERATOR_AT_S } from './fixtures/fidelity.js';

const f = fidelityFixture();
const html = renderFidelity(f, { damper: ['tier2 <lagged> 400 ms: the host, not the model, may have limited run 2'] });
const here = (path: string): string => fileURLToPath(new URL(path, import.meta.url));
const compiled = (name: string): string => readFileSync(here(`../src/lab/report/${name}.js`), 'utf8').replace(/\/\/# sourceMappingURL=\S+\s*$/, '').trimEnd();

function island(page: string): FidelityChartData {
  const m = /<script type="application\/json" id="fidelity-data">([\s\S]*?)<\/script>/.exec(page);
  assert.ok(m?.[1], 'the page has a JSON data island');
  assert.doesNotMatch(m[1], /</, 'every < in the island is \\u003c');
  return JSON.parse(m[1]) as FidelityChartData;
}

test('fidelity page: one self-contained document; uPlot, the chart kit and its own script inlined as compiled', () => {
  assert.match(html, /^<!doctype html>\n<html lang="en">/);
  assert.doesNotMatch(html, /\b(src|href)\s*=\s*["']?\s*(https?:)?\/\//i, 'nothing from the network');
  const scripts = [...html.matchAll(/<script>\n([\s\S]*?)<\/script>/g)].map((m) => m[1]!.trimEnd());
  assert.equal(scripts.length, 3, 'uPlot, the kit, the page’s script (and the island, typed JSON)');
  assert.equal(scripts[1], compiled('chart-kit'));
  assert.equal(scripts[2], compiled('fidelity-charts'));
  assert.equal(html.match(/<script[\s>]/g)?.length, html.match(/<\/script>/g)?.length, 'nothing inside a script ends it early');
});

test('fidelity page: the island carries every run’s series as run, and the scenario’s timeline', () => {
  const data = island(html);
  assert.deepEqual(
    data.variants.map((v) => v.name),
    ['naive', 'damper'],
  );
  const naive = data.variants[0]!;
  const source = f.variants.naive!;
  assert.deepEqual(naive.simulated.series.goodput, source.simulated.series.goodput);
  assert.deepEqual(
    naive.real.map((r) => r.series.originQps),
    source.real.map((r) => r.series.originQps),
  );
  assert.deepEqual(
    naive.real.map((r) => r.label),
    ['run 1', 'run 2', 'run 3'],
  );
  assert.deepEqual(naive.processes, ['users', 'tier1', 'tier2', 'server0', 'proxy']);
  assert.deepEqual(naive.host[0]!.processes[3]!.cpu, source.real[0]!.host[3]!.cpu);
  assert.equal(data.cores, 2);
  assert.deepEqual(
    data.faults.map((x) => [x.kind, x.startS]),
    [
      ['trigger', 20],
      ['operator', OPERATOR_AT_S],
    ],
  );
  assert.equal(data.faults[1]!.label, 'operators restart the server <when unhealthy>', 'markup travels as text');
  assert.equal(data.originCapacity.length, 60);
});

test('fidelity page: a section per variant run, the host notes escaped in their variant’s', () => {
  const damper = html.slice(html.indexOf('<section class="variant" id="variant-damper"'));
  assert.ok(damper.includes('<li>tier2 &#60;lagged&#62; 400 ms: the host, not the model, may have limited run 2</li>'));
  assert.doesNotMatch(html.slice(0, html.indexOf('id="variant-damper"')), /host-notes">/, 'not in naive’s');
  const only = renderFidelity({ ...f, variants: { damper: f.variants.damper! } });
  assert.doesNotMatch(only, /id="variant-naive"/);
  assert.equal(island(only).variants.length, 1);
  assert.equal(only.match(/<div class="chart" /g)?.length, 7, 'five run charts and two host charts');
});

test('fidelity page: run from the TypeScript sources (tsx), the same bytes as from the build', () => {
  const root = here('../../');
  const render = (args: readonly string[], page: string, fixture: string): string => {
    const script = `const [{ renderFidelity }, { fidelityFixture }] = await Promise.all([import(${JSON.stringify(page)}), import(${JSON.stringify(fixture)})]); process.stdout.write(renderFidelity(fidelityFixture()));`;
    const r = spawnSync(process.execPath, [...args, '--input-type=module', '-e', script], { encoding: 'utf8', maxBuffer: 64 << 20 });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout;
  };
  const fromBuild = render([], here('../src/lab/report/fidelity-page.js'), here('./fixtures/fidelity.js'));
  assert.ok(fromBuild === renderFidelity(f), 'a fresh process renders the same page');
  assert.ok(render(['--import', 'tsx'], `${root}src/lab/report/fidelity-page.ts`, `${root}test/fixtures/fidelity.ts`) === fromBuild, 'the scripts transpiled from src/ are the compiled ones');
});
