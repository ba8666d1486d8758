import { readFileSync } from 'node:fs';
import { SCENARIO_DIR } from '../../src/lab/lab.js';

/**
 * A shipped scenario file as written, not parsed: the document a test breaks
 * one field of. (A parsed scenario is no scenario file: it has derived fields,
 * such as each fault's `trigger`, that a file may not give.)
 */
export function scenarioDoc(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(`${SCENARIO_DIR}${name}.json`, 'utf8')) as Record<string, unknown>;
}
