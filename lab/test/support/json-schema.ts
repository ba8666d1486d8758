/**
 * A checker for the JSON Schema keywords `damper lab schema` emits, and only
 * those: a keyword it does not know is an error, so a schema can never pass a
 * document by using something the checker skips. (No validator is installed;
 * this is what an editor does with the schema, small enough to trust.)
 */

type Schema = { readonly [keyword: string]: unknown };

const ANNOTATIONS = new Set(['$schema', 'title', 'description', 'default']);

/** Where `value` breaks `schema`: one line per problem, `path: reason`; empty when it conforms. */
export function violations(schema: Schema, value: unknown, path = '$'): string[] {
  const out: string[] = [];
  for (const [keyword, arg] of Object.entries(schema)) {
    if (ANNOTATIONS.has(keyword)) continue;
    const fail = (reason: string): void => void out.push(`${path}: ${reason}`);
    switch (keyword) {
      case 'type':
        if (!hasType(value, arg as string)) fail(`not of type ${String(arg)}`);
        break;
      case 'const':
        if (JSON.stringify(value) !== JSON.stringify(arg)) fail(`not ${JSON.stringify(arg)}`);
        break;
      case 'enum':
        if (!(arg as unknown[]).some((v) => JSON.stringify(v) === JSON.stringify(value))) fail('not one of the enum');
        break;
      case 'minimum':
        if (typeof value === 'number' && value < (arg as number)) fail(`below ${String(arg)}`);
        break;
      case 'maximum':
        if (typeof value === 'number' && value > (arg as number)) fail(`above ${String(arg)}`);
        break;
      case 'exclusiveMinimum':
        if (typeof value === 'number' && value <= (arg as number)) fail(`not above ${String(arg)}`);
        break;
      case 'minLength':
        if (typeof value === 'string' && [...value].length < (arg as number)) fail(`shorter than ${String(arg)}`);
        break;
      case 'minItems':
        if (Array.isArray(value) && value.length < (arg as number)) fail(`fewer than ${String(arg)} items`);
        break;
      case 'maxItems':
        if (Array.isArray(value) && value.length > (arg as number)) fail(`more than ${String(arg)} items`);
        break;
      case 'pattern':
        if (typeof value === 'string' && !new RegExp(arg as string, 'u').test(value)) fail(`does not match ${String(arg)}`);
        break;
      case 'items':
        if (Array.isArray(value)) value.forEach((item, i) => out.push(...violations(arg as Schema, item, `${path}[${i}]`)));
        break;
      case 'required':
        if (isObject(value)) for (const key of arg as string[]) if (!(key in value)) fail(`${key} is required`);
        break;
      case 'properties':
        if (isObject(value)) for (const [key, sub] of Object.entries(arg as Record<string, Schema>)) if (key in value) out.push(...violations(sub, value[key], `${path}.${key}`));
        break;
      case 'additionalProperties':
        if (isObject(value)) {
          const declared = (schema.properties ?? {}) as Record<string, unknown>;
          for (const [key, v] of Object.entries(value)) {
            if (key in declared) continue;
            if (arg === false) out.push(`${path}.${key}: not allowed (additionalProperties: false)`);
            else out.push(...violations(arg as Schema, v, `${path}.${key}`));
          }
        }
        break;
      case 'propertyNames':
        if (isObject(value)) for (const key of Object.keys(value)) out.push(...violations(arg as Schema, key, `${path}.${key} (name)`));
        break;
      case 'oneOf': {
        const matching = (arg as Schema[]).filter((option) => violations(option, value, path).length === 0).length;
        if (matching !== 1) fail(`matches ${matching} of oneOf's ${(arg as Schema[]).length} options, not exactly one`);
        break;
      }
      default:
        throw new Error(`json-schema checker: unsupported keyword "${keyword}" at ${path}`);
    }
  }
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function hasType(v: unknown, type: string): boolean {
  switch (type) {
    case 'object':
      return isObject(v);
    case 'array':
      return Array.isArray(v);
    case 'integer':
      return Number.isInteger(v);
    case 'number':
      return typeof v === 'number';
    case 'string':
    case 'boolean':
      return typeof v === type;
    default:
      throw new Error(`json-schema checker: unsupported type "${type}"`);
  }
}
