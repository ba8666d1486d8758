import { readFileSync } from 'node:fs';
import { SCENARIO_DIR } from '../../src/lab/lab.js';
import { type ServiceScenario } from '../../src/lab/world/service.js';
import { checkScenario } from '../../src/lab/world/worlds.js';

/**
 * A shipped scenario file as written, not parsed: the document a test breaks
 * one field of. (A parsed scenario is no scenario file: it has derived fields,
 * such as each fault's `trigger`, that a file may not give.)
 */
export function scenarioDoc(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(`${SCENARIO_DIR}${name}.json`, 'utf8')) as Record<string, unknown>;
}

/**
 * A service scenario a test writes: its prose fields filled in, `fields`
 * (durations, objective, parts, faults) as given, then `change` applied to
 * the document, checked as a file named `<name>.json` would be.
 */
export function testScenario(name: string, fields: Record<string, unknown>, change: (d: Record<string, unknown>) => void = () => {}): ServiceScenario {
  const doc: Record<string, unknown> = { name, title: 't', description: 'd', source: 's', scaling: 's', world: 'service', ...fields };
  change(doc);
  return checkScenario(doc, `${name}.json`) as ServiceScenario;
}

/**
 * retry-storm at a quarter of its size: one worker, a quarter of the queue
 * and admission limit, each request held weighing four times as much, and
 * `rate` users/s where the shipped file has 200 (50 keeps its load). Every
 * ratio is the shipped scenario's, a quarter of the calls: a naive cell is
 * a storm that lasts to the horizon, and the suite is CPU-bound.
 */
export function quarterStorm(rate = 50): Record<string, unknown> {
  const storm = scenarioDoc('retry-storm');
  const servers = { ...(storm.servers as object), workers: 1, maxQueue: 250, admissionLimit: 4, slowdownPerInFlight: 0.008 };
  return { ...storm, servers, clients: [{ name: 'users', rate, timeoutMs: 2000 }] };
}
