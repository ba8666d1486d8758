import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { checkCommand } from '../src/cli/check-command.js';
import { mergeCommand } from '../src/cli/merge-command.js';
import { findCommand } from '../src/cli/command.js';
import { labCommand } from '../src/cli/lab-command.js';
import { schemaCommand } from '../src/cli/schema-command.js';
import { sweepCommand, timeLeft } from '../src/cli/sweep-command.js';
import { validateCommand } from '../src/cli/validate-command.js';
import { formatSweepSummary } from '../src/cli/terminal.js';
import { fileProblem } from '../src/lab/file-problem.js';
import { shippedScenarios } from '../src/lab/lab.js';
import { type SweepCell, type SweepResult } from '../src/lab/sweep/sweep.js';
import { damperCli, damperHere } from './support/cli.js';

/**
 * The `damper` command line as a user meets it, through the compiled
 * command (build/src/cli/main.js): usage errors, each command's help, the
 * output folder and scenario files refused before any run, and how the
 * terminal writes a sweep's axes. What the commands compute is tested with
 * the lab (sweep.test.ts, check.test.ts, scenario.test.ts).
 */

const damper = damperCli;
const COMMANDS = [labCommand, sweepCommand, checkCommand, mergeCommand, validateCommand, schemaCommand];
const dir = mkdtempSync(join(tmpdir(), 'damper-cli-'));

/** A usage error: the reason and the help to read, two lines on standard error and nothing else, exit 2 (read in this process: the bin's own exit code and streams are checked below). */
async function assertUsage(args: readonly string[], reason: string | RegExp, help: string): Promise<void> {
  const r = await damperHere(...args);
  const what = `damper ${args.join(' ')}`;
  assert.equal(r.status, 2, `${what}: ${r.stderr}`);
  assert.equal(r.stdout, '', what);
  const lines = r.stderr.split('\n');
  assert.equal(lines.length, 3, `${what}: one line and the help to read, got:\n${r.stderr}`);
  if (typeof reason === 'string') assert.equal(lines[0], `damper: ${reason}`, what);
  else assert.match(lines[0]!, reason, what);
  assert.equal(lines[1], `see \`${help} --help\``, what);
}

describe('a usage error is one line and which help to read, exit 2: not the whole help under it', () => {
  test('the command, its operands and its options, each pointing to the help of the command at fault', async () => {
    for (const [args, reason, help] of [
      [[], 'no command given', 'damper'],
      [['lba'], 'unknown command "lba" (did you mean lab?)', 'damper'],
      [['help', 'frob'], 'unknown command "frob"', 'damper'],
      [['help', 'lab', 'facebook-2010'], 'unknown command "lab facebook-2010"', 'damper'],
      [['lab', 'facebook-2010', '--steps', '3'], 'lab takes no --steps: it is an option of lab sweep', 'damper lab'],
      [['lab', 'sweep', 'facebook-2010', '--trigger', '5..60'], /^damper: lab sweep needs two axes, got 1: /, 'damper lab sweep'],
      [['lab', 'sweep', 'facebook-2010', '--load', '1..2', '--trigger', '5..60', '--series'], 'lab sweep takes no --series: it is an option of lab', 'damper lab sweep'],
      [['lab', 'check'], /^damper: lab check needs a SCENARIO/, 'damper lab check'],
      [['lab', 'check', 'retry-storm', '--json'], 'lab check takes no --json: it is an option of lab, lab sweep, lab real and lab stacks', 'damper lab check'],
      [['lab', 'schema', '--seed', '2'], 'lab schema takes no --seed: it is an option of lab, lab sweep, lab check, lab real and lab stacks', 'damper lab schema'],
      [['lab', 'schema', 'retry-storm', 'web-farm'], 'lab schema takes at most one WORLD, got also: web-farm', 'damper lab schema'],
      [['help', 'lab', '--seed', '2'], 'help takes no --seed: it is an option of lab, lab sweep, lab check, lab real and lab stacks', 'damper'],
    ] as const) {
      await assertUsage(args, reason, help);
    }
  });

  test("node's parser's messages come in our words, naming the option and how to write it", async () => {
    for (const [args, reason, help] of [
      [['lab', '--bogus'], 'unknown option --bogus', 'damper lab'],
      [['lab', '-x'], 'unknown option -x', 'damper lab'],
      [['lab', 'sweep', 'retry-storm', '--lod', '1..2'], 'unknown option --lod (did you mean --load?)', 'damper lab sweep'],
      [['--bogus', 'lab', 'check', 'retry-storm'], 'unknown option --bogus', 'damper lab check'],
      [['lab', '--seed'], '--seed needs a value: --seed N', 'damper lab'],
      [['lab', '--seed', '--json'], '--seed needs a value: --seed N', 'damper lab'],
      [['lab', '--seed', '-1'], '--seed needs a value: --seed N; a value that starts with "-" is written --seed=-1', 'damper lab'],
      [['lab', 'sweep', 'retry-storm', '--load', '-1..2'], '--load needs a value: --load A..B; a value that starts with "-" is written --load=-1..2', 'damper lab sweep'],
      [['lab', '--json=yes'], '--json takes no value, got --json=yes', 'damper lab'],
    ] as const) {
      await assertUsage(args, reason, help);
    }
  });

  test('a value written with = reaches our own check of it', async () => {
    await assertUsage(['lab', '--seed=-1'], '--seed must be an integer from 0 to 4294967295, got "-1"', 'damper lab');
    await assertUsage(['lab', 'sweep', 'retry-storm', '--load=-1..2', '--trigger', '5..60'], '--load: -1 is not positive; both ends must be above 0', 'damper lab sweep');
  });

  test('the damper process itself: the same two lines on its standard error, exit 2', () => {
    const r = damper('lab', 'sweep', 'retry-storm', '--lod', '1..2');
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, 'damper: unknown option --lod (did you mean --load?)\nsee `damper lab sweep --help`\n');
  });
});

