import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { scenarioSource, sourceWithDamperConfig } from '../src/lab/scenario-source.js';
import { mergeParts, partJson, readPart, type Shard, shardCells, type SweepPart, SweepMergeError } from '../src/lab/sweep/shard.js';
import { runSweep, runSweepPart, SWEEP_VARIANTS, type SweepGrid, sweepJson } from '../src/lab/sweep/sweep.js';
import { renderSweepReport } from '../src/lab/sweep/sweep-report.js';

/**
 * A sweep spread over machines (issue 29, part 5): `--shard I/N` runs a
 * share of the cells, `damper lab merge` puts the parts together into the
 * sweep one run gives, byte for byte, and refuses parts that are not the N
 * parts of one grid.
 */

const storm = JSON.parse(readFileSync('scenarios/retry-storm.json', 'utf8')) as Record<string, unknown>;

/**
 * retry-storm made small, so that a cell costs a tenth of a second: 40 users/s
 * (the server serves 400/s), 30 s of baseline, its slowdown from 30 s, the run
 * ended 80 s in. Only equality matters here, not the verdicts.
 */
const tiny = {
  ...storm,
  name: 'tiny-storm',
  durationS: 80,
  baseline: { fromS: 5, toS: 30 },
  clients: [{ name: 'users', rate: 40, timeoutMs: 2000 }],
  faults: [{ kind: 'slowdown', factor: 4, startS: 30, endS: 40, label: 'the server slows down fourfold (trigger)' }],
  check: { axes: [{ axis: 'load', from: 0.5, to: 1 }, { axis: 'trigger', from: 5, to: 15 }], steps: 2 },
};
const source = scenarioSource(JSON.stringify(tiny), 'tiny-storm.json', join(process.cwd(), 'tiny-storm.json'));
const GRID: SweepGrid = { across: { axis: { kind: 'load' }, from: 0.5, to: 1 }, up: { axis: { kind: 'trigger' }, from: 5, to: 15 }, steps: 2 };

/** The parts of a sharding of GRID, written and read back as the files are. */
async function parts(count: number, seed = 1, grid = GRID): Promise<{ where: string; part: SweepPart }[]> {
  const found: { where: string; part: SweepPart }[] = [];
  for (let index = 1; index <= count; index++) {
    const part = await runSweepPart(source, grid, { seed, runner: 'serial', shard: { index, count } });
    const where = `seed-${seed}/sweep.part-${index}-of-${count}.json`;
    found.push({ where, part: readPart(partJson(part), where) });
  }
  return found;
}

describe('a shard is a fixed share of the row-major cells: each cell in exactly one', () => {
  test('cell k goes to shard k mod N + 1; every cell once over the N shards; sizes differ by one at most', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 144 }), fc.integer({ min: 1, max: 200 }), (total, count) => {
        const shards: Shard[] = Array.from({ length: count }, (_, i) => ({ index: i + 1, count }));
        const all = shards.flatMap((s) => shardCells(total, s));
        assert.deepEqual([...all].sort((a, b) => a - b), Array.from({ length: total }, (_, k) => k));
        for (const s of shards) for (const k of shardCells(total, s)) assert.equal(k % count, s.index - 1);
        const sizes = shards.map((s) => shardCells(total, s).length);
        assert.ok(Math.max(...sizes) - Math.min(...sizes) <= 1, `sizes ${sizes.join(', ')}`);
      }),
    );
  });
});

