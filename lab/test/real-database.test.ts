import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { withDamperConfig } from '../src/lab/damper-config.js';
import { compareVariant, verdictClass } from '../src/lab/judge/fidelity.js';
import { loadScenario } from '../src/lab/lab.js';
import { runFidelity } from '../src/lab/real/fidelity-run.js';
import { systemClock } from 'damper';
import { DatabasePool } from '../src/lab/real/database-pool.js';
import { startPgbouncer } from '../src/lab/real/pgbouncer.js';
import { startPostgres } from '../src/lab/real/postgres.js';
import { ProcessGroup } from '../src/lab/real/process-group.js';
import { runReal } from '../src/lab/real/real-runner.js';
import { wallNowMs } from '../src/lab/real/wall-clock.js';
import { OVERLOADED, QueryError } from '../src/lab/world/database.js';

/**
 * The real runner's database and in-process cache (issue 30): facebook-2010's
 * system (test/fixtures/real-config-cache.json: one web server, the cache
 * in its memory, PostgreSQL behind pgbouncer, an invalid value of the hot
 * key for 10 s) run in virtual time and for real, and the PostgreSQL and
 * pgbouncer each run starts are gone after it, however the run ends.
 */

/** The pids of the PostgreSQL servers and pgbouncers a real run started (their data directory, their configuration, in a run's temp dir), read from /proc. */
function runsDatabase(): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .flatMap((d) => {
      try {
        const args = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
        return args.some((a) => a.includes('/damper-real-') && (a.endsWith('/postgres/data') || a.endsWith('/pgbouncer/pgbouncer.ini'))) ? [Number(d)] : [];
      } catch {
        return [];
      }
    });
}

/** The run's temp dirs left in the temp dir. */
function runDirs(): string[] {
  return readdirSync(tmpdir()).filter((d) => d.startsWith('damper-real-') && !d.startsWith('damper-real-cli-'));
}

describe('a real run with a database and a cache agrees with its simulation: the same verdict, goodput during the trigger within 10 points, recovery within max(3 s, 25 %), amplification within 25 %', () => {
  // Run by hand (DAMPER_REAL_DATABASE=1), not in the suite: about 60 CPU s and 100 s of real time, and the suite is
  // CPU-bound at its 12-minute budget (2026-12-05: 591 s with it, idle); issue 30 asks the suite for one real run,
  // real.test's storm. It was skipped first for a jam in 2 of 21 damper runs; a cause that fits was found in the
  // library and fixed (damperInterceptor heard no deadline for an attempt undici had not started, one waiting for a
  // connection: nodejs/undici#386), and 6 runs since agreed (docs/lab.md, "Real runs", "Measured").
  test('real-config-cache: naive stuck (the fixer deletes keys on errors) and damper healthy (the last known good kept), both ways, each figure within its bar', { skip: process.env.DAMPER_REAL_DATABASE === '1' ? false : 'about 60 CPU s of a CPU-bound suite: DAMPER_REAL_DATABASE=1 runs it' }, async () => {
    const scenario = await loadScenario('test/fixtures/real-config-cache.json');
    const before = runDirs();
    const fidelity = await runFidelity(scenario, { scale: 1, timeScale: 1 }, { seed: 1, runs: 1 });
    for (const variant of ['naive', 'damper'] as const) {
      const v = fidelity.variants[variant]!;
      const row = compareVariant(scenario, v);
      const words = row.figures.map((f) => `${f.figure}: simulated ${JSON.stringify(f.simulated)}, real ${JSON.stringify(f.real)}, ${f.agrees === false ? 'DISAGREES' : 'agrees'}`).join('; ');
      assert.equal(verdictClass(scenario, v.simulated), variant === 'naive' ? 'stuck' : 'stayed healthy', `${variant}'s simulation: ${words}`);
      assert.ok(row.agrees, `${variant}: ${words}`);
    }
    assert.deepEqual(runsDatabase(), [], 'no PostgreSQL or pgbouncer of a run is left');
    assert.deepEqual(runDirs().filter((d) => !before.includes(d)), [], 'no run dir is left');
  });
});

describe('nothing a real run starts outlives it', () => {
  test('a run that fails once its PostgreSQL and pgbouncer are up (a server cannot load its configuration) stops both and removes their files', async () => {
    const scenario = await loadScenario('test/fixtures/real-config-cache.json');
    const dir = mkdtempSync(join(tmpdir(), 'damper-config-'));
    try {
      const config = join(dir, 'broken.mjs');
      writeFileSync(config, "export default () => { throw new Error('no configuration today'); };\n");
      const before = runDirs();
      await assert.rejects(runReal(withDamperConfig(scenario, config), 'damper', { seed: 1 }), /server0 exited|no configuration today/);
      assert.deepEqual(runsDatabase(), [], 'no PostgreSQL or pgbouncer of a run is left');
      assert.deepEqual(runDirs().filter((d) => !before.includes(d)), [], 'no run dir is left');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('several servers share the database’s one bound through pgbouncer, as the simulated database has one', () => {
  test('two servers’ pools, one worker and a queue of one: never more than two queries served or queued, the others refused as overloaded; the group stops pgbouncer', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'damper-real-'));
    const group = new ProcessGroup({ selfName: null });
    // A query of 1 s: four logins at once reach pgbouncer long before the first one's slot frees.
    const shape = { capacityQps: 1, workers: 1, maxQueue: 1 };
    const pools: DatabasePool[] = [];
    try {
      const database = await startPostgres(group, dir, ['k'], shape.workers);
      await database.close();
      const { port } = await startPgbouncer(group, dir, database.port, shape);
      pools.push(new DatabasePool(systemClock, port, shape), new DatabasePool(systemClock, port, shape));
      for (const p of pools) p.sent.zero = wallNowMs();
      const started = performance.now();
      // Each server alone holds no more than the bound (2): only pgbouncer can refuse these.
      const outcomes = await Promise.all(pools.flatMap((p) => [p, p]).map((p) => p.query('k').then((o) => ({ o, ms: performance.now() - started }))));
      const served = outcomes.filter(({ o }) => !(o instanceof QueryError));
      // The bound holds: never more than workers + maxQueue served or queued, every other query refused as overloaded.
      // Not exactly two served: pgbouncer may still count a client that is leaving (a slot about to free, docs/lab.md
      // "What runs"), and CI's runs read one served in 2 of 4 (the others refused at once, in ~10 ms).
      assert.ok(served.length >= 1 && served.length <= 2, JSON.stringify(outcomes));
      assert.equal(outcomes.filter(({ o }) => o === OVERLOADED).length, 4 - served.length, JSON.stringify(outcomes));
      // One worker for both servers: a second answer comes a service time after the first.
      if (served.length === 2) assert.ok(Math.max(...served.map((s) => s.ms)) >= 1900, JSON.stringify(outcomes));
      assert.equal(pools[0]!.sent.values.reduce((a, b) => a + b, 0) + pools[1]!.sent.values.reduce((a, b) => a + b, 0), 4, 'every query counted, refused or not');
      assert.equal(runsDatabase().length, 2, 'PostgreSQL and pgbouncer');
    } finally {
      await Promise.all(pools.map((p) => p.close()));
      await group.close();
      assert.deepEqual(runsDatabase(), [], 'no PostgreSQL or pgbouncer of the run is left');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
