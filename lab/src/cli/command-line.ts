import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DamperError } from 'damper';
import { packageRoot } from '../lab/lab.js';
import { closestName } from '../lab/schema/problems.js';
import { InputError, UsageError } from './args.js';
import { checkCommand } from './check-command.js';
import { checkOptions, type Command, findCommand } from './command.js';
import { commandHelp, globalHelp, seeHelp } from './help.js';
import { labCommand } from './lab-command.js';
import { mergeCommand } from './merge-command.js';
import { realCommand } from './real-command.js';
import { stacksCommand } from './stacks-command.js';
import { readOptions, readWords } from './options.js';
import { schemaCommand } from './schema-command.js';
import { sweepCommand } from './sweep-command.js';
import { validateCommand } from './validate-command.js';

/**
 * The `damper` command line, apart from the process that runs it (main.ts):
 * the tests read its usage errors and helps in their own process, where a
 * process per check cost ~0.6 s of CPU each (Node's start and the lab's
 * modules). It only parses arguments and delegates; every mechanism lives
 * in the library or the lab, every command's text beside it. Bad usage
 * prints a one-line reason and which help to read, and exits 2; an unusable
 * scenario or file exits 2 with the field or path at fault: never a stack
 * trace. A command's own output (a run's summary, its progress) goes to the
 * process's streams.
 */

/** Where the command line writes its help, its usage errors and its refusals: the process's streams, or a test's. */
export interface Streams {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
}

const COMMANDS: readonly Command[] = [labCommand, sweepCommand, checkCommand, mergeCommand, realCommand, stacksCommand, validateCommand, schemaCommand];

/** `unknown command "lba" (did you mean lab?)`. */
function unknownCommand(words: readonly string[]): UsageError {
  const meant = closestName(words.join(' '), COMMANDS.map((c) => c.name));
  return new UsageError(`unknown command "${words.join(' ')}"${meant === undefined ? '' : ` (did you mean ${meant}?)`}`);
}

async function version(): Promise<string> {
  // From the package's root, not a path relative to this file: a test build runs it from one folder deeper.
  const pkg = JSON.parse(await readFile(join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
  return pkg.version;
}

/** `damper help [COMMAND]`: the help of the command the words name, or the global one. */
async function help(words: readonly string[]): Promise<string> {
  if (words.length === 0) return globalHelp(COMMANDS);
  const found = findCommand(COMMANDS, words);
  if (found === undefined || found.operands.length > 0) throw unknownCommand(words);
  return commandHelp(found.command, COMMANDS);
}

/** Runs the command line: `found` is the command its words name, if any. */
async function route(argv: readonly string[], words: readonly string[], found: ReturnType<typeof findCommand>, streams: Streams): Promise<number> {
  const values = readOptions(argv);
  let text: string;
  if (words[0] === 'help') {
    checkOptions('help', [], values, COMMANDS);
    text = await help(words.slice(1));
  } else if (values.help === true) {
    if (found === undefined && words.length > 0) throw unknownCommand(words);
    text = found === undefined ? globalHelp(COMMANDS) : await commandHelp(found.command, COMMANDS);
  } else if (values.version === true) {
    text = await version();
  } else {
    if (words.length === 0) throw new UsageError('no command given');
    if (found === undefined) throw unknownCommand(words);
    checkOptions(found.command.name, found.command.options.map(([o]) => o), values, COMMANDS);
    return found.command.run(found.operands, values);
  }
  streams.stdout.write(`${text}\n`);
  return 0;
}

/** Runs `damper ARGV…`; resolves to its exit code: 0, 1 for a defect of ours (with its stack), 2 for bad usage or input. */
export async function commandLine(argv: readonly string[], streams: Streams = process): Promise<number> {
  // The words first, even when an option is wrong: a usage error says which command's help to read.
  const words = readWords(argv);
  const found = words[0] === 'help' ? undefined : findCommand(COMMANDS, words);
  try {
    return await route(argv, words, found, streams);
  } catch (error) {
    if (error instanceof UsageError) {
      streams.stderr.write(`damper: ${error.message}\n${seeHelp(found?.command.name)}\n`);
      return 2;
    }
    if (error instanceof InputError || error instanceof DamperError) {
      // A file, a folder, a scenario or an option the library refused: the message names what and where.
      streams.stderr.write(`damper: ${error.message}\n`);
      return 2;
    }
    streams.stderr.write(`damper: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    return 1;
  }
}
