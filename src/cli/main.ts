#!/usr/bin/env node
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DamperError } from '../index.js';
import { renderReport } from '../lab/report.js';
import { resultsJson, VARIANTS, type VariantName } from '../lab/results.js';
import { seriesCsv, seriesFile } from '../lab/series-csv.js';
import { WORKERS } from '../lab/parallel.js';
import { MAX_STEPS, runSweep, sweepJson, type TriggerAxisKind } from '../lab/sweep.js';
import { renderSweepReport } from '../lab/sweep-report.js';
import { loadScenario, runLab } from '../lab/lab.js';
import { isWorldName, SCENARIO_SCHEMAS, scenarioJsonSchema } from '../lab/schema/index.js';
import { stopwatch } from '../time/stopwatch.js';
import { formatSummary, formatSweepSummary, progressBar } from './terminal.js';

/**
 * The `damper` command. It only parses arguments and delegates; every
 * mechanism lives in the library or the lab. Bad usage prints a one-line
 * reason and the usage, and exits 2; an unusable scenario exits 2 with the
 * field at fault: never a stack trace.
 */

const USAGE = `usage: damper <command> [options]

commands:
  lab [SCENARIO…] [--seed N] [--out DIR] [--json] [--series]
        replay incidents (all shipped ones by default; a SCENARIO is a shipped
        name such as facebook-2010, or a path to a scenario file), naive vs
        damper, in virtual time; writes DIR/report.html and DIR/results.json
        (DIR defaults to lab-out); --json also prints results.json; --series
        also writes each run's per-second series to DIR/series/*.csv
  lab sweep SCENARIO --load A..B (--trigger C..D | --trigger-size C..D)
        [--steps N] [--seed N] [--out DIR] [--operators] [--serial] [--json]
        the vulnerable region: replays SCENARIO over a grid of offered load
        (A..B × its client rates) × trigger (--trigger: how long, in the unit
        of its world's trigger, e.g. seconds an invalid value is held;
        --trigger-size: how hard, e.g. a slowdown's factor), N values per
        axis (default 5, 2 to ${MAX_STEPS}), both variants per cell, one worker per
        core; writes DIR/sweep.html (a heatmap per variant) and DIR/sweep.json.
        Operator actions are removed unless --operators; --serial runs the
        cells one after another in one thread
  lab schema [WORLD]
        prints the JSON Schema (draft 2020-12) of a WORLD's scenario files
        (cache-aside, cache-cluster, retry-storm, web-farm), or of any
        scenario file, for an editor: damper lab schema > scenario.schema.json,
        then "$schema": "./scenario.schema.json" in the file

options:
  -h, --help      show this help
  -v, --version   show the version`;