describe('sharded and merged is the same sweep: byte-identical sweep.json and sweep.html', () => {
  const whole = runSweep(source, GRID, { seed: 1, runner: 'serial' });

  for (const count of [1, 2, 3, 5]) {
    test(`${count} ${count === 1 ? 'shard' : 'shards'}${count > 4 ? ' (more than the 4 cells: one part is empty)' : ''}`, async () => {
      const expected = await whole;
      const found = await parts(count);
      if (count === 5) assert.deepEqual(found[4]!.part.cells, [], 'the fifth share of four cells is empty');
      const { result, check } = mergeParts([...found].reverse());
      assert.equal(check, undefined);
      assert.equal(sweepJson(result), sweepJson(expected));
      assert.equal(renderSweepReport(result), renderSweepReport(expected));
    });
  }

  test('with a configuration, the third variant (the lab’s own settings) travels in the parts too, and threads give the same bytes', async () => {
    const configured = sourceWithDamperConfig(source, 'test/fixtures/careless.config.mjs');
    const options = { seed: 1, runner: 'serial', variants: SWEEP_VARIANTS } as const;
    const expected = await runSweep(configured, GRID, options);
    assert.deepEqual(Object.keys(expected.cells[0]!.variants), ['naive', 'damper', 'damper-lab']);
    const found = await Promise.all([1, 2].map(async (index) => ({ where: `part ${index}`, part: readPart(partJson(await runSweepPart(configured, GRID, { ...options, shard: { index, count: 2 } })), `part ${index}`) })));
    assert.equal(sweepJson(mergeParts(found).result), sweepJson(expected));
    // In worker threads each cell's two runs (its own, and with the lab's settings) go to the pool side by side: the same bytes.
    assert.equal(sweepJson(await runSweep(configured, GRID, { ...options, runner: 'threads' })), sweepJson(expected));
  });

  test('a merge copies a cell whole: a field it does not know passes through', async () => {
    const found = await parts(2);
    const extended = found.map(({ where, part }) => ({ where, part: { ...part, cells: part.cells.map((c) => ({ index: c.index, cell: { ...c.cell, simulatedS: 42 } })) } }));
    for (const cell of mergeParts(extended).result.cells) assert.equal((cell as unknown as { simulatedS: number }).simulatedS, 42);
  });
});

describe('a merge refuses what is not the N parts of one grid, naming what is wrong', () => {
  const refused = (pattern: RegExp) => (e: unknown) => e instanceof SweepMergeError && e.code === 'SWEEP_MERGE' && pattern.test(e.message);
  const three = parts(3);

  test('a part missing, a part given twice, none at all', async () => {
    const [p1, p2, p3] = await three;
    assert.throws(() => mergeParts([p1!, p3!]), refused(/^missing part 2 of 3 \(from --shard 2\/3\); given: 1, 3$/));
    assert.throws(() => mergeParts([p1!]), refused(/^missing parts 2, 3 of 3 \(from --shard 2\/3, 3\/3\); given: 1$/));
    assert.throws(() => mergeParts([p1!, p2!, p2!, p3!]), refused(/^part 2 of 3 given 2 times \(seed-1\/sweep\.part-2-of-3\.json, seed-1\/sweep\.part-2-of-3\.json\)$/));
    assert.throws(() => mergeParts([]), refused(/^no parts to merge/));
  });

  test('parts of another seed, of another sharding, of another scenario file, of a check', async () => {
    const [p1, p2, p3] = await three;
    const [, otherSeed] = await parts(2, 2);
    assert.throws(() => mergeParts([p1!, otherSeed!]), refused(/^seed-2\/sweep\.part-2-of-2\.json is not a part of the same sweep as seed-1\/sweep\.part-1-of-3\.json: seed 2, not 1$/));
    const [, half] = await parts(2);
    assert.throws(() => mergeParts([p1!, half!, p3!]), refused(/is part 2 of 2, seed-1\/sweep\.part-1-of-3\.json part 1 of 3: parts of two shardings/));
    // The same heading, a scenario file changed elsewhere (the server's queue): its identity differs.
    const edited = scenarioSource(JSON.stringify({ ...tiny, servers: { ...(storm.servers as object), maxQueue: 999 } }), 'tiny-storm.json', join(process.cwd(), 'tiny-storm.json'));
    const other = { where: 'edited', part: await runSweepPart(edited, GRID, { seed: 1, runner: 'serial', shard: { index: 2, count: 3 } }) };
    assert.throws(() => mergeParts([p1!, other, p3!]), refused(/^edited is not a part of the same sweep as .*: the scenario file, its damper configuration or the lab’s version differ$/));
    const checkPart = { where: 'check', part: { ...p3!.part, check: { margins: [0, 0] as const, origin: 'declared' as const } } };
    assert.throws(() => mergeParts([p1!, p2!, checkPart]), refused(/^check is not a part of the same sweep as .*: it is from lab check, that from lab sweep$/));
  });

  test('a file that is not a part, or a part that holds cells not its share', async () => {
    assert.throws(() => readPart('{"name": "retry-storm"}', 'retry-storm.json'), refused(/^retry-storm\.json: not a part of a sweep \(no "format": "damper-sweep-part\/1"\)/));
    assert.throws(() => readPart('not json', 'x.json'), refused(/^x\.json: not a part of a sweep \(not JSON\)/));
    const [p1, p2, p3] = await three;
    const tampered = { where: 'tampered', part: { ...p2!.part, cells: [...p2!.part.cells, p1!.part.cells[0]!] } };
    assert.throws(() => mergeParts([p1!, tampered, p3!]), refused(/^tampered: part 2 of 3 holds cells 1, 0, not its share 1$/));
  });
});

