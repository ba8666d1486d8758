// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Principle 8: time, timers and randomness come only through the Clock, so
// the lab can replay the real code in virtual time. Only src/time/ may touch
// the real ones.
const realTime = {
  globals: ['setTimeout', 'setInterval', 'setImmediate', 'clearTimeout', 'clearInterval', 'queueMicrotask'].map((name) => ({
    name,
    message: 'Schedule through the Clock (src/time/): principle 8.',
  })),
  properties: [
    { object: 'Date', property: 'now', message: 'Read time through the Clock (src/time/): principle 8.' },
    { object: 'performance', property: 'now', message: 'Read time through the Clock (src/time/): principle 8.' },
    { object: 'Math', property: 'random', message: 'Draw randomness from the Clock (src/time/): principle 8.' },
  ],
};

// The lab pages' scripts (the chart kit, the report's, the fidelity page's) run in a browser, not in the library: the Clock
// rules are not its own (a resize waits for requestAnimationFrame), but it has
// no Node either, which the type-checker cannot tell (@types/node is global).
const PAGE_SCRIPTS = ['lab/src/lab/report/chart-kit.ts', 'lab/src/lab/report/report-page.ts', 'lab/src/lab/report/fidelity-charts.ts'];
const browser = ['document', 'window', 'getComputedStyle', 'devicePixelRatio', 'requestAnimationFrame', 'addEventListener', 'uPlot'];
const NO_DATE = { selector: "NewExpression[callee.name='Date']", message: 'Read time through the Clock (src/time/): principle 8.' };
const node = ['process', 'require', 'module', 'exports', 'Buffer', '__dirname', '__filename', 'global'];

export default tseslint.config(
  { ignores: ['dist/**', 'build/**', 'node_modules/**', 'lab-out/**', 'test-output/**', 'lab/dist/**', 'lab/build/**', 'lab/lab-out/**', 'lab/test-output/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly' } },
    rules: {
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      eqeqeq: 'error',
    },
  },
  {
    // The lab too: it runs the library in virtual time. Its real readings are the command's wall-time stopwatch
    // and the real runner's processes (lab/src/lab/real/), which run on the real clock by nature: their one
    // clock is real/wall-clock.ts, bound at load so a simulation beside them cannot take it away.
    files: ['src/**/*.ts', 'lab/src/**/*.ts'],
    ignores: ['src/time/**', 'lab/src/cli/stopwatch.ts', 'lab/src/lab/real/**', ...PAGE_SCRIPTS],
    rules: {
      'no-restricted-globals': ['error', ...realTime.globals],
      'no-restricted-properties': ['error', ...realTime.properties],
      'no-restricted-syntax': ['error', NO_DATE],
      'no-restricted-imports': ['error', { paths: [{ name: 'node:timers', message: 'Schedule through the Clock.' }, { name: 'node:timers/promises', message: 'Schedule through the Clock.' }, { name: 'node:perf_hooks', message: 'Read time through the Clock.' }] }],
    },
  },
  {
    // An optional peer is loaded through src/peer.ts only. A value import (even
    // `import { type X }`, which verbatimModuleSyntax keeps as a load) makes its
    // entry fail without the peer, with a resolver's message instead of one line
    // saying what to install (issue 27, item 6).
    files: ['src/**/*.ts'],
    ignores: ['src/time/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        NO_DATE,
        { selector: "ImportDeclaration[importKind!='type'][source.value=/^(ioredis|undici|@opentelemetry\\/api|fastify|pg|better-sqlite3)$/]", message: 'Import an optional peer’s types only (`import type`), and load it through requirePeer (src/peer.ts).' },
      ],
    },
  },
  {
    files: PAGE_SCRIPTS,
    languageOptions: { sourceType: 'script', globals: Object.fromEntries(browser.map((name) => [name, 'readonly'])) },
    rules: {
      // A script has no `import type`: its types come through import('…') types.
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports', disallowTypeAnnotations: false }],
      'no-restricted-globals': ['error', ...node.map((name) => ({ name, message: 'The page script runs in a browser: there is no Node here.' }))],
      'no-restricted-syntax': ['error', { selector: 'ImportDeclaration, ExportNamedDeclaration, ExportDefaultDeclaration, ExportAllDeclaration', message: 'The page script is a plain script, inlined in a <script>: no import or export.' }],
    },
  },
);
