import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadScenario } from '../src/lab/lab.js';
import { type ServiceScenario } from '../src/lab/world/service.js';
import { Recorder } from '../src/lab/judge/metrics.js';
import { runIsolated } from '../src/lab/engine/parallel.js';
import { Database, DatabaseOverloadedError, QueryAbandonedError, type Row } from '../src/lab/world/database.js';
import { poisson } from '../src/lab/engine/traffic.js';
import { ZipfKeys } from '../src/lab/world/zipf.js';
import { seededRandom, VirtualClock } from 'damper';

describe('simulated database', () => {
  const setup = (maxQueue = 10) => {
    const clock = new VirtualClock();
    const recorder = new Recorder(60);
    // 2 workers at 100 q/s: each query takes 20 ms.
    const db = new Database(clock, recorder, { capacityQps: 100, workers: 2, maxQueue });
    return { clock, recorder, db };
  };

  test('serves `workers` queries at a time; latency grows with the queue', async () => {
    const { clock, db } = setup();
    const done: number[] = [];
    for (let i = 0; i < 6; i++) void db.query('k').then(() => done.push(clock.now()));
    await clock.advance(100);
    assert.deepEqual(done, [20, 20, 40, 40, 60, 60]);
  });

  test('refuses at once beyond maxQueue', async () => {
    const { clock, db } = setup(1);
    // Two served, one queued, the fourth refused without waiting.
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((k) => db.query(k));
    assert.ok((await d!) instanceof DatabaseOverloadedError);
    assert.equal(clock.now(), 0);
    await clock.advance(40);
    for (const p of [a, b, c]) assert.equal(((await p!) as Row).valid, true);
  });

  test('a caller that gives up still costs the database its work', async () => {
    const { clock, db } = setup();
    const a = db.query('a', { timeoutMs: 5 });
    const b = db.query('b', { timeoutMs: 5 });
    await clock.advance(6);
    assert.ok((await a) instanceof QueryAbandonedError);
    assert.ok((await b) instanceof QueryAbandonedError);
    // Both abandoned queries still hold the workers until 20 ms.
    let at = 0;
    void db.query('c').then(() => (at = clock.now()));
    await clock.advance(100);
    assert.equal(at, 40);
  });

  test('answers with the row as it is when the query is served', async () => {
    const { clock, db } = setup();
    const p = db.query('k');
    db.write('k', false);
    await clock.advance(20);
    assert.equal(((await p) as Row).valid, false);
  });

  test('counts every query that reaches it, refused or not', async () => {
    const { clock, db, recorder } = setup(0);
    for (let i = 0; i < 5; i++) void db.query('k');
    await clock.advance(100);
    assert.equal(recorder.series().originQps[0], 5);
  });
});

describe('traffic', () => {
  test('Poisson counts have the asked mean, small and large', () => {
    const random = seededRandom(3);
    for (const lambda of [0.5, 2, 50]) {
      let sum = 0;
      for (let i = 0; i < 20_000; i++) sum += poisson(lambda, random);
      assert.ok(Math.abs(sum / 20_000 - lambda) < lambda * 0.05, `mean ${sum / 20_000} for ${lambda}`);
    }
  });

  test('keys are picked by their shares, the rest evenly over a uniform tail', () => {
    const picker = new ZipfKeys(10, 0, [{ key: 'hot', share: 0.5 }]);
    const random = seededRandom(4);
    const counts = new Map<string, number>();
    for (let i = 0; i < 100_000; i++) {
      const k = picker.pick(random);
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    assert.ok(Math.abs(counts.get('hot')! / 100_000 - 0.5) < 0.01);
    assert.equal(counts.size, 11);
    for (let i = 0; i < 10; i++) assert.ok(Math.abs(counts.get(`key:${i}`)! / 100_000 - 0.05) < 0.005);
  });
});

describe('client populations', () => {
  test('clients retry failed requests: retries add offered load in a storm', async () => {
    const base = (await loadScenario('facebook-2010')) as ServiceScenario;
    const short = { ...base, durationS: 200, faults: base.faults.filter((f) => f.kind === 'invalid-value') };
    const retrying = { ...short, clients: short.clients.map((c) => ({ ...c, retries: 2, retryDelayMs: 50 })) };
    const [plain, withRetries] = await Promise.all([runIsolated(short, 1), runIsolated(retrying, 1)]);
    const offered = (r: typeof plain) => r.variants.naive.summary.simulatedRequests;
    assert.ok(offered(withRetries) > offered(plain) * 1.5, `${offered(withRetries)} vs ${offered(plain)}`);
    // damper answers from its cache: nothing fails, so nothing is retried.
    assert.equal(withRetries.variants.damper.summary.simulatedRequests, plain.variants.damper.summary.simulatedRequests);
  });
});