describe('through the command line: sweep and check --shard, then merge', () => {
  const main = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), 'damper-shard-'));
  const file = join(dir, 'tiny-storm.json');
  writeFileSync(file, JSON.stringify(tiny));
  const cli = (...args: string[]) =>
    new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [main, 'lab', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('close', (status) => resolve({ status, stdout, stderr }));
    });
  const bytes = (...path: string[]) => readFileSync(join(dir, ...path));

  for (const command of ['sweep', 'check'] as const) {
    test(`lab ${command} --shard 1/2 and 2/2 on two "machines", merged: the bytes of one run${command === 'check' ? ', and its verdict and exit code' : ''}`, async () => {
      const args = command === 'sweep' ? ['sweep', file, '--load', '0.5..1', '--trigger', '5..15', '--steps', '2', '--serial'] : ['check', file, '--serial'];
      const [one, a, b] = await Promise.all([cli(...args, '--out', join(dir, command, 'one')), cli(...args, '--out', join(dir, command, 'a'), '--shard', '1/2'), cli(...args, '--out', join(dir, command, 'b'), '--shard', '2/2')]);
      for (const r of [one, a, b]) assert.equal(r.status, 0, r.stderr + r.stdout);
      assert.match(a.stdout, new RegExp(`^damper lab ${command} tiny-storm, seed 1: share 1 of 2, 2 of the grid's 4 cells$`, 'm'));
      assert.match(b.stdout, /wrote .*sweep\.part-2-of-2\.json$/m);
      const merged = await cli('merge', join(dir, command, 'a'), join(dir, command, 'b', 'sweep.part-2-of-2.json'), '--out', join(dir, command, 'merged'));
      assert.equal(merged.status, one.status, merged.stderr);
      for (const name of ['sweep.json', 'sweep.html']) assert.ok(bytes(command, 'merged', name).equals(bytes(command, 'one', name)), name);
      assert.match(merged.stdout, /^merged 2 parts, 4 cells$/m);
      if (command === 'check') {
        const verdict = (s: string) => s.split('\n').find((l) => /^(NOT )?SAFE/.test(l));
        assert.equal(verdict(merged.stdout), verdict(one.stdout));
        assert.ok(verdict(one.stdout) !== undefined, one.stdout);
      }
      const missing = await cli('merge', join(dir, command, 'a'), '--out', join(dir, command, 'merged'));
      assert.equal(missing.status, 2);
      assert.match(missing.stderr, /^damper: missing part 2 of 2 \(from --shard 2\/2\); given: 1\n$/);
    });
  }

  test('a bad --shard exits 2 with one line, before any run', async () => {
    for (const bad of ['0/4', '5/4', '1/0', 'x', '1/2/3', '-1/2']) {
      const r = await cli('sweep', file, '--load', '0.5..1', '--trigger', '5..15', `--shard=${bad}`);
      assert.equal(r.status, 2, bad);
      assert.match(r.stderr, new RegExp(`^damper: --shard must be I/N, .*1 ≤ I ≤ N \\(e\\.g\\. 2/4\\), got "${bad.replace(/[/]/g, '\\/')}"\\n`), bad);
    }
  });
});
