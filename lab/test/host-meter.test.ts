import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { hostLimits } from '../src/lab/real/host-limits.js';
import { HostRecord, LAG_RESOLUTION_MS } from '../src/lab/real/host-meter.js';
import { LoopProbe, p99Of } from '../src/lab/real/loop-probe.js';
import { ProcessGroup } from '../src/lab/real/process-group.js';
import { wallNowMs } from '../src/lab/real/wall-clock.js';
import type { TestChild } from './fixtures/real/child.js';

const CHILD = fileURLToPath(new URL('./fixtures/real/child.js', import.meta.url));

const sample = (second: number, cpu: number, lag: number | null) => ({ second, cpu, lagP99Ms: lag, lagMaxMs: lag === null ? null : lag * 2 });

describe('what each process takes from the host, second by second (issue 30, item 4)', () => {
  test('samples gather into series: a missing second reads no CPU and no delay, a frozen one no delay', () => {
    const record = new HostRecord();
    record.track('users');
    record.track('redis0');
    record.add('users', sample(0, 0.5, 3));
    record.add('users', sample(2, 0.25, 700));
    record.add('users', sample(3, 0.1, 900));
    record.add('redis0', sample(1, 0.2, null));
    record.excuse('users', 2, 3);
    assert.equal(record.lastSecond('users'), 3);
    assert.equal(record.lastSecond('nobody'), -1);
    assert.deepEqual(record.series(5), [
      { name: 'users', cpu: [0.5, 0, 0.25, 0.1, 0], lagP99Ms: [3, null, null, null, null], lagMaxMs: [6, null, null, null, null] },
      { name: 'redis0', cpu: [0, 0.2, 0, 0, 0], lagP99Ms: [null, null, null, null, null], lagMaxMs: [null, null, null, null, null] },
    ]);
  });

  test('a child busy for a CPU-second reads about a core and a late loop; a frozen child’s delay is excused', async () => {
    const group = new ProcessGroup();
    try {
      const zero = group.startClock();
      const busy = group.fork<TestChild>('busy', CHILD);
      const frozen = group.fork<TestChild>('frozen', CHILD);
      await Promise.all([busy.ready(), frozen.ready()]);
      const now = (): number => Math.floor((wallNowMs() - zero) / 1000);
      // Just past a second's end, with every process's samples up to it in.
      await group.host(now());
      const from = now();
      await group.stop('frozen');
      const { wallMs } = await busy.request({ type: 'spin', cpuMs: 1_000 });
      await group.host(now() + 1);
      await group.cont('frozen');
      const to = now();
      const host = await group.host(to + 2);
      assert.deepEqual(host.map((h) => h.name).sort(), ['busy', 'frozen', 'lab'], 'the lab’s own process too');
      const [b, f] = ['busy', 'frozen'].map((name) => host.find((h) => h.name === name));
      const spun = b!.cpu.slice(from, to + 2);
      const used = spun.reduce((sum, x) => sum + x, 0);
      // Bounded, tolerant: the machine is shared, and a second's reading is noisy.
      assert.ok(used > 0.8 && used < 1.6, `about one CPU-second in all: ${spun}`);
      // The spin began just past a second's end; the reading after it spreads its CPU over the seconds it took: about a core each on an idle machine, less on a busy one, where it took longer.
      assert.ok(Math.max(...spun) > (0.7 * 1_000) / (wallMs + 1_000), `at the rate it ran (1000 ms of CPU in ${Math.round(wallMs)} ms): ${spun}`);
      const late = Math.max(...b!.lagMaxMs.slice(from, to + 2).map((x) => x ?? 0));
      assert.ok(late > 0.8 * Math.min(wallMs, 1_000), `the loop was blocked for the spin (${Math.round(wallMs)} ms): max delay ${late} ms`);
      assert.ok(hostLimits(host, 2).limits.some((l) => l.reason === 'loop-late' && l.worst.process === 'busy'));
      assert.deepEqual(f!.lagP99Ms.slice(from, to + 1), Array(to + 1 - from).fill(null), 'the freeze was ours, not the host’s');
      assert.ok(f!.cpu.slice(from + 1, to).every((x) => x < 0.2), `a frozen process uses no CPU: ${f!.cpu}`);
    } finally {
      await group.close();
    }
  });

  test('a window’s p99 is read at the rank Node’s histogram reads it: one hiccup among a second’s probes is its max, not its p99', () => {
    const second = [...Array(99).fill(0.5), 25].sort((a, b) => a - b);
    assert.deepEqual([p99Of(second), second.at(-1)], [0.5, 25]);
    assert.equal(p99Of([...Array(98).fill(0.5), 25, 30]), 25, 'two: the second worst');
    assert.equal(p99Of([3, 700]), 700, 'a window the loop was blocked in: its few probes');
    assert.equal(p99Of([4]), 4);
  });

  test('a block that ends a window is read in that window, once, even when the reading runs before the probe', async () => {
    const probe = new LoopProbe(LAG_RESOLUTION_MS);
    try {
      await sleep(50);
      const end = wallNowMs() + 500;
      while (wallNowMs() < end);
      // Straight after the block, before any timer: the reading comes first, the probe's record of the block not yet made.
      const blocked = probe.window();
      assert.ok(blocked.maxMs >= 450 && blocked.p99Ms >= 450, `a 500-ms block read as ${blocked.maxMs} ms (max), ${blocked.p99Ms} ms (p99)`);
      await sleep(30);
      const after = probe.window();
      assert.ok(after.maxMs < 250, `the next window counted the block again: ${after.maxMs} ms`);
    } finally {
      probe.close();
    }
  });

  test('a keeper meters its binary’s whole process tree from /proc, and a freeze stops all of it', async () => {
    const group = new ProcessGroup({ selfName: null });
    /** A process's state letter and its children, from /proc. */
    const state = (pid: number): string => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0]!;
    const children = (pid: number): number[] => readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number);
    try {
      const zero = group.startClock();
      // The CPU is burnt by a child of the binary, as PostgreSQL's backends do its work.
      const burner = group.spawn('burner', 'sh', ['-c', 'sh -c "while :; do :; done" & wait']);
      const { pid } = await burner.ready();
      const now = (): number => Math.floor((wallNowMs() - zero) / 1000);
      const from = now() + 1;
      const host = await group.host(from + 2);
      const { cpu, lagP99Ms } = host.find((h) => h.name === 'burner')!;
      const used = cpu.slice(from).reduce((sum, x) => sum + x, 0);
      // A busy loop gets its share of a shared machine: a core when it is idle, less when it is not.
      assert.ok(used > 0.1 && used < 2.4, `the loop’s CPU, counted in its parent’s series: ${cpu}`);
      assert.ok(lagP99Ms.every((lag) => lag === null), 'no event loop to read');
      const inner = children(pid);
      assert.equal(inner.length, 1);
      await group.stop('burner');
      // A signal takes effect when the process next runs: wait for it, bounded.
      for (const deadline = performance.now() + 2_000; [pid, inner[0]!].some((p) => state(p) !== 'T') && performance.now() < deadline; ) await sleep(10);
      assert.deepEqual([state(pid), state(inner[0]!)], ['T', 'T'], 'the binary and its child frozen');
      await group.cont('burner');
      await group.close();
      assert.deepEqual([pid, inner[0]!].filter((p) => existsSync(`/proc/${p}`) && state(p) !== 'Z'), [], 'nothing of it left');
    } finally {
      await group.close();
    }
  });
});
