import { type Json, ScenarioError } from '../scenario.js';

/**
 * A field of a scenario file as written, named the way problems name it
 * (`servers.workers`, `clients[0].timeoutMs`, `faults[1].endS`): what a sweep
 * axis or a check axis varies. It reads and sets the document, never the
 * parsed scenario, because parsing fills defaults and reshapes fields
 * (`retryDelayMs` becomes a `backoff`): the cell's document is checked again
 * by the world's schema, as the file itself was.
 */

/** One step of a path: an object's field or an array's index. */
export type FieldStep = string | number;

const STEP = /^(?:\.?([A-Za-z_$][\w$]*)|\[(\d+)\])/;

/** `clients[0].rate` → `['clients', 0, 'rate']`; a path that is not one is a ScenarioError naming it. */
export function parseFieldPath(path: string, where: string): FieldStep[] {
  const steps: FieldStep[] = [];
  let rest = path;
  while (rest !== '') {
    const m = STEP.exec(rest);
    // A leading dot, or none after a name, would accept `a..b` and `ab` alike.
    if (m === null || (steps.length === 0 && rest.startsWith('.')) || (steps.length > 0 && m[1] !== undefined && !rest.startsWith('.'))) {
      throw new ScenarioError(where, [{ field: path, problem: 'not a field path (write it as the problems name fields: clients[0].rate, faults[1].endS)' }]);
    }
    steps.push(m[1] ?? Number(m[2]));
    rest = rest.slice(m[0].length);
  }
  if (steps.length === 0) throw new ScenarioError(where, [{ field: path, problem: 'an empty field path' }]);
  return steps;
}

/** `steps` as problems name a field. */
export function formatFieldPath(steps: readonly FieldStep[]): string {
  return steps.map((s, i) => (typeof s === 'number' ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');
}

function isRecord(value: Json): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** What `value` holds one level down, for a problem's "known:" list. */
function children(value: Json): string {
  if (Array.isArray(value)) return value.length === 0 ? 'an empty array' : `an array of ${value.length} ([0] to [${value.length - 1}])`;
  if (isRecord(value)) return `fields ${Object.keys(value).join(', ')}`;
  return `the value ${JSON.stringify(value)}`;
}

/**
 * The number at `steps` in `doc`; a field that is not in the file (left to
 * its default, or misspelt), or that is not a number, is a ScenarioError
 * naming the path and what is there instead.
 */
export function numberAt(doc: Json, steps: readonly FieldStep[], where: string): number {
  let value: Json = doc;
  for (const [i, step] of steps.entries()) {
    const next = typeof step === 'number' ? (Array.isArray(value) ? value[step] : undefined) : isRecord(value) && Object.hasOwn(value, step) ? value[step] : undefined;
    if (next === undefined) {
      const parent = i === 0 ? 'the file' : formatFieldPath(steps.slice(0, i));
      throw new ScenarioError(where, [{ field: formatFieldPath(steps), problem: `not in the file: ${parent} has ${children(value)} (a field left to its default must be written out to be an axis)` }]);
    }
    value = next;
  }
  if (typeof value !== 'number') throw new ScenarioError(where, [{ field: formatFieldPath(steps), problem: `not a number: the file has ${JSON.stringify(value)}` }]);
  return value;
}

/** A copy of `doc` with the number at `steps` (which must exist: see {@link numberAt}) set to `value`; the rest shared. */
export function withNumberAt(doc: Json, steps: readonly FieldStep[], value: number): Json {
  if (steps.length === 0) return value;
  const [step, ...rest] = steps;
  if (typeof step === 'number') {
    const array = doc as readonly Json[];
    return array.map((item, i) => (i === step ? withNumberAt(item, rest, value) : item));
  }
  const record = doc as Record<string, Json>;
  return { ...record, [step!]: withNumberAt(record[step!], rest, value) };
}
