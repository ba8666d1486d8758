/**
 * Every numeric field a scenario file can have, read from its JSON Schema
 * (index.ts's `scenarioJsonSchema`): its path, whether it is whole, and its
 * range. What a transform of every number in a scenario (fitting it to a
 * machine: real/fit.ts) asks the schema rather than a list kept beside it,
 * which a field added later would escape.
 */

/** A numeric field of a scenario file, as its JSON Schema states it. */
export interface NumericField {
  /**
   * The field's path as problems name a field, with every list's index as
   * `[]` and a tuple's position kept: `clients[].timeoutMs`,
   * `faults[].profile[][0]`.
   */
  readonly pattern: string;
  /** The schema wants a whole number. */
  readonly integer: boolean;
  /** The least value allowed (-Infinity: none); `exclusive`: the bound itself is not. */
  readonly minimum: { readonly value: number; readonly exclusive: boolean };
  /** The greatest value allowed (Infinity: none). */
  readonly maximum: { readonly value: number; readonly exclusive: boolean };
}

type JsonSchemaNode = Readonly<Record<string, unknown>>;

/**
 * The numeric fields of `schema` (a JSON Schema as zod writes it: no
 * `$ref`), by pattern. A field that several branches of a union have
 * (`faults[].factor` in five fault kinds) is one field whose range is the
 * widest of theirs and which is whole only if it is whole in each: a caller
 * that keeps a value in that range keeps it in the widest, and the schema
 * checked the narrower one when the file was read.
 */
export function numericFields(schema: JsonSchemaNode): ReadonlyMap<string, NumericField> {
  const fields = new Map<string, NumericField>();
  const visit = (node: JsonSchemaNode, pattern: string): void => {
    if (node['type'] === 'number' || node['type'] === 'integer') {
      const field = leaf(node, pattern);
      const known = fields.get(pattern);
      fields.set(pattern, known === undefined ? field : widest(known, field));
      return;
    }
    for (const [name, child] of Object.entries((node['properties'] ?? {}) as Record<string, JsonSchemaNode>)) visit(child, pattern === '' ? name : `${pattern}.${name}`);
    if (node['items'] !== undefined) visit(node['items'] as JsonSchemaNode, `${pattern}[]`);
    ((node['prefixItems'] ?? []) as JsonSchemaNode[]).forEach((child, i) => visit(child, `${pattern}[${i}]`));
    for (const union of ['oneOf', 'anyOf', 'allOf']) for (const branch of (node[union] ?? []) as JsonSchemaNode[]) visit(branch, pattern);
  };
  visit(schema, '');
  return fields;
}

function leaf(node: JsonSchemaNode, pattern: string): NumericField {
  const bound = (inclusive: string, exclusive: string, none: number) =>
    typeof node[exclusive] === 'number' ? { value: node[exclusive], exclusive: true } : { value: typeof node[inclusive] === 'number' ? node[inclusive] : none, exclusive: false };
  return { pattern, integer: node['type'] === 'integer', minimum: bound('minimum', 'exclusiveMinimum', -Infinity), maximum: bound('maximum', 'exclusiveMaximum', Infinity) };
}

function widest(a: NumericField, b: NumericField): NumericField {
  const lower = a.minimum.value < b.minimum.value || (a.minimum.value === b.minimum.value && !a.minimum.exclusive) ? a.minimum : b.minimum;
  const upper = a.maximum.value > b.maximum.value || (a.maximum.value === b.maximum.value && !a.maximum.exclusive) ? a.maximum : b.maximum;
  return { pattern: a.pattern, integer: a.integer && b.integer, minimum: lower, maximum: upper };
}

/** Why `value` is out of `field`'s range (`below its minimum 1`), or undefined when it is in it. */
export function outOfRange(field: NumericField, value: number): string | undefined {
  const { minimum: lo, maximum: hi } = field;
  if (value < lo.value || (lo.exclusive && value === lo.value)) return `${lo.exclusive ? 'not above' : 'below'} its minimum ${lo.value}`;
  if (value > hi.value || (hi.exclusive && value === hi.value)) return `${hi.exclusive ? 'not below' : 'above'} its maximum ${hi.value}`;
  return undefined;
}