describe('every command has its own help: usage, options, the shipped scenarios, two examples', () => {
  const shipped = shippedScenarios();

  test('damper --help and damper help: every command, one line each; exit 0', () => {
    const r = damper('--help');
    assert.equal(r.status, 0, r.stderr);
    assert.equal(damper('help').stdout, r.stdout);
    assert.equal(damper('-h').stdout, r.stdout);
    assert.match(r.stdout, /^usage: damper COMMAND \[options\]$/m);
    for (const c of COMMANDS) assert.match(r.stdout, new RegExp(`^  ${c.name} +${c.summary.replace(/[?()]/g, '\\$&')}$`, 'm'), c.name);
    assert.match(r.stdout, /^ {2}help \[COMMAND\] /m);
  });

  for (const command of COMMANDS) {
    test(`damper ${command.name} --help = damper help ${command.name}`, async () => {
      const r = await damperHere(...command.name.split(' '), '--help');
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stderr, '');
      assert.equal((await damperHere('help', ...command.name.split(' '))).stdout, r.stdout);
      const help = r.stdout;
      assert.ok(help.startsWith(`damper ${command.name}: `), help);
      assert.ok(help.includes(`\nusage: damper ${command.usage}\n`));
      // Exactly the options it accepts: the help and the check read the same list.
      const listed = [...help.matchAll(/^ {2}(--[a-z-]+)/gm)].map((m) => m[1]);
      assert.deepEqual(listed, command.options.map(([o]) => `--${o}`));
      assert.match(help, /^ {2}-h, --help +shows this help$/m);
      const scenarios = help.slice(help.indexOf('\nshipped scenarios:\n'), help.indexOf('\nexamples:\n'));
      assert.deepEqual([...scenarios.matchAll(/^ {2}(\S+)/gm)].map((m) => m[1]), await shipped, 'the scenarios folder’s files, as damper lab finds them');
      const examples = help.slice(help.indexOf('\nexamples:\n'));
      assert.equal([...examples.matchAll(/^ {2}damper /gm)].length, 2, 'two examples');
    });
  }

  test('damper lab --help lists the commands below it', async () => {
    const help = (await damperHere('lab', '--help')).stdout;
    const commands = help.slice(help.indexOf('\ncommands'), help.indexOf('\nshipped scenarios:'));
    assert.deepEqual([...commands.matchAll(/^ {2}(lab \w+)/gm)].map((m) => m[1]), ['lab sweep', 'lab check', 'lab merge', 'lab real', 'lab stacks', 'lab validate', 'lab schema']);
  });

  test("each example is its command's and uses only its options", () => {
    for (const command of COMMANDS) {
      for (const [line] of command.examples) {
        const words = line.split(' ').slice(1);
        const operands = words.filter((w) => !w.startsWith('-'));
        assert.equal(findCommand(COMMANDS, operands)?.command, command, line);
        for (const w of words.filter((x) => x.startsWith('--'))) assert.ok(command.options.some(([o]) => `--${o}` === w), `${line}: ${w}`);
      }
    }
  });

  test('-v prints the version of package.json', () => {
    const r = damper('-v');
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, `${(JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version}\n`);
  });
});

