import { isWorldName, SCENARIO_SCHEMAS, scenarioJsonSchema } from '../lab/schema/index.js';
import { InputError, UsageError } from './args.js';
import { type Command, listed } from './command.js';

const WORLDS = Object.keys(SCENARIO_SCHEMAS);

/** `damper lab schema [WORLD]`: prints the JSON Schema of scenario files. */
export const schemaCommand: Command = {
  name: 'lab schema',
  summary: 'prints the JSON Schema of scenario files, for an editor',
  usage: 'lab schema [WORLD]',
  about:
    'Prints the JSON Schema (draft 2020-12) of any scenario file, or of one WORLD’s. Save it beside your scenario file and point the file’s "$schema" at it: an editor then completes the fields, shows their help and checks them as you type.',
  operands: [['WORLD', `one of ${listed(WORLDS)}; every world when none is given`]],
  options: [],
  examples: [
    ['damper lab schema > scenario.schema.json', 'then "$schema": "./scenario.schema.json" at the top of the scenario file'],
    ['damper lab schema service', 'the fields of a service world only'],
  ],
  run: (operands) => {
    const [world, ...extra] = operands;
    if (extra.length > 0) throw new UsageError(`lab schema takes at most one WORLD, got also: ${extra.join(' ')}`);
    // A wrong name, not wrong usage: one line, like an unknown scenario.
    if (world !== undefined && !isWorldName(world)) throw new InputError(`lab schema: unknown world "${world}" (known: ${WORLDS.join(', ')})`);
    process.stdout.write(`${JSON.stringify(scenarioJsonSchema(world), null, 2)}\n`);
    return Promise.resolve(0);
  },
};
