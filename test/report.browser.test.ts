import assert from 'node:assert/strict';
import { test } from 'node:test';
import { REPORT_METRICS, renderReport } from '../src/lab/report.js';
import { VARIANTS } from '../src/lab/results.js';
import { loadScenario, shippedScenarios } from '../src/lab/lab.js';
import { runIsolated } from '../src/lab/parallel.js';
import { inChromium } from './support/browser.js';

/**
 * Opens the rendered report in Debian's headless Chromium, from a file:// URL
 * with no network, and checks that every chart is drawn without a console
 * error. Leaves a full-page screenshot in test-output/report.png.
 */

// The few DOM shapes the in-page check touches: the project compiles without lib "dom".
interface PageCanvas {
  readonly width: number;
  readonly height: number;
  getContext(kind: '2d'): { getImageData(x: number, y: number, w: number, h: number): { readonly data: ArrayLike<number> } } | null;
}
interface PageElement {
  readonly dataset: Record<string, string | undefined>;
  querySelector(selector: 'canvas'): PageCanvas | null;
  querySelectorAll(selector: string): { readonly length: number };
}
declare const document: { querySelectorAll(selector: string): ArrayLike<PageElement> & Iterable<PageElement> };

test('report: every chart draws in Chromium, with no console or page errors', { timeout: 120_000 }, async () => {
  // Every shipped scenario, both variants, at the default seed, as `npm start` reports them.
  const run = { seed: 1, scenarios: await Promise.all((await shippedScenarios()).map(async (name) => runIsolated(await loadScenario(name), 1))) };
  const expectedCharts = run.scenarios.length * REPORT_METRICS.length * VARIANTS.length;

  const { result: charts, problems, requests } = await inChromium(renderReport(run), 'report', { width: 1360, height: 900 }, async (tab) => {
    await tab.waitForFunction((n) => document.querySelectorAll('.chart canvas').length >= n, expectedCharts, { timeout: 10_000 });
    return tab.evaluate(() =>
      [...document.querySelectorAll('.chart')].map((el) => {
        const canvas = el.querySelector('canvas');
        const id = `${el.dataset.scenario}/${el.dataset.metric}/${el.dataset.variant}`;
        if (canvas === null) return { id, canvases: 0, inked: 0, coloured: 0, width: 0 };
        const ctx = canvas.getContext('2d');
        const px = ctx?.getImageData(0, 0, canvas.width, canvas.height).data ?? [];
        let inked = 0;
        let coloured = 0;
        for (let i = 0; i < px.length; i += 4) {
          const [r = 0, g = 0, b = 0, a = 0] = [px[i], px[i + 1], px[i + 2], px[i + 3]];
          if (a > 0 && !(r > 250 && g > 250 && b > 250)) inked++;
          // The series stroke is a saturated blue; axes, grid and text are greys.
          if (a > 200 && b - r > 80) coloured++;
        }
        return { id, canvases: el.querySelectorAll('canvas').length, inked, coloured, width: canvas.width };
      }),
    );
  });

  assert.equal(charts.length, expectedCharts, 'one container per scenario × metric × variant');
  for (const c of charts) {
    assert.equal(c.canvases, 1, `${c.id}: one canvas`);
    assert.ok(c.width > 200, `${c.id}: canvas is ${c.width}px wide`);
    assert.ok(c.inked > 1000, `${c.id}: only ${c.inked} drawn pixels`);
    assert.ok(c.coloured > 50, `${c.id}: the series line is missing (${c.coloured} series-coloured pixels)`);
  }

  assert.deepEqual(problems, [], 'no console errors or warnings, no page errors');
  assert.deepEqual(requests, [], 'the report loads nothing over the network');
});