describe('--out is proven writable before any run: a long sweep must not lose its work to a bad path', () => {
  const blocker = join(dir, 'a-file');
  writeFileSync(blocker, '');
  const commands = [['lab', 'retry-storm'], ['lab', 'sweep', 'retry-storm', '--load', '0.5..1', '--trigger', '5..10'], ['lab', 'check', 'retry-storm']];

  for (const args of commands) {
    test(`damper ${args.slice(0, 2).join(' ')}: refused at once, saying why`, () => {
      for (const [out, why] of [
        [join(blocker, 'out'), 'a part of the path is a file, not a folder'],
        [blocker, 'it is a file, not a folder'],
        // Node's own recursive mkdir loops for ever here (issue 29): refused like any other path.
        ...(existsSync('/proc/self') ? ([['/proc/damper-out/x', 'no such file or folder']] as const) : []),
      ] as const) {
        const started = Date.now();
        const r = damper(...args, '--out', out);
        assert.equal(r.status, 2, r.stderr);
        assert.equal(r.stderr, `damper: cannot write to ${out} (--out): ${why}\n`, 'one line, nothing run: no progress');
        assert.ok(Date.now() - started < 10_000, 'before the run');
      }
    });
  }
});

describe('know before you wait: a run past --max-calls is refused before it starts (issue 29, part 3)', () => {
  test('a typo in a range (--load 1..10000 for 1..1.5) is refused at once, saying what it would have cost', () => {
    const started = Date.now();
    const r = damper('lab', 'sweep', 'retry-storm', '--load', '1..10000', '--trigger', '30..45', '--out', join(dir, 'typo'));
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /^damper: this grid would simulate [\d.]+ billion calls \(25 cells × 2 variants; the largest, the cell at 10,000×, 45: [\d.]+ billion\), past the limit of 1\.00 billion: narrow it, or raise the limit with --max-calls N\n$/);
    assert.ok(Date.now() - started < 10_000, 'before any cell ran');
  });

  test('the progress line says the time left, from the cells done so far', () => {
    assert.equal(timeLeft(10_000, 2, 4), ', about 10 s left');
    assert.equal(timeLeft(60_000, 1, 3), ', about 2 min 0 s left');
    assert.equal(timeLeft(60_000, 0, 3), '', 'nothing done: no guess');
    assert.equal(timeLeft(60_000, 3, 3), '', 'all done');
  });

  test('a grid whose estimate passes --max-minutes is refused after a calibration of seconds, before any cell runs', () => {
    const started = Date.now();
    const r = damper('lab', 'check', 'retry-storm', '--max-minutes', '0.001', '--out', join(dir, 'estimate'));
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /damper: this grid would take about (?:\d+ s|\d+ min \d+ s|\d+ h \d+ min) here \([\d,.]+(?: million| billion)? calls on \d threads?, at the cost of a call of its largest cell timed just now\), past the limit of 0\.001 min: narrow it, spread it over machines with --shard, or raise the limit with --max-minutes M\n$/);
    assert.ok(!existsSync(join(dir, 'estimate', 'sweep.json')), 'no cell ran');
    assert.ok(Date.now() - started < 60_000, 'in seconds');
    const bad = damper('lab', 'sweep', 'retry-storm', '--load', '1..2', '--trigger', '30..45', '--max-minutes', 'soon');
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /^damper: --max-minutes must be a positive number of minutes \(e\.g\. 90\), got "soon"$/m);
  });

  test('lab and lab check too; --max-calls raises the limit, and is checked', () => {
    const run = damper('lab', 'retry-storm', '--max-calls', '1000', '--out', join(dir, 'small-limit'));
    assert.equal(run.status, 2, run.stderr);
    assert.match(run.stderr, /^damper: this run would simulate 312,000 calls \(1 scenario × 2 variants; the largest, retry-storm: 312,000\), past the limit of 1,000: /);
    const check = damper('lab', 'check', 'retry-storm', '--max-calls', '1000', '--out', join(dir, 'small-limit'));
    assert.equal(check.status, 2, check.stderr);
    assert.match(check.stderr, /^damper: this grid would simulate [\d.]+ million calls \(4 cells × 2 variants; the largest, the cell at 1\.5×, 45: [\d,]+\), past the limit of 1,000: /, 'naive beside damper');
    const configured = damper('lab', 'check', 'retry-storm', '--damper-config', 'test/fixtures/careless.config.mjs', '--max-calls', '1000', '--out', join(dir, 'small-limit'));
    assert.match(configured.stderr, /\(4 cells × 3 variants; /, 'and the lab’s own settings beside a configuration');
    const shard = damper('lab', 'check', 'retry-storm', '--shard', '2/4', '--max-calls', '1000', '--out', join(dir, 'small-limit'));
    assert.match(shard.stderr, /\(1 cell × 2 variants; /, 'a shard counts its own cells');
    const bad = damper('lab', 'retry-storm', '--max-calls', 'lots');
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /^damper: --max-calls must be a whole number of calls, at least 1 \(e\.g\. 500000000 or 5e8\), got "lots"$/m);
  });
});

