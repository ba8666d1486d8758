import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadScenario, shippedScenarios } from '../src/lab/lab.js';
import { ScenarioError } from '../src/lab/scenario.js';
import { parseScenario } from '../src/lab/world/worlds.js';
import { damperCli } from './support/cli.js';

const shipped = readFileSync('scenarios/facebook-2010.json', 'utf8');
const mutate = (change: (doc: Record<string, unknown>) => void): string => {
  const doc = JSON.parse(shipped) as Record<string, unknown>;
  change(doc);
  return JSON.stringify(doc);
};
const clients = (doc: Record<string, unknown>) => doc.clients as Record<string, unknown>[];
const faults = (doc: Record<string, unknown>) => doc.faults as Record<string, unknown>[];

describe('scenario files', () => {
  test('every shipped scenario parses', async () => {
    const names = await shippedScenarios();
    assert.ok(names.includes('facebook-2010'));
    for (const name of names) assert.equal((await loadScenario(name)).name, name);
  });

  const bad: [string, (doc: Record<string, unknown>) => void, RegExp][] = [
    ['a missing field', (d) => delete d.servers, /^scenario: servers: missing$/],
    ['a negative rate', (d) => (clients(d)[0]!.rate = -5), /^scenario: clients\[0\]\.rate: must be ≥ 0, got -5$/],
    ['a string for a number', (d) => ((d.database as Record<string, unknown>).workers = 'x'), /^scenario: database\.workers: must be a number, got "x"$/],
    ['a fraction for a whole number', (d) => ((d.database as Record<string, unknown>).workers = 2.5), /^scenario: database\.workers: must be an integer, got 2\.5$/],
    ['an object for a string', (d) => (d.title = { text: 'x' }), /^scenario: title: must be a non-empty string, got an object$/],
    ['a typo in a field name', (d) => (clients(d)[0]!.retires = 2), /^scenario: clients\[0\]\.retires: unknown field \(did you mean retries\?\)$/],
    ['a field no world has', (d) => ((d.database as Record<string, unknown>).color = 'red'), /^scenario: database\.color: unknown field \(known: capacityQps, workers, maxQueue\)$/],
    ['an unknown fault kind', (d) => (faults(d)[0]!.kind = 'meteor'), /^scenario: faults\[0\]\.kind: unknown fault kind "meteor" \(known: capacity-drop, slowdown, hang, [a-z-, ]+, cut-traffic, restart, cache-flush\)$/],
    ['a fault with no kind', (d) => delete faults(d)[0]!.kind, /^scenario: faults\[0\]\.kind: missing \(known: capacity-drop, slowdown, hang, [a-z-, ]+, cut-traffic, restart, cache-flush\)$/],
    ['a fault that ends before it starts', (d) => (faults(d)[0]!.endS = 1), /^scenario: faults\[0\]\.endS: must be after startS \(\d+\), got 1$/],
    ['a fault past the end of the run', (d) => (faults(d)[0]!.endS = 5000), /^scenario: faults\[0\]\.endS: must be ≤ durationS \(\d+\), got 5000$/],
    ['a ramp longer than the run', (d) => (faults(d)[1]!.rampS = 5000), /^scenario: faults\[1\]\.rampS: must be ≤ durationS \(\d+\), got 5000$/],
    ['an invalid value for a key nobody reads', (d) => (faults(d)[0]!.key = 'nope'), /^scenario: faults\[0\]\.key: must be sitevars, config:1, .*, key:0 … key:999, got "nope"$/],
    ['shares over 1', (d) => ((d.keys as { hot: { share: number }[] }).hot[0]!.share = 0.9), /^scenario: keys\.hot: shares add up to [\d.]+, more than 1$/],
    ['no tail', (d) => ((d.keys as Record<string, unknown>).count = 0), /^scenario: keys\.count: must be ≥ 1, got 0$/],
    ['a baseline that ends before it starts', (d) => (d.baseline = { fromS: 50, toS: 20 }), /^scenario: baseline\.toS: must be after fromS \(50\), got 20$/],
    ['no trigger', (d) => (d.faults = []), /^scenario: faults: needs a trigger$/],
    ['no clients', (d) => (d.clients = []), /^scenario: clients: needs at least one population$/],
    ['an unknown world', (d) => (d.world = 'mars'), /^scenario: world: unknown world "mars" \(known: service\)$/],
    ['a bad priority', (d) => (clients(d)[0]!.priority = 'urgent'), /^scenario: clients\[0\]\.priority: must be one of "critical", "normal", "low", "background", got "urgent"$/],
    ['a bad when', (d) => (faults(d)[1]!.when = 'sometimes'), /^scenario: faults\[1\]\.when: must be one of "always", "unhealthy", got "sometimes"$/],
    ['not an object', (d) => (d.objective = [1]), /^scenario: objective: must be an object, got an array$/],
  ];
  for (const [what, change, message] of bad) {
    test(`${what} is a ScenarioError naming the field`, () => {
      assert.throws(() => parseScenario(mutate(change)), (e) => e instanceof ScenarioError && e.code === 'SCENARIO' && message.test(e.message));
    });
  }

  test('every problem at once, one line each; the file and the field apart', () => {
    const text = mutate((d) => {
      clients(d)[0]!.rate = -5;
      d.zork = 1;
    });
    let error: unknown;
    try {
      parseScenario(text, 'my.scenarios/fb.json');
    } catch (e) {
      error = e;
    }
    assert.ok(error instanceof ScenarioError);
    assert.equal(error.file, 'my.scenarios/fb.json');
    assert.deepEqual(
      error.problems.map((p) => p.field),
      ['clients[0].rate', 'zork'],
    );
    const known = '$schema, name, title, description, source, scaling, durationS, baseline, objective, clients, faults, damper, check, world, tiers, balancer, servers, database, cache, keys, network';
    assert.equal(error.message, `my.scenarios/fb.json: clients[0].rate: must be ≥ 0, got -5\nmy.scenarios/fb.json: zork: unknown field (known: ${known})`);
  });

  test('a rule across fields waits for the fields it reads: one mistake, one problem', () => {
    // durationS is out of range: the faults are not also reported as past its end.
    assert.throws(() => parseScenario(mutate((d) => (d.durationS = 0))), (e) => e instanceof ScenarioError && e.message === 'scenario: durationS: must be ≥ 1, got 0');
  });

  test('a "$schema" field, for an editor, is accepted and dropped', () => {
    const s = parseScenario(mutate((d) => (d.$schema = './scenario.schema.json')));
    assert.ok(!('$schema' in s));
  });

  test('text that is not JSON is a ScenarioError', () => {
    assert.throws(() => parseScenario('{ nope', 'x.json'), (e) => e instanceof ScenarioError && /x\.json: not valid JSON/.test(e.message));
  });
});

