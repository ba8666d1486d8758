import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Page } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** What a page did besides drawing: console errors/warnings and page errors, and requests that left file: and data:. */
export interface PageTrace<T> {
  readonly result: T;
  readonly problems: readonly string[];
  readonly requests: readonly string[];
}

/**
 * Opens `html` in Debian's headless Chromium from a file:// URL, offline, runs
 * `inspect` on the loaded page, and leaves a full-page screenshot in
 * test-output/`name`.png. Fails (never skips) when Chromium is missing:
 * `.ci/run` installs it.
 */
export async function inChromium<T>(html: string, name: string, viewport: { width: number; height: number }, inspect: (tab: Page) => Promise<T>): Promise<PageTrace<T>> {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: install Debian's chromium (apt-get install chromium), as .ci/run does; this test does not skip`);
  const dir = mkdtempSync(join(tmpdir(), `damper-${name}-`));
  const page = join(dir, `${name}.html`);
  writeFileSync(page, html);
  const context = await chromium.launchPersistentContext(join(dir, 'profile'), { executablePath: CHROMIUM, args: ARGS, headless: true, viewport, deviceScaleFactor: 1, offline: true });
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
    const result = await inspect(tab);
    mkdirSync(resolve('test-output'), { recursive: true });
    // No time limit of its own (playwright's is 30 s): the screenshot is for a reader, not a check, and a full-page capture of a
    // tall page on a starved host took longer (CI, 2026-12-04: load 13 on 2 cores). The runner's limit per file still bounds it.
    await tab.screenshot({ path: resolve('test-output', `${name}.png`), fullPage: true, timeout: 0 });
    return { result, problems, requests };
  } finally {
    await context.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
