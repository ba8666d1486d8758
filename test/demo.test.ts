import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { runDemo } from '../src/lab/demo.js';

test('demo: naive floods the database and fails callers; damper does neither', async () => {
  for (const seed of [1, 2, 3]) {
    const { naive, damper } = await runDemo(seed);
    assert.equal(naive.requests, damper.requests, 'both variants see the same traffic');
    assert.ok(naive.databaseQueries > 50 * damper.databaseQueries, `naive ${naive.databaseQueries} vs damper ${damper.databaseQueries}`);
    assert.ok(naive.errorsSeen > naive.requests / 3);
    assert.equal(damper.errorsSeen, 0);
    assert.equal(damper.invalidServed, 0);
    assert.equal(damper.valuesServed, damper.requests);
    assert.ok(damper.peakQueriesPerSecond <= 5);
  }
});

test('demo: the same seed gives the same result', async () => {
  assert.deepEqual(await runDemo(7), await runDemo(7));
});

const cli = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], { encoding: 'utf8', timeout: 30_000 });

test('cli: demo prints the side-by-side table', () => {
  const r = cli('demo');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /naive cache-aside/);
  assert.match(r.stdout, /database queries/);
});

test('cli: bad usage is a one-line reason and exit 2, never a stack trace', () => {
  for (const args of [['demo', '--seed', 'x'], ['--bogus'], ['nope'], []]) {
    const r = cli(...args);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, /^damper: /);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  }
});