describe('a scenario file that cannot be read says why', () => {
  test('missing, a folder, below a file', () => {
    const folder = join(dir, 'scenarios');
    mkdirSync(folder);
    for (const [file, why] of [
      [join(dir, 'missing.json'), 'no such file or folder'],
      [folder, 'it is a folder, not a file'],
      [join(dir, 'a-file', 'x.json'), 'a part of the path is a file, not a folder'],
    ] as const) {
      writeFileSync(join(dir, 'a-file'), '');
      const r = damper('lab', file);
      assert.equal(r.status, 2);
      assert.equal(r.stderr, `damper: ${file}: cannot read this file: ${why}\n`);
    }
  });

  test('the reason comes from the error’s code: not allowed, a folder, missing', () => {
    // Permission bits say nothing to root, who runs CI here: the code itself.
    const coded = (code: string): Error => Object.assign(new Error(`${code}: raw text, open 'x'`), { code });
    assert.equal(fileProblem(coded('EACCES')), 'permission denied');
    assert.equal(fileProblem(coded('EPERM')), 'operation not permitted');
    assert.equal(fileProblem(coded('EISDIR')), 'it is a folder, not a file');
    assert.equal(fileProblem(coded('ENOENT')), 'no such file or folder');
    assert.equal(fileProblem(coded('EWHATEVER')), "EWHATEVER: raw text, open 'x'", 'an unknown code: the message');
  });
});