class UsageError extends Error {}

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        seed: { type: 'string' },
        out: { type: 'string' },
        json: { type: 'boolean' },
        load: { type: 'string' },
        trigger: { type: 'string' },
        'trigger-size': { type: 'string' },
        steps: { type: 'string' },
        operators: { type: 'boolean' },
        serial: { type: 'boolean' },
        series: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (values.version === true) {
    const { readFile } = await import('node:fs/promises');
    const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    process.stdout.write(`${pkg.version}\n`);
    return 0;
  }
  const [command, ...rest] = positionals;
  const seed = parseSeed(values.seed);
  const isSweep = command === 'lab' && rest[0] === 'sweep';
  if (command === 'lab' && rest[0] === 'schema') {
    for (const flag of ['seed', 'out', 'json'] as const) {
      if (values[flag] !== undefined) throw new UsageError(`lab schema takes no --${flag}: it prints the JSON Schema`);
    }
    const [, world, ...extra] = rest;
    if (extra.length > 0) throw new UsageError(`lab schema takes at most one WORLD, got also: ${extra.join(' ')}`);
    if (world !== undefined && !isWorldName(world)) {
      // A wrong name, not wrong usage: one line, like an unknown scenario.
      process.stderr.write(`damper: lab schema: unknown world "${world}" (known: ${Object.keys(SCENARIO_SCHEMAS).join(', ')})\n`);
      return 2;
    }
    process.stdout.write(`${JSON.stringify(scenarioJsonSchema(world), null, 2)}\n`);
    return 0;
  }
  if (!isSweep) {
    for (const flag of ['load', 'trigger', 'trigger-size', 'steps', 'operators', 'serial'] as const) {
      if (values[flag] !== undefined) throw new UsageError(`--${flag} is an option of lab sweep only`);
    }
  }
  if (values.series !== undefined && (command !== 'lab' || isSweep)) throw new UsageError('--series is an option of lab only');
  switch (command) {
    case 'lab':
      if (isSweep) {
        const [, scenario, ...extra] = rest;
        if (scenario === undefined) throw new UsageError('lab sweep needs a SCENARIO (a shipped name such as facebook-2010, or a scenario file)');
        if (extra.length > 0) throw new UsageError(`lab sweep takes one SCENARIO, got also: ${extra.join(' ')}`);
        if (values.load === undefined) throw new UsageError('lab sweep needs --load A..B (offered load, × the scenario’s client rates, e.g. --load 0.5..1.5)');
        const size = values['trigger-size'];
        if (values.trigger !== undefined && size !== undefined) throw new UsageError('lab sweep takes --trigger or --trigger-size, not both');
        if (values.trigger === undefined && size === undefined) throw new UsageError('lab sweep needs --trigger C..D (how long the trigger lasts, in the unit of the scenario’s trigger, e.g. --trigger 5..60) or --trigger-size C..D (how hard it hits, e.g. --trigger-size 2..8)');
        return sweep(scenario, {
          load: parseRange('--load', values.load),
          ...(size === undefined ? { trigger: parseRange('--trigger', values.trigger!), triggerAxis: 'duration' } : { trigger: parseRange('--trigger-size', size), triggerAxis: 'size' }),
          steps: parseSteps(values.steps),
          seed,
          out: values.out ?? 'lab-out',
          operators: values.operators === true,
          serial: values.serial === true,
          json: values.json === true,
        });
      }
      return lab(rest, seed, values.out ?? 'lab-out', { json: values.json === true, series: values.series === true });
    case undefined:
      throw new UsageError('no command given');
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

async function lab(scenarios: string[], seed: number, out: string, { json, series }: { json: boolean; series: boolean }): Promise<number> {
  const elapsed = stopwatch();
  const bar = progressBar(process.stderr);
  // Wall time per variant run, for the speed column: when each one started and ended.
  const wall = new Map<string, { from: number; to: number }>();
  const run = await runLab(scenarios, {
    seed,
    onProgress: ({ scenario, variant, fraction }) => {
      const id = `${scenario}/${variant}`;
      const now = elapsed();
      const span = wall.get(id);
      if (span === undefined) wall.set(id, { from: now, to: now });
      else span.to = now;
      bar.update(fraction, `${scenario} · ${variant}`);
    },
  });
  bar.done();
  const dir = resolve(out);
  const results = resultsJson(run);
  try {
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'results.json'), results);
    await writeFile(join(dir, 'report.html'), renderReport(run));
    if (series) {
      await mkdir(join(dir, 'series'), { recursive: true });
      for (const s of run.scenarios) for (const v of VARIANTS) await writeFile(join(dir, seriesFile(s, v)), seriesCsv(s, v));
    }
  } catch (error) {
    throw new UsageError(`cannot write the report to ${dir}: ${(error as Error).message}`);
  }
  const speed = (scenario: string, variant: VariantName, requests: number): number => {
    const span = wall.get(`${scenario}/${variant}`);
    return span === undefined || span.to <= span.from ? 0 : requests / ((span.to - span.from) / 1000);
  };
  if (json) process.stdout.write(results);
  else process.stdout.write(`${formatSummary(run, speed)}\n\nwrote ${join(dir, 'report.html')} and ${join(dir, 'results.json')} in ${(elapsed() / 1000).toFixed(1)} s\n`);
  return 0;
}

