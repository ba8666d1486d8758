import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { REPORT_METRICS, renderReport } from '../src/lab/report.js';
import { VARIANTS } from '../src/lab/results.js';
import { loadScenario, shippedScenarios } from '../src/lab/lab.js';
import { runIsolated } from '../src/lab/parallel.js';

/**
 * Opens the rendered report in Debian's headless Chromium, from a file:// URL
 * with no network, and checks that every chart is drawn without a console
 * error. Leaves a full-page screenshot in test-output/report.png.
 */

const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const SCREENSHOT = resolve('test-output', 'report.png');

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
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: install Debian's chromium (apt-get install chromium), as .ci/run does; this test does not skip`);

  // The real thing: the shipped scenario, both variants, at the default seed.
  // Every shipped scenario, as `npm start` reports them.
  const run = { seed: 1, scenarios: await Promise.all((await shippedScenarios()).map(async (name) => runIsolated(await loadScenario(name), 1))) };
  const expectedCharts = run.scenarios.length * REPORT_METRICS.length * VARIANTS.length;
  const dir = mkdtempSync(join(tmpdir(), 'damper-report-'));
  const profile = join(dir, 'profile');
  const page = join(dir, 'report.html');
  writeFileSync(page, renderReport(run));

  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: ARGS,
    headless: true,
    viewport: { width: 1360, height: 900 },
    deviceScaleFactor: 1,
    offline: true,
  });
  try {
    const tab = context.pages()[0] ?? (await context.newPage());
    const problems: string[] = [];
    tab.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`console.${m.type()}: ${m.text()}`);
    });
    tab.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    const requests: string[] = [];
    tab.on('request', (r) => {
      if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) requests.push(r.url());
    });

    await tab.goto(pathToFileURL(page).href, { waitUntil: 'load' });
    await tab.waitForFunction((n) => document.querySelectorAll('.chart canvas').length >= n, expectedCharts, { timeout: 10_000 });

    const charts = await tab.evaluate(() =>
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

    assert.equal(charts.length, expectedCharts, 'one container per scenario × metric × variant');
    for (const c of charts) {
      assert.equal(c.canvases, 1, `${c.id}: one canvas`);
      assert.ok(c.width > 200, `${c.id}: canvas is ${c.width}px wide`);
      assert.ok(c.inked > 1000, `${c.id}: only ${c.inked} drawn pixels`);
      assert.ok(c.coloured > 50, `${c.id}: the series line is missing (${c.coloured} series-coloured pixels)`);
    }

    mkdirSync(resolve('test-output'), { recursive: true });
    await tab.screenshot({ path: SCREENSHOT, fullPage: true });

    assert.deepEqual(problems, [], 'no console errors or warnings, no page errors');
    assert.deepEqual(requests, [], 'the report loads nothing over the network');
  } finally {
    await context.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
