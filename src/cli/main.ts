#!/usr/bin/env node
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DamperError } from '../errors.js';
import { formatDemo, runDemo } from '../lab/demo.js';
import { runLab } from '../lab/lab.js';
import { renderReport } from '../lab/report.js';
import { resultsJson, type VariantName } from '../lab/results.js';
import { stopwatch } from '../time/stopwatch.js';
import { formatSummary, progressBar } from './terminal.js';

/**
 * The `damper` command. It only parses arguments and delegates; every
 * mechanism lives in the library or the lab. Bad usage prints a one-line
 * reason and the usage, and exits 2; an unusable scenario exits 2 with the
 * field at fault: never a stack trace.
 */

const USAGE = `usage: damper <command> [options]

commands:
  lab [SCENARIO…] [--seed N] [--out DIR] [--json]
        replay incidents (all shipped ones by default; a SCENARIO is a shipped
        name such as facebook-2010, or a path to a scenario file), naive vs
        damper, in virtual time; writes DIR/report.html and DIR/results.json
        (DIR defaults to lab-out); --json also prints results.json
  demo [--seed N] [--json]
        a naive cache-aside loop and damper, side by side, under a failing database

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
  switch (command) {
    case 'lab':
      return lab(rest, seed, values.out ?? 'lab-out', values.json === true);
    case 'demo': {
      if (rest.length > 0) throw new UsageError(`demo takes no arguments, got: ${rest.join(' ')}`);
      if (values.out !== undefined) throw new UsageError('demo takes no --out');
      const result = await runDemo(seed);
      process.stdout.write(values.json === true ? `${JSON.stringify(result, null, 2)}\n` : `${formatDemo(result)}\n`);
      return 0;
    }
    case undefined:
      throw new UsageError('no command given');
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

async function lab(scenarios: string[], seed: number, out: string, json: boolean): Promise<number> {
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
