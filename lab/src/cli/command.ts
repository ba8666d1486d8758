import { UsageError } from './args.js';
import { GLOBAL_OPTIONS, type OptionName, type OptionValues } from './options.js';

/**
 * A command of the `damper` command line: what its help says (help.ts
 * renders it) and how it runs. Its `options` are the only ones it accepts,
 * so the help and the check of what was given cannot disagree.
 */
export interface Command {
  /** As typed after `damper`: `lab`, `lab sweep`. */
  readonly name: string;
  /** One line, for `damper --help`. */
  readonly summary: string;
  /** After `damper `: `lab sweep SCENARIO AXIS AXIS [options]`. */
  readonly usage: string;
  /** What it does and writes, a paragraph. */
  readonly about: string;
  /** Its operands, each with what it is. */
  readonly operands: readonly (readonly [string, string])[];
  /** Its options besides `--help`, each with what it does. */
  readonly options: readonly (readonly [OptionName, string])[];
  /** Two command lines and what each does. */
  readonly examples: readonly [Example, Example];
  /** Runs it on the words after its name and the options; resolves to the exit code. */
  run(operands: readonly string[], values: OptionValues): Promise<number>;
}

export type Example = readonly [line: string, what: string];

/** The command the words name (the longest name that fits: `lab sweep` before `lab`) and the words after it. */
export function findCommand(commands: readonly Command[], words: readonly string[]): { command: Command; operands: string[] } | undefined {
  let found: { command: Command; length: number } | undefined;
  for (const command of commands) {
    const name = command.name.split(' ');
    if (name.every((w, i) => words[i] === w) && name.length > (found?.length ?? 0)) found = { command, length: name.length };
  }
  return found === undefined ? undefined : { command: found.command, operands: words.slice(found.length) };
}

/** Refuses an option given to a command that does not take it, naming the commands that do. */
export function checkOptions(name: string, accepted: readonly OptionName[], values: OptionValues, commands: readonly Command[]): void {
  for (const option of Object.keys(values) as OptionName[]) {
    if (values[option] === undefined || accepted.includes(option) || GLOBAL_OPTIONS.includes(option)) continue;
    const owners = commands.filter((c) => c.options.some(([o]) => o === option)).map((c) => c.name);
    throw new UsageError(`${name} takes no --${option}: it is an option of ${listed(owners)}`);
  }
}

/** "a", "a and b", "a, b and c". */
export function listed(items: readonly string[]): string {
  return items.length <= 1 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]!}`;
}
