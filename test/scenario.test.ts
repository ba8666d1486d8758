import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadScenario, shippedScenarios } from '../src/lab/lab.js';
import { ScenarioError } from '../src/lab/scenario.js';
import { parseScenario } from '../src/lab/worlds.js';

const shipped = readFileSync('scenarios/facebook-2010.json', 'utf8');
const mutate = (change: (doc: Record<string, unknown>) => void): string => {
  const doc = JSON.parse(shipped) as Record<string, unknown>;
  change(doc);
  return JSON.stringify(doc);
};

describe('scenario files', () => {
  test('every shipped scenario parses', async () => {
    const names = await shippedScenarios();
    assert.ok(names.includes('facebook-2010'));
    for (const name of names) assert.equal((await loadScenario(name)).name, name);
  });

  const bad: [string, (doc: Record<string, unknown>) => void, RegExp][] = [
    ['a missing field', (d) => delete d.origin, /scenario\.origin: must be an object/],
    ['a negative rate', (d) => ((d.clients as Record<string, unknown>[])[0]!.rate = -5), /clients\[0\]\.rate: must be ≥ 0/],
    ['an unknown fault kind', (d) => ((d.faults as Record<string, unknown>[])[0]!.kind = 'meteor'), /faults\[0\]\.kind: unknown fault kind "meteor"/],
    ['a fault that ends before it starts', (d) => ((d.faults as Record<string, unknown>[])[0]!.endS = 1), /faults\[0\]: endS \(1\) must be after startS/],
    ['an invalid value for a key nobody reads', (d) => ((d.faults as Record<string, unknown>[])[0]!.key = 'nope'), /faults\[0\]\.key: "nope" is not one of keys\.hot/],
    ['shares over 1', (d) => ((d.keys as { hot: { share: number }[] }).hot[0]!.share = 0.9), /keys\.hot: shares add up to/],
    ['no trigger', (d) => (d.faults = []), /faults: needs a trigger/],
    ['an unknown world', (d) => (d.world = 'mars'), /world: unknown world "mars"/],
    ['a bad priority', (d) => ((d.clients as Record<string, unknown>[])[0]!.priority = 'urgent'), /priority: must be one of/],
  ];
  for (const [what, change, message] of bad) {
    test(`${what} is a ScenarioError naming the field`, () => {
      assert.throws(() => parseScenario(mutate(change)), (e) => e instanceof ScenarioError && e.code === 'SCENARIO' && message.test(e.message));
    });
  }

  test('text that is not JSON is a ScenarioError', () => {
    assert.throws(() => parseScenario('{ nope', 'x.json'), (e) => e instanceof ScenarioError && /x\.json: not valid JSON/.test(e.message));
  });
});

describe('damper lab command', () => {
  const cli = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], { encoding: 'utf8', timeout: 120_000 });
  const noStack = (stderr: string): void => assert.doesNotMatch(stderr, /\n\s+at /);

  test('an unknown scenario: a clear message, exit 2', () => {
    const r = cli('lab', 'no-such-incident');
    assert.equal(r.status, 2);
    assert.match(r.stderr, /no-such-incident: unknown scenario \(shipped: [^)]*facebook-2010/);
    noStack(r.stderr);
  });

  test('a malformed scenario file: the field at fault, exit 2', () => {
    const dir = mkdtempSync(join(tmpdir(), 'damper-scenario-'));
    const file = join(dir, 'mine.json');
    writeFileSync(file, mutate((d) => ((d.origin as Record<string, unknown>).workers = 'four')));
    const r = cli('lab', file);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /origin\.workers: must be a number, got "four"/);
    noStack(r.stderr);
  });

  test('bad flags: exit 2 with the usage', () => {
    for (const args of [['lab', '--seed', '-1'], ['lab', '--bogus'], ['lab', '--seed', '1.5']]) {
      const r = cli(...args);
      assert.equal(r.status, 2, args.join(' '));
      assert.match(r.stderr, /usage: damper/);
      noStack(r.stderr);
    }
  });

  test('a user scenario file runs and writes report.html and results.json; --json prints the results', () => {
    const dir = mkdtempSync(join(tmpdir(), 'damper-lab-'));
    const file = join(dir, 'small.json');
    // A user's own system: the shipped one, shortened to keep the test quick.
    writeFileSync(
      file,
      mutate((d) => {
        d.name = 'small';
        d.durationS = 200;
        d.faults = [{ kind: 'invalid-value', key: 'sitevars', startS: 120, endS: 125, label: 'a short trigger' }];
      }),
    );
    const out = join(dir, 'out');
    const r = cli('lab', file, '--seed', '3', '--out', out, '--json');
    assert.equal(r.status, 0, r.stderr);
    assert.ok(existsSync(join(out, 'report.html')));
    const printed = JSON.parse(r.stdout) as { seed: number; scenarios: Record<string, { naive: unknown; damper: unknown }> };
    assert.equal(printed.seed, 3);
    assert.deepEqual(Object.keys(printed.scenarios), ['small']);
    assert.equal(readFileSync(join(out, 'results.json'), 'utf8'), r.stdout);
    for (const field of ['recovered', 'recoverySeconds', 'baselineOriginQps', 'peakOriginQps', 'amplification', 'errorRate', 'goodputRatio', 'p99Ms']) {
      assert.ok(field in (printed.scenarios.small!.naive as object), field);
      assert.ok(field in (printed.scenarios.small!.damper as object), field);
    }
  });
});
