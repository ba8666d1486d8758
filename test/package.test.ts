import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';

// The package a user installs (issue 14, item 1): the sources and their build
// (npm test's fresh dist/, copied) in a staging copy (the checkout's dist/ is
// left alone), packed with `npm pack`,
// installed into an empty project, then used from CommonJS (`require`) and from
// an ES module (`import`), each type-checked by TypeScript with `nodenext`
// resolution against the installed package's own declarations.

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..', '..');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
let work: string;
let consumer: string;

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'damper-package-'));
  const staging = join(work, 'staging');
  mkdirSync(staging);
  for (const f of ['package.json', 'README.md', 'CHANGELOG.md', 'LICENSE', 'tsconfig.build.json', 'tsconfig.json']) cpSync(join(ROOT, f), join(staging, f));
  cpSync(join(ROOT, 'src'), join(staging, 'src'), { recursive: true });
  // The build `npm test` has just made from these sources (its first job), copied: building it again here
  // cost ~9 s of CPU on every Node the suite runs on (issue 25). Without one, the staging copy is built.
  if (existsSync(join(ROOT, 'dist', 'index.js'))) cpSync(join(ROOT, 'dist'), join(staging, 'dist'), { recursive: true });
  else {
    // The checkout's dependencies, for the compiler's types (npm pack never includes node_modules).
    symlinkSync(join(ROOT, 'node_modules'), join(staging, 'node_modules'), 'dir');
    await run(process.execPath, [TSC, '-p', join(staging, 'tsconfig.build.json')], { cwd: staging });
  }
  // --ignore-scripts: the staging copy is built already; a prepack build would need its dev dependencies.
  const packed = await run('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', work], { cwd: staging });
  const tarball = join(work, packed.stdout.trim().split('\n').at(-1)!);
  consumer = join(work, 'consumer');
  mkdirSync(consumer);
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
  // Its dependencies come from the npm cache that `npm ci` filled: no network needed.
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', tarball], { cwd: consumer });
});

