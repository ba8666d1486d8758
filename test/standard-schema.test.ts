import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as v from 'valibot';
import { z } from 'zod';
import { Cache, ValidationError, VirtualClock } from '../src/index.js';

// damper depends on the Standard Schema spec's types only; these prove that
// real validators plug in as they are.

test('a zod schema validates loads, stores its parsed output, and reports its issues', async () => {
  const Config = z.object({ port: z.number().int().positive(), host: z.string() });
  const cache = new Cache<z.infer<typeof Config>>({ clock: new VirtualClock(), validate: Config });
  assert.deepEqual(await cache.get('ok', () => ({ port: 80, host: 'a', extra: 1 }) as never), { port: 80, host: 'a' });
  await assert.rejects(
    cache.get('bad', () => ({ port: -1, host: 'a' })),
    (e) => e instanceof ValidationError && e.issues !== undefined && e.issues.length === 1,
  );
});

test('a valibot schema keeps the last known good value when a load is invalid', async () => {
  const Flags = v.object({ enabled: v.boolean() });
  const clock = new VirtualClock();
  const cache = new Cache<v.InferOutput<typeof Flags>>({ clock, ttl: 100, staleFor: 10_000, validate: Flags });
  await cache.get('flags', () => ({ enabled: true }));
  await clock.advance(150);
  const invalid: string[] = [];
  cache.on('invalid', (e) => invalid.push(e.key));
  assert.deepEqual(await cache.get('flags', () => ({ enabled: 'yes' }) as never), { enabled: true });
  await clock.settle();
  assert.deepEqual(invalid, ['flags']);
  assert.deepEqual(cache.peek('flags'), { enabled: true });
});
