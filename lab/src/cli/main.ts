#!/usr/bin/env node
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { DamperError } from 'damper';
import { renderReport } from '../lab/report.js';
import { resultsJson, VARIANTS, type VariantName } from '../lab/results.js';
import { seriesCsv, seriesFile } from '../lab/series-csv.js';
import { MAX_STEPS } from '../lab/sweep.js';
import { runLab } from '../lab/lab.js';
import { isWorldName, SCENARIO_SCHEMAS, scenarioJsonSchema } from '../lab/schema/index.js';
import { stopwatch } from './stopwatch.js';
import { parseSeed, parseSteps, sweepAxes, UsageError } from './args.js';
import { check } from './check-command.js';
import { writableDir, writeFiles } from './out-dir.js';
import { sweep } from './sweep-command.js';
import { formatSummary, progressBar } from './terminal.js';

/**
 * The `damper` command. It only parses arguments and delegates; every
 * mechanism lives in the library or the lab. Bad usage prints a one-line
 * reason and the usage, and exits 2; an unusable scenario exits 2 with the
 * field at fault: never a stack trace.
 */

const USAGE = `usage: damper <command> [options]

commands:
  lab [SCENARIO…] [--seed N] [--out DIR] [--json] [--series] [--damper-config FILE]
        replay incidents (all shipped ones by default; a SCENARIO is a shipped
        name such as facebook-2010, or a path to a scenario file), naive vs
        damper, in virtual time; writes DIR/report.html and DIR/results.json
        (DIR defaults to lab-out); --json also prints results.json; --series
        also writes each run's per-second series to DIR/series/*.csv;
        --damper-config: the damper variant's configuration module, over the
        scenarios' own damper.config
  lab sweep SCENARIO AXIS AXIS [--steps N] [--seed N] [--out DIR]
        [--operators] [--serial] [--json] [--damper-config FILE]
        the vulnerable region: replays SCENARIO over a grid of two axes, each
        one of --load A..B (offered load, × its client rates), --trigger C..D
        (how long its world's trigger lasts, e.g. seconds an invalid value is
        held), --trigger-size C..D (how hard it hits, e.g. a slowdown's
        factor) or --axis PATH=A..B (any numeric field of the scenario file,
        e.g. --axis server.workers=2..8, checked again by its schema; a
        whole-number field takes rounded values); load, fields, trigger go
        across before up. N values per axis (default 5, 2 to ${MAX_STEPS}), both
        variants per cell, one worker per core; writes DIR/sweep.html (a
        heatmap per variant) and DIR/sweep.json. Operator actions are removed
        unless --operators; --serial runs the cells one after another in one
        thread
  lab check SCENARIO [--damper-config FILE] [--out DIR] [--seed N] [--serial]
        is the scenario's point, and the margin its "check" section asks for,
        outside the damper variant's vulnerable region? Sweeps its check grid
        (by default load and trigger length ×0.5 to ×2.5 of its own, 5 steps),
        damper variant only; prints the distance to the nearest stuck cell
        along each axis; writes DIR/sweep.html and DIR/sweep.json. Exit 0:
        safe; 1: a stuck cell within the margin; 2: bad input
  lab schema [WORLD]
        prints the JSON Schema (draft 2020-12) of a WORLD's scenario files
        (cache-aside, cache-cluster, retry-storm, web-farm), or of any
        scenario file, for an editor: damper lab schema > scenario.schema.json,
        then "$schema": "./scenario.schema.json" in the file

options:
  -h, --help      show this help
  -v, --version   show the version`;

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
        axis: { type: 'string', multiple: true },
        'damper-config': { type: 'string' },
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
  const sub = command === 'lab' && (rest[0] === 'sweep' || rest[0] === 'check' || rest[0] === 'schema') ? rest[0] : undefined;
  if (sub === 'schema') {
    for (const flag of ['seed', 'out', 'json', 'damper-config'] as const) {
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
  if (sub !== 'sweep') {
    for (const flag of ['load', 'trigger', 'trigger-size', 'axis', 'steps', 'operators'] as const) {
      if (values[flag] !== undefined) throw new UsageError(`--${flag} is an option of lab sweep only`);
    }
  }
  if (sub === undefined && values.serial !== undefined) throw new UsageError('--serial is an option of lab sweep and lab check only');
  if (sub === 'check' && values.json !== undefined) throw new UsageError('lab check takes no --json: sweep.json is written to --out');
  if (values.series !== undefined && (command !== 'lab' || sub !== undefined)) throw new UsageError('--series is an option of lab only');
  if (command === undefined) throw new UsageError('no command given');
  if (command !== 'lab') throw new UsageError(`unknown command "${command}"`);
  const out = values.out ?? 'lab-out';
  const damperConfig = values['damper-config'];
  // Found now, not by the first worker after the scenarios are loaded and the folder made.
  if (damperConfig !== undefined && !existsSync(damperConfig)) throw new UsageError(`--damper-config ${damperConfig}: no such file`);
  const run = { seed, out, serial: values.serial === true, ...(damperConfig === undefined ? {} : { damperConfig }) };
  if (sub === undefined) return lab(rest, { ...run, json: values.json === true, series: values.series === true });
  const [, scenario, ...extra] = rest;
  if (scenario === undefined) throw new UsageError(`lab ${sub} needs a SCENARIO (a shipped name such as facebook-2010, or a scenario file)`);
  if (extra.length > 0) throw new UsageError(`lab ${sub} takes one SCENARIO, got also: ${extra.join(' ')}`);
  if (sub === 'check') return check(scenario, run);
  const [across, up] = sweepAxes({ ...values, axis: values.axis ?? [] });
  return sweep(scenario, { across, up, steps: parseSteps(values.steps) }, { ...run, operators: values.operators === true, json: values.json === true });
}

async function lab(scenarios: string[], args: { seed: number; out: string; json: boolean; series: boolean; damperConfig?: string }): Promise<number> {
  const dir = await writableDir(args.out);
  const elapsed = stopwatch();
  const bar = progressBar(process.stderr);
  // Wall time per variant run, for the speed column: when each one started and ended.
  const wall = new Map<string, { from: number; to: number }>();
  const run = await runLab(scenarios, {
    seed: args.seed,
    ...(args.damperConfig === undefined ? {} : { damperConfig: args.damperConfig }),
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
  const results = resultsJson(run);
  const files: Record<string, string> = { 'results.json': results, 'report.html': renderReport(run) };
  if (args.series) for (const s of run.scenarios) for (const v of VARIANTS) files[seriesFile(s, v)] = seriesCsv(s, v);
  await writeFiles(dir, files);
  const speed = (scenario: string, variant: VariantName, requests: number): number => {
    const span = wall.get(`${scenario}/${variant}`);
    return span === undefined || span.to <= span.from ? 0 : requests / ((span.to - span.from) / 1000);
  };
  if (args.json) process.stdout.write(results);
  else process.stdout.write(`${formatSummary(run, speed)}\n\nwrote ${join(dir, 'report.html')} and ${join(dir, 'results.json')} in ${(elapsed() / 1000).toFixed(1)} s\n`);
  return 0;
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
