import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { seriesCsv, seriesFile } from '../src/lab/report/series-csv.js';
import { labRunFixture } from './fixtures/lab-run.js';
import { damperCli } from './support/cli.js';

describe('--series: a run analysable outside the lab', () => {
  test('one row per second, with the best possible, the origin capacity and the requests in flight', () => {
    const run = labRunFixture().scenarios[1]!;
    const lines = seriesCsv(run, 'naive').trimEnd().split('\n');
    assert.equal(lines[0], 'second,offered,goodput,best_goodput,errors,origin_qps,origin_capacity_qps,p99_ms,in_flight');
    assert.equal(lines.length, run.durationS + 1);
    const s = run.variants.naive.series;
    const rows = lines.slice(1).map((l) => l.split(','));
    for (let t = 0; t < run.durationS; t++) {
      assert.equal(Number(rows[t]![8]), s.inFlight[t]);
      assert.equal(Number(rows[t]![3]), s.bestGoodput[t]);
      assert.equal(Number(rows[t]![6]), run.originCapacity[t]);
      assert.equal(rows[t]![7], s.p99Ms[t] === null ? '' : String(s.p99Ms[t]), 'no p99: an empty cell');
    }
    assert.ok(s.p99Ms.includes(null), 'the fixture has seconds with no p99');
    assert.equal(seriesFile(run, 'damper'), 'series/retry-storm.damper.csv');
  });

  test('a peer stack that ran (--stack) has its CSV, its knobs after dots in the file name; one that did not run has none', () => {
    const base = labRunFixture().scenarios[1]!;
    const run = { ...base, stacks: [{ name: 'cockatiel:bulkhead=8', run: base.variants.naive }, { name: 'bentocache', problem: 'no cache' }] };
    assert.equal(seriesCsv(run, 'cockatiel:bulkhead=8'), seriesCsv(base, 'naive'));
    assert.equal(seriesFile(run, 'cockatiel:bulkhead=8'), 'series/retry-storm.cockatiel.bulkhead=8.csv');
    assert.throws(() => seriesCsv(run, 'bentocache'), /retry-storm has no run named bentocache/);
  });

  test('damper lab --series writes every scenario × variant next to results.json', () => {
    const dir = mkdtempSync(join(tmpdir(), 'damper-series-'));
    const file = join(dir, 'short.json');
    const doc = JSON.parse(readFileSync('scenarios/retry-storm.json', 'utf8')) as Record<string, unknown>;
    writeFileSync(file, JSON.stringify({ ...doc, name: 'short', durationS: 160 }));
    const r = damperCli('lab', file, '--series', '--out', dir);
    assert.equal(r.status, 0, r.stderr);
    for (const v of ['naive', 'damper']) {
      const csv = readFileSync(join(dir, 'series', `short.${v}.csv`), 'utf8').trimEnd().split('\n');
      assert.equal(csv.length, 161);
      // The slowdown (120–150 s) halves what the server can do: the best possible says so.
      assert.ok(Number(csv[1 + 130]!.split(',')[3]) < 100);
      const inFlight = csv.slice(1).map((row) => Number(row.split(',')[8]));
      assert.ok(inFlight.every((n) => Number.isInteger(n) && n >= 0), `${v}: in flight is a count`);
    }
    const again = damperCli('lab', '--series', 'sweep');
    assert.equal(again.status, 2);
    assert.match(again.stderr, /^damper: lab sweep takes no --series: it is an option of lab$/m);
  });
});