interface SweepArgs {
  readonly load: readonly [number, number];
  readonly trigger: readonly [number, number];
  readonly triggerAxis: TriggerAxisKind;
  readonly steps: number;
  readonly seed: number;
  readonly out: string;
  readonly operators: boolean;
  readonly serial: boolean;
  readonly json: boolean;
}

async function sweep(ref: string, args: SweepArgs): Promise<number> {
  const scenario = await loadScenario(ref);
  const elapsed = stopwatch();
  const bar = progressBar(process.stderr);
  const cells = args.steps * args.steps;
  const workers = args.serial ? 1 : Math.min(WORKERS, cells);
  bar.update(0, `sweep: ${cells} cells on ${workers} ${workers === 1 ? 'thread' : 'threads'}`);
  const result = await runSweep(
    scenario,
    { load: args.load, trigger: args.trigger, triggerAxis: args.triggerAxis, steps: args.steps },
    {
      seed: args.seed,
      runner: args.serial ? 'serial' : 'threads',
      operators: args.operators,
      onCell: (cell, done, total) => bar.update(done / total, `sweep: ${done}/${total} cells done (last: load ${cell.load}×, trigger ${cell.trigger})`),
    },
  );
  bar.done();
  const wall = elapsed() / 1000;
  const dir = resolve(args.out);
  const json = sweepJson(result);
  try {
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'sweep.json'), json);
    await writeFile(join(dir, 'sweep.html'), renderSweepReport(result));
  } catch (error) {
    throw new UsageError(`cannot write the sweep to ${dir}: ${(error as Error).message}`);
  }
  if (args.json) process.stdout.write(json);
  else {
    const cost = `${cells} cells in ${wall.toFixed(1)} s on ${workers} ${workers === 1 ? 'thread' : 'threads'} (${((wall * workers) / cells).toFixed(1)} s per cell per thread)`;
    process.stdout.write(`${formatSweepSummary(result)}\n\n${cost}\nwrote ${join(dir, 'sweep.html')} and ${join(dir, 'sweep.json')}\n`);
  }
  return 0;
}

/** `A..B`: two positive decimal numbers, A below B. */
function parseRange(flag: string, raw: string): [number, number] {
  const m = /^(\d+(?:\.\d+)?|\.\d+)\.\.(\d+(?:\.\d+)?|\.\d+)$/.exec(raw.trim());
  if (m === null) throw new UsageError(`${flag} must be a range A..B of two positive numbers (e.g. 0.5..1.5), got "${raw}"`);
  const from = Number(m[1]);
  const to = Number(m[2]);
  if (!(from > 0)) throw new UsageError(`${flag}: ${m[1]} is not positive; both ends must be above 0`);
  if (!(to > from)) throw new UsageError(`${flag}: the range must go up, got "${raw}"`);
  return [from, to];
}

function parseSteps(raw: string | undefined): number {
  if (raw === undefined) return 5;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < 2 || n > MAX_STEPS) throw new UsageError(`--steps must be an integer from 2 to ${MAX_STEPS}, got "${raw}"`);
  return n;
}

function parseSeed(raw: string | undefined): number {
  if (raw === undefined) return 1;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n > 0xffff_ffff) throw new UsageError(`--seed must be an integer from 0 to 4294967295, got "${raw}"`);
  return n;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof UsageError) {
      process.stderr.write(`damper: ${error.message}\n\n${USAGE}\n`);
      process.exitCode = 2;
    } else if (error instanceof DamperError) {
      // A scenario file or an option the library refused: the message names what and where.
      process.stderr.write(`damper: ${error.message}\n`);
      process.exitCode = 2;
    } else {
      process.stderr.write(`damper: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    }
  },
);
