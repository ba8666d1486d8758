import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import { test } from 'node:test';

// `npm test`'s runner (scripts/test.mjs) lowers every computing job's priority, its whole session included, so
// the real-time tests get a core whenever they ask (issue 25: with Linux's autogroups on, a niced task alone in
// its session took half of a core it shared with a real-time test). This file is a computing job, so it checks
// that from inside: run by the runner, its task and its session are at the computing nice. Run any other way
// (`node --test` by hand), there is nothing to check.

/** scripts/test.mjs's COMPUTING_NICE. */
const COMPUTING_NICE = 10;

test('a computing job runs below the real-time tests: its task and its session (autogroup) are niced', (t) => {
  if (process.env.DAMPER_TEST_JOB !== 'computing') {
    t.skip('not run by npm test as a computing job');
    return;
  }
  assert.equal(getPriority(), COMPUTING_NICE, "the task's nice");
  // Linux with autogroups: the CPU is shared between sessions before nice counts, so the session's nice is what matters.
  const enabled = existsSync('/proc/sys/kernel/sched_autogroup_enabled') && readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1';
  if (!enabled || !existsSync('/proc/self/autogroup')) {
    t.diagnostic('no autogroups here: the task nice is what counts');
    return;
  }
  const group = readFileSync('/proc/self/autogroup', 'utf8');
  assert.match(group, new RegExp(`nice ${COMPUTING_NICE}\\b`), `the session's nice: ${group.trim()}`);
});
