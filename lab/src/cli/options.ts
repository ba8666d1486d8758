import { parseArgs } from 'node:util';
import { closestName } from '../lab/schema/problems.js';
import { UsageError } from './args.js';

/**
 * Every option of the `damper` command, whichever command takes it (each
 * command lists its own: the only ones it accepts): its type for parseArgs
 * and, when it takes a value, how a usage line writes the value.
 */
export const OPTIONS = {
  seed: { type: 'string', value: 'N' },
  out: { type: 'string', value: 'DIR' },
  json: { type: 'boolean' },
  series: { type: 'boolean' },
  'damper-config': { type: 'string', value: 'FILE' },
  load: { type: 'string', value: 'A..B' },
  trigger: { type: 'string', value: 'C..D' },
  'trigger-size': { type: 'string', value: 'C..D' },
  axis: { type: 'string', multiple: true, value: 'PATH=A..B' },
  steps: { type: 'string', value: 'N' },
  operators: { type: 'boolean' },
  serial: { type: 'boolean' },
  'max-calls': { type: 'string', value: 'N' },
  'max-minutes': { type: 'string', value: 'M' },
  shard: { type: 'string', value: 'I/N' },
  scale: { type: 'string', value: 'S' },
  'time-scale': { type: 'string', value: 'K' },
  duration: { type: 'string', value: 'SECONDS' },
  runs: { type: 'string', value: 'N' },
  stack: { type: 'string', multiple: true, value: 'NAME[:KNOB=N]' },
  real: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
} as const;

export type OptionName = keyof typeof OPTIONS;

/** The options as given, typed by OPTIONS. */
export type OptionValues = ReturnType<typeof strictParse>['values'];

/** The options every command accepts: they are about the command line itself. */
export const GLOBAL_OPTIONS: readonly OptionName[] = ['help', 'version'];

function strictParse(argv: readonly string[]) {
  return parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true });
}

/** A parse that refuses nothing: every option's token as written, the words left. */
function lenientParse(argv: readonly string[]) {
  return parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: false, tokens: true });
}

function isOption(name: string): name is OptionName {
  return Object.hasOwn(OPTIONS, name);
}

/**
 * The words of the command line: the command's name and its operands. Read
 * even when an option is wrong, so the message can say which command's help
 * to read.
 */
export function readWords(argv: readonly string[]): string[] {
  return lenientParse(argv).positionals;
}

/** The options, or a UsageError in our words when node's parser refuses them. */
export function readOptions(argv: readonly string[]): OptionValues {
  try {
    return strictParse(argv).values;
  } catch (error) {
    throw new UsageError(parseProblem(error, argv));
  }
}

/** `--steps N`, `--json`: an option as a usage line writes it. */
export function optionUsage(name: OptionName): string {
  const option = OPTIONS[name];
  return 'value' in option ? `--${name} ${option.value}` : `--${name}`;
}

/**
 * Node's parse error in our words. Its code says what is wrong; which option,
 * its message says only in prose, so the tokens of a parse that refuses
 * nothing find the first one that breaks the same rule.
 */
function parseProblem(error: unknown, argv: readonly string[]): string {
  const code = (error as { code?: unknown }).code;
  const options = lenientParse(argv).tokens.flatMap((t) => (t.kind === 'option' ? [t] : []));
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const token = options.find((t) => !isOption(t.name));
    if (token !== undefined) {
      const meant = token.rawName.startsWith('--') ? closestName(token.name, Object.keys(OPTIONS)) : undefined;
      return `unknown option ${token.rawName}${meant === undefined ? '' : ` (did you mean --${meant}?)`}`;
    }
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    for (const t of options) {
      if (!isOption(t.name)) continue;
      const raw = t.rawName;
      const option = OPTIONS[t.name];
      if (!('value' in option)) {
        if (t.value !== undefined) return `${raw} takes no value, got ${raw}=${t.value}`;
        continue;
      }
      const usage = `${raw} ${option.value}`;
      // `--seed --json`: the value was forgotten. `--seed -1`: a value that looks like an option, which only `=` can say is not one.
      if (t.value === undefined || (!t.inlineValue && t.value.startsWith('--'))) return `${raw} needs a value: ${usage}`;
      if (!t.inlineValue && t.value.startsWith('-')) return `${raw} needs a value: ${usage}; a value that starts with "-" is written ${raw}=${t.value}`;
    }
  }
  // A rule of node's that none of the above knows: its first line rather than an internal error.
  return String((error as Error).message).split('\n')[0]!;
}