after(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe('the packed package, installed into an empty project', () => {
  test('CommonJS can require every entry point, and gets the same classes as import', async () => {
    writeFileSync(
      join(consumer, 'use.cjs'),
      `const damper = require('damper');
const cache = new damper.Cache({ ttl: 1000 });
cache.get('k', async () => 42).then(async (v) => {
  const esm = await import('damper');
  // The optional entries need their peer dependency to load; each must resolve for require.
  const entries = ['damper/redis', 'damper/postgres', 'damper/sqlite', 'damper/testing', 'damper/otel', 'damper/http', 'damper/fastify'].map((e) => require.resolve(e).endsWith('.js'));
  // damper/http loads without undici (not installed here): only damperFetch needs it, at its first request; damper/fastify without fastify.
  const http = require('damper/http');
  const fastify = require('damper/fastify');
  console.log(JSON.stringify({ v, same: esm.Cache === damper.Cache, error: new damper.ConfigError('x') instanceof esm.DamperError, entries, http: typeof http.HttpDependency === 'function' && typeof http.damperInterceptor === 'function' && typeof http.damperAdmission === 'function' && typeof fastify.damperFastify === 'function' }));
});`,
    );
    const { stdout } = await run(process.execPath, ['use.cjs'], { cwd: consumer });
    assert.deepEqual(JSON.parse(stdout), { v: 42, same: true, error: true, entries: [true, true, true, true, true, true, true], http: true }, 'one copy of the library, whichever way it is loaded');
  });

  test('an ES module can import it', async () => {
    writeFileSync(join(consumer, 'use.mjs'), `import { CircuitBreaker } from 'damper';\nconsole.log(await new CircuitBreaker().execute(async () => 'ok'));`);
    const { stdout } = await run(process.execPath, ['use.mjs'], { cwd: consumer });
    assert.equal(stdout.trim(), 'ok');
  });

  test('an optional entry used without its peer says in one line what to install (none of the optional peers is installed here)', async () => {
    writeFileSync(
      join(consumer, 'peers.mjs'),
      `const said = {};
for (const entry of ['damper/redis', 'damper/otel']) {
  try {
    await import(entry);
    said[entry] = 'loaded';
  } catch (e) {
    said[entry] = { code: e.code, message: e.message };
  }
}
const { damperFetch } = await import('damper/http');
const fetch = damperFetch({ upstreams: ['http://127.0.0.1:9'] });
try {
  await fetch('http://127.0.0.1:9/');
  said.damperFetch = 'sent';
} catch (e) {
  said.damperFetch = { code: e.code, message: e.message };
}
console.log(JSON.stringify(said));`,
    );
    const { stdout } = await run(process.execPath, ['peers.mjs'], { cwd: consumer });
    const said = JSON.parse(stdout) as Record<string, { code: string; message: string }>;
    const peers = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { peerDependencies: Record<string, string> }).peerDependencies;
    for (const [entry, peer] of [['damper/redis', 'ioredis'], ['damper/otel', '@opentelemetry/api'], ['damperFetch', 'undici']] as const) {
      assert.deepEqual(said[entry], { code: 'MISSING_PEER', message: `${entry} needs the package ${peer} (${peers[peer]}), which is not installed: npm install ${peer}` }, entry);
    }
  });

  test('both kinds of consumer type-check with nodenext resolution, the package’s declarations included', async () => {
    writeFileSync(join(consumer, 'cjs.cts'), `import damper = require('damper');\nconst n: Promise<number> = new damper.Cache<number>({ ttl: 1_000 }).get('k', async () => 1);\nvoid n;\n`);
    writeFileSync(join(consumer, 'esm.mts'), `import { Cache, type CacheOptions } from 'damper';\nconst o: CacheOptions<number> = { ttl: 1_000 };\nconst n: Promise<number> = new Cache<number>(o).get('k', async () => 1);\nvoid n;\n`);
    writeFileSync(join(consumer, 'wrong.mts'), `import { Cache } from 'damper';\nconst n: Promise<string> = new Cache<number>().get('k', async () => 1);\nvoid n;\n`);
    const options = { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, skipLibCheck: false, types: ['node'], typeRoots: [join(ROOT, 'node_modules', '@types')] };
    writeFileSync(join(consumer, 'tsconfig.json'), JSON.stringify({ compilerOptions: options, files: ['cjs.cts', 'esm.mts'] }));
    await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: consumer });
    // The check can fail: a wrong type in a consumer is reported against the package's types.
    writeFileSync(join(consumer, 'tsconfig.wrong.json'), JSON.stringify({ compilerOptions: options, files: ['wrong.mts'] }));
    await assert.rejects(run(process.execPath, [TSC, '-p', 'tsconfig.wrong.json'], { cwd: consumer }), (e: { stdout?: string }) => /TS2322/.test(e.stdout ?? ''));
  });

  test('source maps and declaration maps point at sources the package ships; LICENSE and CHANGELOG are in it', () => {
    const installed = join(consumer, 'node_modules', 'damper');
    for (const map of ['dist/index.js.map', 'dist/index.d.ts.map', 'dist/cache/cache.js.map', 'dist/cache/cache.d.ts.map', 'dist/stores/redis.d.ts.map']) {
      const { sources } = JSON.parse(readFileSync(join(installed, map), 'utf8')) as { sources: string[] };
      for (const source of sources) assert.ok(existsSync(resolve(dirname(join(installed, map)), source)), `${map} points at ${source}, which the package does not ship`);
    }
    for (const f of ['LICENSE', 'CHANGELOG.md', 'README.md']) assert.ok(existsSync(join(installed, f)), f);
    const pkg = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as { sideEffects?: unknown; keywords?: unknown };
    assert.equal(pkg.sideEffects, false, 'bundlers may drop what a service does not import');
    assert.ok(Array.isArray(pkg.keywords) && pkg.keywords.length > 0);
  });

  test('a library install carries no lab: no lab code, no chart or schema library among its dependencies', async () => {
    const installed = join(consumer, 'node_modules', 'damper');
    for (const gone of ['dist/lab', 'dist/cli', 'scenarios', 'src/lab', 'src/cli']) assert.equal(existsSync(join(installed, gone)), false, `${gone} is the lab's, not the library's`);
    const { stdout } = await run('npm', ['ls', '--all', '--json'], { cwd: consumer });
    const names = new Set<string>();
    const walk = (deps: Record<string, { dependencies?: Record<string, unknown> }> | undefined): void => {
      for (const [name, dep] of Object.entries(deps ?? {})) {
        names.add(name);
        walk(dep.dependencies as never);
      }
    };
    walk((JSON.parse(stdout) as { dependencies?: Record<string, { dependencies?: Record<string, unknown> }> }).dependencies);
    for (const lab of ['uplot', 'zod', 'damper-lab']) assert.equal(names.has(lab), false, `npm ls shows ${lab}`);
    assert.ok(names.has('lru-cache'), 'the library’s own dependency is there');
  });

  test('the exports map gives every entry a condition a CommonJS consumer resolves', () => {
    const pkg = JSON.parse(readFileSync(join(consumer, 'node_modules', 'damper', 'package.json'), 'utf8')) as { exports: Record<string, Record<string, string>> };
    for (const [entry, conditions] of Object.entries(pkg.exports)) {
      assert.ok('default' in conditions || 'require' in conditions, `${entry} has no condition for require`);
      assert.equal(Object.keys(conditions)[0], 'types', `${entry}: "types" comes first, as TypeScript requires`);
    }
  });
});
