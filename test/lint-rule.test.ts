import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ESLint } from 'eslint';

// Principle 8 is enforced by lint: outside src/time/, reading real time,
// arming real timers or drawing Math.random is an error.
const forbidden = [
  'export const t = Date.now();',
  'export const t = performance.now();',
  'export const r = Math.random();',
  'setTimeout(() => {}, 1);',
  'setInterval(() => {}, 1);',
  'export const d = new Date();',
  "import { setTimeout as s } from 'node:timers/promises'; await s(1);",
];

test('lint rejects real time and randomness in library code outside src/time/', async () => {
  const eslint = new ESLint();
  for (const code of forbidden) {
    const [result] = await eslint.lintText(code, { filePath: 'src/cache/example.ts' });
    assert.ok(result && result.errorCount > 0, `not flagged in src/cache: ${code}`);
    assert.ok(result.messages.some((m) => /Clock/.test(m.message)), `no Clock message for: ${code}`);
  }
});

test('src/time/ may use the real clock', async () => {
  const eslint = new ESLint();
  const [result] = await eslint.lintText('export const t = Date.now() + Math.random();\n', { filePath: 'src/time/example.ts' });
  assert.equal(result?.errorCount, 0);
});
