import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compareFidelity } from '../src/lab/judge/fidelity.js';
import { agreementWords, figureValue } from '../src/lab/judge/fidelity-words.js';
import { type Fidelity } from '../src/lab/real/real-run.js';
import { FIDELITY_METRICS, HOST_METRICS, PROCESS_COLOURS, renderFidelity, RUN_COLOURS } from '../src/lab/report/fidelity-page.js';
import { fidelityFixture, realRun, withSummary } from './fixtures/fidelity.js';
import { inChromium } from './support/browser.js';

/**
 * Opens a fidelity page built from constructed runs in Debian's headless
 * Chromium, from a file:// URL with no network, and checks that every chart
 * draws the simulation and the real runs (each in its colour), the host
 * charts their processes, that hovering reads out every run, and that the
 * table says what the comparison says, cell by cell. Leaves a full-page
 * screenshot in test-output/fidelity.png.
 */

function rgb(hex: string): { r: number; g: number; b: number } {
  const c = (i: number): number => parseInt(hex.slice(1 + 2 * i, 3 + 2 * i), 16);
  return { r: c(0), g: c(1), b: c(2) };
}

/** The fixture with damper's third real run 12 points short during the trigger: one figure (and with it the verdict) disagrees. */
function disagreeing(): Fidelity {
  const f = fidelityFixture();
  const damper = f.variants.damper!;
  const short = realRun(f.scenario, { triggerGoodput: 0.85, recoveryS: 0, storm: 1, noise: 14 });
  return { ...f, variants: { ...f.variants, damper: { ...damper, real: [damper.real[0]!, damper.real[1]!, withSummary(short, {})] } } };
}

