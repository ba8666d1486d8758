import assert from 'node:assert/strict';
import { spawn as spawnProcess, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { freePort, LOOPBACK } from '../src/lab/real/loopback.js';
import { ProcessGroup } from '../src/lab/real/process-group.js';
import { RealProcessError } from '../src/lab/real/real-process.js';
import { openGroups } from '../src/lab/real/shutdown-guard.js';
import type { TestChild } from './fixtures/real/child.js';

const CHILD = fileURLToPath(new URL('./fixtures/real/child.js', import.meta.url));
const HOLDER = fileURLToPath(new URL('./fixtures/real/holder.js', import.meta.url));

/** Whether `pid` is a live process: not gone, and not a zombie nobody has reaped yet (an orphan's reaper may be slow, or absent in a container). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** Waits until every pid is gone, polling, for at most `ms`; the ones still alive then. */
async function survivors(pids: readonly number[], ms: number): Promise<number[]> {
  const deadline = performance.now() + ms;
  for (;;) {
    const left = pids.filter(alive);
    if (left.length === 0 || performance.now() > deadline) return left;
    await sleep(20);
  }
}

/** Whether `port` on loopback accepts a connection. */
async function accepts(port: number): Promise<boolean> {
  const socket = connect({ host: LOOPBACK, port });
  try {
    await once(socket, 'connect');
    return true;
  } catch {
    return false;
  } finally {
    socket.destroy();
  }
}

/** A promise's state now: what a race with an already settled one says. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  const pending = Symbol('pending');
  return (await Promise.race([promise.then(() => true, () => true), Promise.resolve(pending)])) !== pending;
}

const hasRedis = spawnSync('redis-server', ['--version']).status === 0;

describe('a real run leaves no process behind (issue 30)', () => {
  test('children forked and closed: none left, and the guard goes with the last open group', async () => {
    const listeners = process.listenerCount('SIGINT');
    const group = new ProcessGroup({ selfName: null });
    assert.equal(process.listenerCount('SIGINT'), listeners + 1, 'an open group guards Ctrl-C');
    const children = [group.fork<TestChild>('a', CHILD), group.fork<TestChild>('b', CHILD)];
    const ready = await Promise.all(children.map((c) => c.ready()));
    const stats = await children[0]!.request({ type: 'stats' });
    assert.deepEqual(stats, { pid: children[0]!.pid, port: ready[0]!.port }, 'a typed request answered by the child');
    await group.close();
    await group.close(); // idempotent
    assert.deepEqual(ready.map((r) => r.pid).filter(alive), []);
    assert.equal(openGroups(), 0);
    assert.equal(process.listenerCount('SIGINT'), listeners, 'Node’s own Ctrl-C again');
    assert.equal(await settled(group.failure), false, 'a close is no failure');
  });

  test('a stopped (SIGSTOP) child is closed too, without waiting out the grace period', async () => {
    const group = new ProcessGroup({ selfName: null, graceMs: 10_000 });
    const child = group.fork<TestChild>('frozen', CHILD);
    const { pid } = await child.ready();
    await group.stop('frozen');
    const started = performance.now();
    await group.close();
    assert.equal(alive(pid), false);
    assert.ok(performance.now() - started < 5_000, 'SIGCONT first, so SIGTERM works at once');
  });

  test('a child that ignores SIGTERM is killed after the grace period', async () => {
    const group = new ProcessGroup({ selfName: null, graceMs: 300 });
    const child = group.fork<TestChild>('stubborn', CHILD, ['0', 'ignore-sigterm']);
    const { pid } = await child.ready();
    const started = performance.now();
    await group.close();
    assert.equal(alive(pid), false);
    assert.ok(performance.now() - started >= 290, 'it had its grace period');
  });

  test('a keeper-spawned binary is stopped with its group', async () => {
    const group = new ProcessGroup({ selfName: null });
    const sleeper = group.spawn('sleeper', 'sleep', ['1000']);
    const { pid } = await sleeper.ready();
    assert.equal(sleeper.serverPid, pid);
    assert.ok(alive(pid) && alive(sleeper.pid!));
    await group.close();
    assert.deepEqual([pid, sleeper.pid!].filter(alive), []);
  });

  for (const [signal, status] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
    test(`${signal} to the lab stops every process of its group, then the lab exits with ${status}`, async () => {
      const holder = spawnProcess(process.execPath, [HOLDER], { stdio: ['ignore', 'pipe', 'inherit'] });
      const [line] = (await once(holder.stdout, 'data')) as [Buffer];
      const { pids } = JSON.parse(line.toString()) as { pids: number[] };
      assert.equal(pids.length, 4, 'two children, a keeper and its sleep');
      assert.deepEqual(pids.filter((p) => !alive(p)), []);
      holder.kill(signal);
      const [code] = (await once(holder, 'exit')) as [number | null];
      assert.equal(code, status);
      assert.deepEqual(await survivors(pids, 5_000), []);
    });
  }

  test('an uncaught exception in the lab: its exit tells every process to go', async () => {
    const holder = spawnProcess(process.execPath, [HOLDER, 'throw'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const [line] = (await once(holder.stdout, 'data')) as [Buffer];
    const { pids } = JSON.parse(line.toString()) as { pids: number[] };
    const [code] = (await once(holder, 'exit')) as [number | null];
    assert.equal(code, 1);
    assert.deepEqual(await survivors(pids, 5_000), []);
  });

  test('SIGKILL of the lab: its children leave by themselves, and the keeper stops its binary', async () => {
    const holder = spawnProcess(process.execPath, [HOLDER], { stdio: ['ignore', 'pipe', 'inherit'] });
    const [line] = (await once(holder.stdout, 'data')) as [Buffer];
    const { pids } = JSON.parse(line.toString()) as { pids: number[] };
    holder.kill('SIGKILL');
    await once(holder, 'exit');
    // The keeper gives its sleep the grace period (SIGTERM is enough for sleep).
    assert.deepEqual(await survivors(pids, 10_000), []);
  });
});

describe('faults on loopback: stop, continue, kill and restart', () => {
  test('a restarted server comes back on the port in its args, and the kill is no failure', async () => {
    const group = new ProcessGroup({ selfName: null });
    try {
      const port = await freePort();
      const server = group.fork<TestChild>('server', CHILD, [String(port)]);
      const first = await server.ready();
      assert.equal(first.port, port);
      await group.kill('server');
      assert.equal(alive(first.pid), false);
      assert.equal(await accepts(port), false);
      const second = (await group.restart('server')) as TestChild['ready'];
      assert.deepEqual([second.port, second.pid === first.pid], [port, false]);
      assert.equal((await server.request({ type: 'stats' })).pid, second.pid, 'the handle reaches the new process');
      assert.equal(await accepts(port), true);
      assert.equal(await settled(group.failure), false);
    } finally {
      await group.close();
    }
  });

  test('a frozen child answers nothing until it is continued', async () => {
    const group = new ProcessGroup({ selfName: null });
    try {
      const child = group.fork<TestChild>('server', CHILD);
      await child.ready();
      await group.stop('server');
      await assert.rejects(child.request({ type: 'stats' }, { timeoutMs: 300 }), (e: unknown) => e instanceof RealProcessError && e.code === 'PROCESS_REQUEST');
      await group.cont('server');
      assert.equal((await child.request({ type: 'stats' })).pid, child.pid);
    } finally {
      await group.close();
    }
  });

  test('redis-server through a keeper: killed, restarted on its port, frozen and thawed', { skip: !hasRedis && 'redis-server is not on PATH' }, async () => {
    const group = new ProcessGroup({ selfName: null });
    try {
      const port = await freePort();
      const redis = group.spawn('redis0', 'redis-server', ['--port', String(port), '--bind', LOOPBACK, '--save', '', '--appendonly', 'no'], { readyWhen: { kind: 'port', port } });
      const { pid } = await redis.ready();
      assert.equal(await accepts(port), true);
      await group.kill('redis0');
      assert.deepEqual(await survivors([pid], 2_000), []);
      const again = (await group.restart('redis0')) as { pid: number };
      assert.notEqual(again.pid, pid);
      assert.equal(await accepts(port), true);
      await group.stop('redis0');
      assert.equal(readFileSync(`/proc/${again.pid}/stat`, 'utf8').split(') ')[1]![0], 'T', 'stopped');
      await group.cont('redis0');
      assert.equal(await settled(group.failure), false);
      await group.close();
      assert.deepEqual([again.pid, redis.pid!].filter(alive), []);
    } finally {
      await group.close();
    }
  });
});

describe('a process that dies when nobody stopped it fails the run', () => {
  test('an exit mid-run: the failure names the process, its exit and its last output', async () => {
    const group = new ProcessGroup({ selfName: null });
    try {
      const child = group.fork<TestChild>('tier1', CHILD);
      await child.ready();
      const dying = child.request({ type: 'die', code: 3, message: 'tier1: out of file descriptors' });
      await assert.rejects(group.failure, (e: unknown) => {
        assert.ok(e instanceof RealProcessError);
        assert.equal(e.code, 'PROCESS_EXITED');
        assert.equal(e.processName, 'tier1');
        assert.deepEqual(e.exit, { code: 3, signal: null });
        assert.match(e.message, /^tier1 exited with code 3 while the run went on; its last output:\ntier1: out of file descriptors$/);
        return true;
      });
      await assert.rejects(dying, (e: unknown) => e instanceof RealProcessError && e.code === 'PROCESS_REQUEST' && /exited with code 3 before it answered/.test(e.message));
    } finally {
      await group.close();
    }
  });

  test('an exit before ready: ready() rejects with what the child wrote', async () => {
    const group = new ProcessGroup({ selfName: null });
    try {
      const child = group.fork<TestChild>('users', CHILD, ['0', 'die-at-start']);
      await assert.rejects(child.ready(), (e: unknown) => e instanceof RealProcessError && e.code === 'PROCESS_NOT_READY' && e.message === 'users exited with code 4 before it was ready; its last output:\ncannot start: the fixture was told to fail');
      await assert.rejects(group.failure, (e: unknown) => e instanceof RealProcessError && e.code === 'PROCESS_NOT_READY');
    } finally {
      await group.close();
    }
  });

  test('a process not ready in time: ready() rejects saying so', async () => {
    const group = new ProcessGroup({ selfName: null, readyTimeoutMs: 300 });
    try {
      const port = await freePort();
      const silent = group.spawn('redis0', 'sleep', ['1000'], { readyWhen: { kind: 'port', port } });
      await assert.rejects(silent.ready(), (e: unknown) => e instanceof RealProcessError && e.code === 'PROCESS_NOT_READY' && e.message === 'redis0 was not ready after 300 ms (it wrote nothing)');
    } finally {
      await group.close();
    }
  });

  test('a binary that cannot start: its keeper says why', async () => {
    const group = new ProcessGroup({ selfName: null });
    try {
      const missing = group.spawn('postgres', 'no-such-binary-damper-lab');
      await assert.rejects(missing.ready(), (e: unknown) => e instanceof RealProcessError && /exited with code 127 before it was ready; its last output:\nkeeper: could not start no-such-binary-damper-lab: spawn no-such-binary-damper-lab ENOENT/.test(e.message));
    } finally {
      await group.close();
    }
  });
});
