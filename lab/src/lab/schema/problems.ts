import { type z } from 'zod';
import { type Json, ScenarioError, type ScenarioProblem } from '../scenario.js';

/**
 * From a schema's issues to a ScenarioError in damper's words: every problem
 * at once, each with its field's path (`clients[0].rate`) and a reason in the
 * form the hand-written checks used (`must be ≥ 0, got -5`), and a typo in a
 * field's name answered with the nearest known name.
 */

/** Checks `doc` against `schema`: the parsed value, or a ScenarioError listing every problem, each at its field. */
export function check<T>(schema: z.ZodType<T>, doc: Json, file: string): T {
  const result = schema.safeParse(doc, { reportInput: true, error: reason });
  if (result.success) return result.data;
  throw new ScenarioError(file, result.error.issues.flatMap(problems));
}

function problems(issue: z.core.$ZodIssue): ScenarioProblem[] {
  // One issue names every unknown field of an object; `reason` gave each its own line, in the order of `keys`.
  if (issue.code === 'unrecognized_keys') {
    const lines = issue.message.split('\n');
    return issue.keys.map((key, i) => ({ field: fieldPath([...issue.path, key]), problem: lines[i]! }));
  }
  return [{ field: fieldPath(issue.path), problem: issue.message }];
}

/** `a.b[0].c`. */
export function fieldPath(path: readonly PropertyKey[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}

/** The message of an issue that has none of its own (a refinement's has). */
function reason(issue: z.core.$ZodRawIssue): string | undefined {
  const input: unknown = issue.input;
  switch (issue.code) {
    case 'invalid_type':
      if (input === undefined) return 'missing';
      return `must be ${expected(issue.expected, input)}, got ${kindOf(input)}`;
    case 'too_small':
      if (issue.origin === 'string') return `must be a non-empty string, got ${kindOf(input)}`;
      if (issue.origin === 'array') return `needs at least ${String(issue.minimum)}`;
      return `must be ${issue.inclusive === false ? '>' : '≥'} ${String(issue.minimum)}, got ${kindOf(input)}`;
    case 'too_big':
      return `must be ${issue.inclusive === false ? '<' : '≤'} ${String(issue.maximum)}, got ${kindOf(input)}`;
    case 'invalid_value':
      return `must be ${issue.values.length === 1 ? JSON.stringify(issue.values[0]) : `one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`}, got ${kindOf(input)}`;
    case 'unrecognized_keys': {
      const known = Object.keys((issue.inst as z.ZodObject | undefined)?.shape ?? {});
      return issue.keys.map((key) => unknownField(key, known)).join('\n');
    }
    default:
      return undefined;
  }
}

function expected(type: string, input: unknown): string {
  switch (type) {
    case 'int':
      return typeof input === 'number' ? 'an integer' : 'a number';
    case 'string':
      return 'a non-empty string';
    case 'boolean':
      return 'true or false';
    case 'object':
    case 'array':
      return `an ${type}`;
    default:
      return `a ${type}`;
  }
}

/** The value as a message quotes it: strings in quotes, numbers as they are, objects and arrays by their kind. */
export function kindOf(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return JSON.stringify(v);
  return typeof v === 'object' ? 'an object' : String(v);
}

/** A field the schema does not know, with the known one it most likely meant, or the list of them. */
function unknownField(key: string, known: readonly string[]): string {
  const meant = closestName(key, known);
  return meant === undefined ? `unknown field (known: ${known.join(', ')})` : `unknown field (did you mean ${meant}?)`;
}

/** The known name `key` most likely misspells (a field, an option, a command), or undefined when none is close. */
export function closestName(key: string, known: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of known) {
    const distance = editDistance(key.toLowerCase(), name.toLowerCase());
    if (best === undefined || distance < best.distance) best = { name, distance };
  }
  // Close: a typo or two, or a third of the name; never a guess that shares nothing with it.
  return best !== undefined && best.distance < key.length && (best.distance <= 2 || best.distance <= key.length / 3) ? best.name : undefined;
}

/** Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`: optimal string alignment. */
export function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}
