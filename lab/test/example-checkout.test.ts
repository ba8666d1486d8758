import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

/**
 * docs/lab.md's worked example, "Is my configuration safe?", run as the
 * page says: the two `damper lab check` commands, their exit codes, and what
 * they print compared with the page's two output blocks line for line. If the
 * lab's answer about the checkout service changes, the page is wrong, and
 * this fails.
 */

/** The repository's root, where the page's commands are run (this file runs from lab/build/test). */
const root = fileURLToPath(new URL('../../../', import.meta.url));
const main = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));

/** The output blocks of the worked example's section, in order. */
function documentedOutputs(): string[] {
  const page = readFileSync(join(root, 'docs/lab.md'), 'utf8');
  const start = page.indexOf('## Is my configuration safe?');
  assert.ok(start >= 0, 'docs/lab.md has the worked example');
  const section = page.slice(start, page.indexOf('\n## ', start + 1));
  return [...section.matchAll(/```text\n([\s\S]*?)\n```/g)].map((m) => m[1]!);
}

/** Runs the command from the repository's root, as the page does; stdout with paths relative to it, the timing and `wrote` lines left out. */
function check(config: string, out: string): Promise<{ status: number | null; printed: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [main, 'lab', 'check', 'lab/examples/checkout.json', '--damper-config', config, '--out', out], { cwd: root, stdio: ['ignore', 'pipe', 'ignore'] });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.on('close', (status) => {
      const lines = stdout
        .replaceAll(root, '')
        .split('\n')
        .map((line) => line.trimEnd())
        .filter((line) => !/^\d+ cells in /.test(line) && !line.startsWith('wrote '));
      resolve({ status, printed: lines.join('\n').trim() });
    });
  });
}

describe('docs/lab.md, "Is my configuration safe?" (issue 12, part 5)', () => {
  test('the shipped configuration is not safe with a smaller database; without its breaker it is', async () => {
    const [unsafe, safe] = documentedOutputs();
    assert.ok(unsafe !== undefined && safe !== undefined, 'two output blocks');
    const dir = mkdtempSync(join(tmpdir(), 'damper-example-'));
    // Both at once: each runs its grid in worker threads, and they share the cores.
    const [first, fixed] = await Promise.all([
      check('lab/examples/checkout.config.mjs', join(dir, 'first')),
      check('lab/examples/checkout-no-breaker.config.mjs', join(dir, 'fixed')),
    ]);
    assert.equal(first.status, 1, first.printed);
    assert.equal(first.printed, unsafe.split('\n').map((l) => l.trimEnd()).join('\n'));
    assert.equal(fixed.status, 0, fixed.printed);
    assert.equal(fixed.printed, safe.split('\n').map((l) => l.trimEnd()).join('\n'));
  });
});