test('fidelity page: every chart draws its runs in Chromium, and the table says what the comparison says', async () => {
  const f = disagreeing();
  const html = renderFidelity(f, { naive: ['server0 used 0.98 of a core for 12 s: its event loop, not the modelled capacity, may have limited this run'] });
  const expectedCharts = 2 * (FIDELITY_METRICS.length + HOST_METRICS.length);

  const { result: trace, problems, requests } = await inChromium(html, 'fidelity', { width: 1360, height: 900 }, async (tab) => {
    await tab.waitForFunction((n) => document.querySelectorAll('.chart canvas').length >= n, expectedCharts, { timeout: 10_000 });
    const drawn = await tab.evaluate(
      ({ colours }) => {
        const near = (px: ArrayLike<number>, i: number, c: { r: number; g: number; b: number }): boolean =>
          (px[i + 3] ?? 0) > 200 && Math.abs((px[i] ?? 0) - c.r) < 20 && Math.abs((px[i + 1] ?? 0) - c.g) < 20 && Math.abs((px[i + 2] ?? 0) - c.b) < 20;
        return [...document.querySelectorAll<HTMLElement>('.chart')].map((el) => {
          const canvas = el.querySelector('canvas');
          const id = `${el.dataset.variant}/${el.dataset.metric}`;
          const px = canvas?.getContext('2d')?.getImageData(0, 0, canvas.width, canvas.height).data ?? [];
          const counts = colours.map(() => 0);
          for (let i = 0; i < px.length; i += 4) colours.forEach((c, k) => (counts[k]! += near(px, i, c) ? 1 : 0));
          return { id, metric: el.dataset.metric ?? '', canvases: el.querySelectorAll('canvas').length, width: canvas?.width ?? 0, counts };
        });
      },
      { colours: [RUN_COLOURS.simulation, ...RUN_COLOURS.real.slice(0, 3), PROCESS_COLOURS[0], PROCESS_COLOURS[3]].map(rgb) },
    );
    // Hover the middle of naive's offered-load chart: its readout and its synced neighbours'.
    await tab.locator('.chart[data-variant="naive"][data-metric="offered"] .u-over').hover({ position: { x: 300, y: 60 } });
    const readouts = await tab.evaluate(() => Object.fromEntries([...document.querySelectorAll<HTMLElement>('.chart[data-variant="naive"]')].map((el) => [el.dataset.metric, el.querySelector('.readout')?.textContent ?? ''])));
    const tables = await tab.evaluate(() =>
      [...document.querySelectorAll<HTMLTableElement>('table.fidelity')].map((t) => ({
        variant: t.dataset.variant ?? '',
        rows: [...t.querySelectorAll<HTMLTableRowElement>('tbody tr')].map((tr) => ({
          figure: tr.dataset.figure ?? '',
          state: tr.className,
          sim: tr.querySelector('td.sim')?.textContent ?? '',
          runs: [...tr.querySelectorAll('td.run')].map((td) => ({ text: td.textContent ?? '', off: td.classList.contains('off') })),
          agree: tr.querySelector('td.agree')?.textContent ?? '',
        })),
      })),
    );
    const notes = await tab.evaluate(() => [...document.querySelectorAll('#variant-naive ul.host-notes li')].map((li) => li.textContent ?? ''));
    const headline = await tab.evaluate(() => document.querySelector('header p.verdict')?.textContent ?? '');
    return { drawn, readouts, tables, notes, headline };
  });

  const [sim, real1, real2, real3, users, server0] = [0, 1, 2, 3, 4, 5];
  assert.equal(trace.drawn.length, expectedCharts, 'per variant, a chart per series and per host measure');
  for (const c of trace.drawn) {
    assert.equal(c.canvases, 1, `${c.id}: one canvas`);
    assert.ok(c.width > 200, `${c.id}: canvas is ${c.width}px wide`);
    if (c.metric === 'cpu' || c.metric === 'lagP99Ms') {
      assert.ok(c.counts[users]! > 50 && c.counts[server0]! > 50, `${c.id}: a line per process (users ${c.counts[users]}, server0 ${c.counts[server0]} pixels)`);
    } else assert.ok(c.counts[sim]! > 50, `${c.id}: the simulation’s line is missing (${c.counts[sim]} pixels of its colour)`);
  }
  // The simulation is drawn over the real runs, and where they run close it covers them (naive's origin): each run is looked for over all its variant's run charts.
  for (const variant of ['naive', 'damper']) {
    const charts = trace.drawn.filter((c) => c.id.startsWith(`${variant}/`) && c.metric !== 'cpu' && c.metric !== 'lagP99Ms');
    for (const [k, r] of [real1, real2, real3].entries()) {
      const ink = charts.reduce((n, c) => n + c.counts[r]!, 0);
      assert.ok(ink > 200, `${variant}: real run ${k + 1}’s lines are missing (${ink} pixels of its colour)`);
    }
  }

  const { readouts } = trace;
  assert.match(readouts.offered ?? '', /^t = \d+ s · simulation [\d,.]+ req\/s · run 1 [\d,.]+ req\/s · run 2 [\d,.]+ req\/s · run 3 [\d,.]+ req\/s$/, 'every run read out, the simulation first');
  assert.match(readouts.originQps ?? '', / · capacity [\d,.]+ q\/s$/, 'the origin readout ends with that second’s capacity');
  assert.match(readouts.cpu ?? '', /^t = \d+ s · users \(run 1\) [\d.]+ cores · .* · host 2 cores · one event loop 1 core$/, 'the host readout: each process and run, then the host’s cores');

  // The table, cell by cell, against the comparison itself.
  const expected = compareFidelity(f);
  assert.deepEqual(
    trace.tables.map((t) => t.variant),
    expected.map((e) => e.variant),
  );
  for (const [i, { variant, row }] of expected.entries()) {
    const table = trace.tables[i]!;
    assert.equal(table.rows.length, row.figures.length, `${variant}: a row per figure`);
    for (const [j, c] of row.figures.entries()) {
      const shown = table.rows[j]!;
      assert.equal(shown.figure, c.figure);
      assert.equal(shown.state, c.agrees === null ? 'shown' : c.agrees ? 'agrees' : 'disagrees', `${variant} ${c.figure}`);
      assert.equal(shown.sim, figureValue(c.figure, c.simulated), `${variant} ${c.figure}: simulated`);
      assert.deepEqual(
        shown.runs,
        c.real.map((x, k) => ({ text: figureValue(c.figure, x), off: c.within?.[k] === false })),
        `${variant} ${c.figure}: each real run, those outside the bar marked`,
      );
      assert.equal(shown.agree, agreementWords(c) || '—', `${variant} ${c.figure}: agreement`);
    }
  }
  const damper = trace.tables.find((t) => t.variant === 'damper')!;
  const goodput = damper.rows.find((r) => r.figure === 'triggerGoodput')!;
  assert.deepEqual([goodput.state, goodput.agree, goodput.runs.map((r) => r.off)], ['disagrees', '✗ 2/3', [false, false, true]], 'the run 12 points short is the one marked');
  assert.match(trace.headline, /damper: they disagree on verdict, goodput during the trigger/);
  assert.match(trace.headline, /The host may have limited naive/);
  assert.deepEqual(trace.notes, ['server0 used 0.98 of a core for 12 s: its event loop, not the modelled capacity, may have limited this run']);

  assert.deepEqual(problems, [], 'no console errors or warnings, no page errors');
  assert.deepEqual(requests, [], 'the page loads nothing over the network');
});