describe('load factors rounded wherever a sweep shows them', () => {
  /** 4 loads from 0.5× to 1.5× (0.833333 and 1.16667 between), 2 trigger lengths; the scenario's own load 1× between two columns. */
  const result: SweepResult = {
    scenario: 'fixture',
    title: 'a fixture',
    seed: 1,
    operators: false,
    quickS: 60,
    baseRate: 200,
    variants: ['naive', 'damper'],
    across: { kind: 'load', label: 'offered load (× the scenario’s client rates)', values: [0.5, 0.833333, 1.16667, 1.5], scenarioValue: 1 },
    up: { kind: 'trigger', label: 'trigger held (s)', values: [10, 30], scenarioValue: 30 },
    cells: [10, 30].flatMap((up) =>
      [0.5, 0.833333, 1.16667, 1.5].map((across): SweepCell => ({ across, up, watchedS: 600, horizonS: 600, variants: { naive: { recovered: true, recoverySeconds: 1, amplification: 1, goodputRatio: 1, simulatedS: 160 }, damper: { recovered: true, recoverySeconds: 0, amplification: 1, goodputRatio: 1, simulatedS: 160 } } })),
    ),
  };

  test('the terminal summary: 0.83×, not 0.8333×; the axes named with their units; the bracketed cell said to be the nearest', () => {
    const text = formatSweepSummary(result);
    assert.match(text, /^ +0\.5× +0\.83× +1\.17× +1\.5× *$/m);
    assert.doesNotMatch(text, /0\.833|1\.166|1\.167/);
    assert.match(text, /; across: load, 0\.5×\.\.1\.5×; up: trigger held \(s\), 10\.\.30$/m);
    assert.match(text, /\[ \] the cell nearest the scenario's own setting \(load = 1×, trigger held \(s\) = 30\)/);
  });

  test('a real sweep: the progress line, the summary and the page', () => {
    const file = join(dir, 'short-storm.json');
    const storm = JSON.parse(readFileSync('scenarios/retry-storm.json', 'utf8')) as Record<string, unknown>;
    writeFileSync(file, JSON.stringify({ ...storm, name: 'short-storm', durationS: 240 }));
    const out = join(dir, 'sweep-out');
    // 4 loads from 0.5× to 1× (two of them 0.666667 and 0.833333), workers 3 and 4 (a whole-number field: 3, 3.33, 3.67, 4 rounded).
    const r = damper('lab', 'sweep', file, '--load', '0.5..1', '--axis', 'servers.workers=3..4', '--steps', '4', '--out', out);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /sweep: \d+\/8 cells done \(last: (0\.5|0\.67|0\.83|1)×, [34]\)/);
    assert.doesNotMatch(r.stderr + r.stdout, /0\.666|0\.667|0\.833/);
    assert.match(r.stdout, /^ +0\.5× +0\.67× +0\.83× +1× *$/m);
    const page = readFileSync(join(out, 'sweep.html'), 'utf8');
    assert.match(page, /<text class="tick x"[^>]*>0\.67×<\/text>/);
    const shown = page.slice(0, page.indexOf('<script type="application/json"')).replace(/<[^>]*>/g, ' ');
    assert.doesNotMatch(shown, /0\.666|0\.667|0\.833/, 'every text and tooltip; the data island and attributes keep the values');
  });
});

describe('damper lab validate: a scenario checked as a run would check it, without running it', () => {
  const storm = JSON.parse(readFileSync('scenarios/retry-storm.json', 'utf8')) as Record<string, unknown>;

  test('valid files: one line each, what they hold; exit 0', () => {
    const r = damper('lab', 'validate', 'retry-storm', 'examples/checkout.json', '--damper-config', 'examples/checkout.config.mjs');
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /^retry-storm: valid \(world service, \d+ s, 1 population, \d+ faults?, damper config .*checkout\.config\.mjs\)$/m);
    assert.match(r.stdout, /^examples\/checkout\.json: valid \(world service, 600 s, 2 populations, 1 fault, damper config .*checkout\.config\.mjs\)$/m);
  });

  test('every file is checked: the bad ones name the field at fault; exit 2, no stack', () => {
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ ...storm, durationS: 'long' }));
    const outside = join(dir, 'outside.json');
    writeFileSync(outside, JSON.stringify({ ...storm, check: { axes: [{ axis: 'load', from: 0.5, to: 1.2, margin: 0.5 }, { axis: 'trigger', from: 10, to: 60 }] } }));
    const badConfig = join(dir, 'bad.config.mjs');
    writeFileSync(badConfig, 'export default () => ({ client: () => ({}) });\n');
    const r = damper('lab', 'validate', bad, 'retry-storm', outside);
    assert.equal(r.status, 2, r.stdout + r.stderr);
    assert.match(r.stdout, new RegExp(`^${bad}: invalid\\n {2}.*durationS`, 'm'));
    assert.match(r.stdout, /^retry-storm: valid/m, 'the good one between them is still checked');
    assert.match(r.stdout, /check\.axes\[0\]: the grid 0\.5×\.\.1\.2× must hold/);
    assert.doesNotMatch(r.stdout + r.stderr, /\n\s+at /);
    const config = damper('lab', 'validate', 'retry-storm', '--damper-config', badConfig);
    assert.equal(config.status, 2, config.stdout + config.stderr);
    assert.match(config.stdout, /role "client" is gone/);
  });

  test('no scenario is a usage error', () => {
    assertUsage(['lab', 'validate'], 'lab validate needs a SCENARIO (a shipped name such as facebook-2010, or a scenario file)', 'damper lab validate');
  });
});