describe('the parsed value is what the hand-written parser returned', () => {
  // test/fixtures/parsed-scenarios.json: the output of the parser before the
  // schemas (commit 26026a9), plus the fields added since (each population's
  // `backoff`, `network`), so simulations do not change; retry-storm's,
  // facebook-2010's, discord-2019's and missourian-2010's are the service world's parse since they moved there (issue 28).
  const fixture = JSON.parse(readFileSync('test/fixtures/parsed-scenarios.json', 'utf8')) as Record<string, unknown>;
  test('for every shipped scenario', async () => {
    const names = await shippedScenarios();
    assert.deepEqual(Object.keys(fixture).sort(), names.map((n) => `${n}.json`));
    for (const name of names) assert.deepStrictEqual(await loadScenario(name), fixture[`${name}.json`], name);
  });
});

describe("a client's backoff", () => {
  const population = (fields: Record<string, unknown>) => parseScenario(mutate((d) => Object.assign(clients(d)[0]!, fields))).clients[0]!;

  test('is none by default, and the old retryDelayMs is a fixed backoff', () => {
    assert.deepEqual([population({}).backoff, population({}).retryDelayMs], [{ kind: 'none' }, 0]);
    assert.deepEqual([population({ retryDelayMs: 250 }).backoff, population({ retryDelayMs: 250 }).retryDelayMs], [{ kind: 'fixed', delayMs: 250 }, 250]);
    const fixed = population({ backoff: { kind: 'fixed', delayMs: 40 } });
    assert.deepEqual([fixed.backoff, fixed.retryDelayMs], [{ kind: 'fixed', delayMs: 40 }, 40]);
    for (const kind of ['exponential', 'full-jitter'] as const) {
      const p = population({ retries: 3, backoff: { kind, baseMs: 10, maxMs: 1000 } });
      assert.deepEqual([p.backoff, p.retryDelayMs], [{ kind, baseMs: 10, maxMs: 1000 }, 0]);
    }
  });

  const badBackoff: [string, Record<string, unknown>, string][] = [
    ['both forms', { retryDelayMs: 5, backoff: { kind: 'none' } }, 'clients[0].retryDelayMs: give backoff or retryDelayMs, not both (retryDelayMs: 5 is backoff { "kind": "fixed", "delayMs": 5 })'],
    ['a cap below the base', { backoff: { kind: 'exponential', baseMs: 100, maxMs: 50 } }, 'clients[0].backoff.maxMs: must be ≥ baseMs (100), got 50'],
    ['a zero base', { backoff: { kind: 'full-jitter', baseMs: 0, maxMs: 50 } }, 'clients[0].backoff.baseMs: must be ≥ 1, got 0'],
    ['a cap over ten minutes', { backoff: { kind: 'exponential', baseMs: 1, maxMs: 600_001 } }, 'clients[0].backoff.maxMs: must be ≤ 600000, got 600001'],
    ['a fraction of a ms', { backoff: { kind: 'fixed', delayMs: 1.5 } }, 'clients[0].backoff.delayMs: must be an integer, got 1.5'],
    ['an unknown kind', { backoff: { kind: 'linear' } }, 'clients[0].backoff.kind: unknown backoff kind "linear" (known: none, fixed, exponential, full-jitter)'],
    ['a field of another kind', { backoff: { kind: 'fixed', delayMs: 1, maxMs: 5 } }, 'clients[0].backoff.maxMs: unknown field (known: kind, delayMs)'],
  ];
  for (const [what, fields, problem] of badBackoff) {
    test(`${what} is a ScenarioError naming the field`, () => {
      assert.throws(() => population(fields), (e) => e instanceof ScenarioError && e.message === `scenario: ${problem}`);
    });
  }
});

