import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { startRedis } from './support/redis-server.js';

// Examples compile (they are type-checked with the rest) and run here, so the
// README cannot drift into code that does not work.

test('examples/quickstart.ts runs and shows coalescing, negative caching and validation', () => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'examples/quickstart.ts'], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /100 reads, 1 query/);
  assert.match(r.stdout, /after two reads of a missing user: 2 queries/);
  assert.match(r.stdout, /refused: user without a name/);
});

test("the README's cache construction is the example's, verbatim", () => {
  const readme = readFileSync('README.md', 'utf8');
  const example = readFileSync('examples/quickstart.ts', 'utf8');
  const block = /const users = new Cache[\s\S]*?\n\}\);\n/.exec(example)?.[0];
  assert.ok(block !== undefined);
  assert.ok(readme.includes(block), 'README and examples/quickstart.ts disagree on `new Cache(...)`');
});

test('examples/shared-tier.ts: two processes share one load and a set, over a real redis-server', async () => {
  const redis = await startRedis();
  try {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'examples/shared-tier.ts'], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, REDIS_PORT: String(redis.port) } });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /two processes, 1 query: user 1 \/ user 1/);
    assert.match(r.stdout, /after a set in a: b reads renamed, 1 query in all/);
  } finally {
    await redis.stop();
  }
});

test("the README's shared-tier setup is the example's", () => {
  const readme = readFileSync('README.md', 'utf8');
  assert.ok(readme.includes("import { RedisStore } from 'damper/redis';"));
  assert.ok(readme.includes("const users = new Cache<User | undefined>({ ttl: 60_000, shared: { store, namespace: 'users' } });"));
  assert.ok(readFileSync('examples/shared-tier.ts', 'utf8').includes("const users = new Cache<User | undefined>({ ttl: 60_000, shared: { store, namespace: 'users' } });"));
});

test('examples/http.ts: a deadline carried from one tier to the next, a caller with no time left dropped, low priority shed with Retry-After', () => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'examples/http.ts'], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /the inventory was told most of the caller's 800 ms/);
  assert.match(r.stdout, /a caller with 0 ms left: 504, the handler never ran/);
  assert.match(r.stdout, /burst: critical 3\/3 served, low [1-5]\/5 shed with Retry-After 1/);
});
