import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { shippedScenarios } from '../src/lab/lab.js';
import { scenarioJsonSchema, SCENARIO_SCHEMAS, type WorldName } from '../src/lab/schema/index.js';
import { checkScenario } from '../src/lab/world/worlds.js';
import { violations } from './support/json-schema.js';
import { scenarioDoc } from './support/scenario-doc.js';
import { damperCli } from './support/cli.js';

const cli = damperCli;
type Doc = Record<string, unknown>;

describe('damper lab schema: what an editor checks a scenario file against', () => {
  const printed = cli('lab', 'schema');
  const any = JSON.parse(printed.stdout) as Doc;

  test('prints one JSON Schema, draft 2020-12, for any scenario file', () => {
    assert.equal(printed.status, 0, printed.stderr);
    assert.equal(any.$schema, 'https://json-schema.org/draft/2020-12/schema');
    assert.equal((any.oneOf as unknown[]).length, Object.keys(SCENARIO_SCHEMAS).length);
  });

  test('with a WORLD, that world’s schema', () => {
    const r = cli('lab', 'schema', 'service');
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), scenarioJsonSchema('service'));
  });

  test('an unknown world: one line naming the known ones, exit 2', () => {
    const r = cli('lab', 'schema', 'mars');
    assert.equal(r.status, 2);
    assert.equal(r.stderr, 'damper: lab schema: unknown world "mars" (known: service)\n');
  });

  test('every shipped scenario validates, against the schema for any world and its own', async () => {
    for (const name of await shippedScenarios()) {
      const doc = scenarioDoc(name);
      assert.deepEqual(violations(any, doc), [], name);
      assert.deepEqual(violations(scenarioJsonSchema(doc.world as WorldName), doc), [], name);
    }
  });

  test('every object is closed: a field the schema does not know is flagged', () => {
    const open: string[] = [];
    const walk = (node: unknown, path: string): void => {
      if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${path}[${i}]`));
      if (typeof node !== 'object' || node === null) return;
      const schema = node as Doc;
      // A record (keys per population) has a schema for its values instead.
      if (schema.type === 'object' && schema.additionalProperties !== false && typeof schema.additionalProperties !== 'object') open.push(path);
      for (const [k, v] of Object.entries(schema)) if (k !== 'default') walk(v, `${path}.${k}`);
    };
    walk(any, '$');
    assert.deepEqual(open, []);
    const doc = scenarioDoc('facebook-2010');
    (doc.clients as Doc[])[0]!.retires = 2;
    assert.deepEqual(violations(scenarioJsonSchema('service'), doc), ['$.clients[0].retires: not allowed (additionalProperties: false)']);
  });

  // A field's own type and range are the schema's too; rules across fields (a fault's key among the hot keys…) are damper's alone.
  const fieldMistakes: [string, (d: Doc) => void][] = [
    ['a string for a number', (d) => ((d.database as Doc).workers = 'four')],
    ['a fraction for a whole number', (d) => ((d.database as Doc).workers = 2.5)],
    ['a negative rate', (d) => ((d.clients as Doc[])[0]!.rate = -5)],
    ['a missing section', (d) => delete d.servers],
    ['an unknown fault kind', (d) => ((d.faults as Doc[])[0]!.kind = 'meteor')],
    ['a bad backoff', (d) => ((d.clients as Doc[])[0]!.backoff = { kind: 'full-jitter', baseMs: 0, maxMs: 10 })],
    ['a bad hop delay', (d) => (d.network = { hopDelay: { kind: 'lognormal', medianMs: 1, sigma: 0 } })],
  ];
  for (const [what, change] of fieldMistakes) {
    test(`${what}: the schema and damper both refuse it`, () => {
      const doc = scenarioDoc('facebook-2010');
      change(doc);
      assert.notDeepEqual(violations(any, doc), []);
      assert.throws(() => checkScenario(doc));
    });
  }

  test('the new fields, given, are valid for the schema and for damper', () => {
    const doc: Doc = { $schema: './scenario.schema.json', ...scenarioDoc('facebook-2010'), network: { hopDelay: { kind: 'exponential', meanMs: 2 } } };
    (doc.clients as Doc[])[0]!.backoff = { kind: 'exponential', baseMs: 50, maxMs: 2000 };
    assert.deepEqual(violations(any, doc), []);
    assert.deepEqual(checkScenario(doc).network, { hopDelay: { kind: 'exponential', meanMs: 2 } });
  });
});
