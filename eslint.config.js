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

export default tseslint.config(
  { ignores: ['dist/**', 'build/**', 'node_modules/**', 'lab-out/**', 'test-output/**'] },
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
    files: ['src/**/*.ts'],
    ignores: ['src/time/**'],
    rules: {
      'no-restricted-globals': ['error', ...realTime.globals],
      'no-restricted-properties': ['error', ...realTime.properties],
      'no-restricted-syntax': ['error', { selector: "NewExpression[callee.name='Date']", message: 'Read time through the Clock (src/time/): principle 8.' }],
      'no-restricted-imports': ['error', { paths: [{ name: 'node:timers', message: 'Schedule through the Clock.' }, { name: 'node:timers/promises', message: 'Schedule through the Clock.' }, { name: 'node:perf_hooks', message: 'Read time through the Clock.' }] }],
    },
  },
);
