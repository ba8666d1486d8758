import { z } from 'zod';
import { serviceSchema } from './service.js';
import { tagged } from './common.js';

/** Each world's scenario file, by the `world` it names. */
export const SCENARIO_SCHEMAS = {
  service: serviceSchema,
} as const;

export type WorldName = keyof typeof SCENARIO_SCHEMAS;

export function isWorldName(name: string): name is WorldName {
  return Object.hasOwn(SCENARIO_SCHEMAS, name);
}

/** Any scenario file: `world` picks the schema; an unknown world is one problem that lists the known ones. */
export const scenarioSchema = tagged('world', 'world', [serviceSchema]).meta({
  title: 'damper scenario',
  description: 'A damper lab scenario: a system (its `world`), its clients and a timeline of faults.',
});

/**
 * The JSON Schema (draft 2020-12) of a world's scenario files, or of any
 * scenario file: what an editor checks a file against (`"$schema"`). It
 * describes the file as written (`io: 'input'`): defaults are shown, not
 * required. Rules across fields (a fault's key must be a hot key…) are
 * damper's own checks; the schema has each field's type and range.
 */
export function scenarioJsonSchema(world?: WorldName): Record<string, unknown> {
  return z.toJSONSchema(world === undefined ? scenarioSchema : SCENARIO_SCHEMAS[world], { target: 'draft-2020-12', io: 'input' });
}
