import { loadScenario, shippedScenarios } from '../lab/lab.js';
import { optionUsage } from './options.js';
import { type Command } from './command.js';

/**
 * The help pages. Each command's text lives beside the command (its
 * `Command` object); this file only lays them out: usage, what it does,
 * arguments, options, the shipped scenarios (read from the lab's scenarios
 * folder, as `damper lab` finds them, so a new file shows up without an
 * edit here) and two examples.
 */

const WIDTH = 80;
/** The left column of a two-column list; a longer entry puts its text on the next line. */
const COLUMN = 24;

/** `text` in lines of at most WIDTH, each after `indent` spaces. */
function wrap(text: string, indent: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter((w) => w !== '')) {
    if (line !== '' && indent + line.length + 1 + word.length > WIDTH) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(line);
  return lines.map((l) => `${' '.repeat(indent)}${l}`);
}

/** Two columns: the term, then its text wrapped beside it (or under it, when the term is long). */
function list(rows: readonly (readonly [string, string])[]): string[] {
  const column = Math.min(COLUMN, 2 + Math.max(...rows.map(([term]) => term.length)) + 2);
  return rows.flatMap(([term, text]) => {
    const lines = wrap(text, column);
    const head = `  ${term}`;
    if (head.length + 2 > column) return [head, ...lines];
    return [`${head.padEnd(column)}${lines[0]?.trimStart() ?? ''}`, ...lines.slice(1)];
  });
}

/** The line under a usage error: which help to read. */
export function seeHelp(name: string | undefined): string {
  return `see \`damper ${name === undefined ? '' : `${name} `}--help\``;
}

/** The shipped scenarios, as `damper lab` finds them: each name with its title and world. */
async function shippedList(): Promise<string[]> {
  const scenarios = await Promise.all((await shippedScenarios()).map(loadScenario));
  return list(scenarios.map((s) => [s.name, `${s.title} (world: ${s.world})`]));
}

/** `damper COMMAND --help`: `commands` gives the commands below this one (`lab` lists `lab sweep`…). */
export async function commandHelp(command: Command, commands: readonly Command[]): Promise<string> {
  const below = commands.filter((c) => c.name.startsWith(`${command.name} `));
  const options: [string, string][] = [...command.options.map(([o, text]): [string, string] => [optionUsage(o), text]), ['-h, --help', 'shows this help']];
  const sections = [
    wrap(`damper ${command.name}: ${command.summary}`, 0),
    [`usage: damper ${command.usage}`],
    wrap(command.about, 0),
    ...(command.operands.length === 0 ? [] : [['arguments:', ...list(command.operands)]]),
    ['options:', ...list(options)],
    ...(below.length === 0 ? [] : [['commands (each with its own --help):', ...list(below.map((c) => [c.name, c.summary]))]]),
    ['shipped scenarios:', ...(await shippedList())],
    ['examples:', ...command.examples.flatMap(([line, what]) => [`  ${line}`, ...wrap(what, 6)])],
  ];
  return sections.map((lines) => lines.join('\n')).join('\n\n');
}

/** `damper --help`: every command in one line. */
export function globalHelp(commands: readonly Command[]): string {
  return [
    ['damper: a data-access tier that cannot fall into the feedback loops behind the Facebook 2010, Discord 2019 and Missourian 2010 outages, and an incident lab that replays them.'].flatMap((t) => wrap(t, 0)),
    ['usage: damper COMMAND [options]'],
    ['commands:', ...list([...commands.map((c): [string, string] => [c.name, c.summary]), ['help [COMMAND]', 'shows the help of a command (damper help lab sweep)']])],
    ['options:', ...list([['-h, --help', 'shows this help'], ['-v, --version', 'shows the version']])],
    wrap('A command’s help (damper COMMAND --help, or damper help COMMAND) has its options, the shipped scenarios and two examples.', 0),
  ]
    .map((lines) => lines.join('\n'))
    .join('\n\n');
}
