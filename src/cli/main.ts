#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { formatDemo, runDemo } from '../lab/demo.js';

/**
 * The `damper` command. It only parses arguments and delegates; every
 * mechanism lives in the library or the lab. Bad usage prints a one-line
 * reason and the usage, and exits 2: never a stack trace.
 */

const USAGE = `usage: damper <command> [options]

commands:
  demo [--seed N] [--json]   a naive cache-aside loop and damper, side by side, under a failing database

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
  switch (command) {
    case 'demo': {
      if (rest.length > 0) throw new UsageError(`demo takes no arguments, got: ${rest.join(' ')}`);
      const seed = parseSeed(values.seed);
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

function parseSeed(raw: string | undefined): number {
  if (raw === undefined) return 1;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n)) throw new UsageError(`--seed must be a non-negative integer, got "${raw}"`);
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
    } else {
      process.stderr.write(`damper: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    }
  },
);
