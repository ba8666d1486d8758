import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

test('a test run fails on any unhandled rejection', () => {
  // Without NODE_TEST_CONTEXT the child is a top-level run, not a subtest of this one.
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  // TAP, which names the failure's type on every Node (Node 24's default reporter, spec, does not).
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=tap', 'test/fixtures/unhandled-rejection.ts'], { encoding: 'utf8', timeout: 30_000, env });
  assert.notEqual(r.status, 0, 'the runner passed a test that leaked a rejection');
  assert.match(r.stdout, /failureType: 'unhandledRejection'/);
});