describe('the network', () => {
  const network = (value: unknown) => parseScenario(mutate((d) => (d.network = value))).network;

  test('adds no delay by default', () => {
    assert.deepEqual(parseScenario(shipped).network, { hopDelay: { kind: 'constant', ms: 0 } });
  });

  test('hop delays: constant, exponential, lognormal', () => {
    for (const hopDelay of [{ kind: 'constant', ms: 2 }, { kind: 'exponential', meanMs: 1.5 }, { kind: 'lognormal', medianMs: 1, sigma: 0.5 }]) assert.deepEqual(network({ hopDelay }), { hopDelay });
  });

  const badNetwork: [unknown, string][] = [
    [{ hopDelay: { kind: 'lognormal', medianMs: 1, sigma: 0 } }, 'network.hopDelay.sigma: must be > 0, got 0'],
    [{ hopDelay: { kind: 'lognormal', medianMs: 1, sigma: 6 } }, 'network.hopDelay.sigma: must be ≤ 5, got 6'],
    [{ hopDelay: { kind: 'constant', ms: -1 } }, 'network.hopDelay.ms: must be ≥ 0, got -1'],
    [{ hopDelay: { kind: 'pareto' } }, 'network.hopDelay.kind: unknown delay kind "pareto" (known: constant, exponential, lognormal)'],
    [{}, 'network.hopDelay: missing'],
    [{ hopdelay: { kind: 'constant', ms: 0 }, hopDelay: { kind: 'constant', ms: 0 } }, 'network.hopdelay: unknown field (did you mean hopDelay?)'],
  ];
  for (const [value, problem] of badNetwork) {
    test(problem, () => {
      assert.throws(() => network(value), (e) => e instanceof ScenarioError && e.message === `scenario: ${problem}`);
    });
  }
});

describe('damper lab command', () => {
  const cli = damperCli;
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
    writeFileSync(file, mutate((d) => ((d.database as Record<string, unknown>).workers = 'four')));
    const r = cli('lab', file);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /database\.workers: must be a number, got "four"/);
    noStack(r.stderr);
  });

  test('bad flags: exit 2, one line naming the flag, then the help to read', () => {
    for (const [args, message] of [
      [['lab', '--seed', '-1'], /^damper: --seed needs a value: --seed N; a value that starts with "-" is written --seed=-1\n/],
      [['lab', '--bogus'], /^damper: unknown option --bogus\n/],
      [['lab', '--seed', '1.5'], /^damper: --seed must be an integer from 0 to 4294967295, got "1\.5"\n/],
    ] as const) {
      const r = cli(...args);
      assert.equal(r.status, 2, args.join(' '));
      assert.match(r.stderr, message);
      assert.match(r.stderr, /\nsee `damper lab --help`\n$/);
      assert.doesNotMatch(r.stderr, /usage:/, 'not the whole help');
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
