/**
 * Real Redis servers for tests: no mocks. Each server runs on a free loopback
 * port with its own temporary directory and no persistence, so tests never
 * touch the machine's own Redis (6379) nor each other's data.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
// The lab's real runs take their servers' ports the same way, for the same reason.
import { freePort } from '../../lab/src/lab/real/loopback.js';

const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 10_000;

/** A running redis-server the test controls. */
export interface RedisServer {
  readonly host: string;
  readonly port: number;
  readonly url: string;
  /** The current process id (changes on {@link RedisServer.restart}). */
  readonly pid: number;
  /** Freezes the server (SIGSTOP): connections stay open, nothing answers. */
  pause(): void;
  /** Resumes a paused server (SIGCONT). */
  resume(): void;
  /** SIGKILL, then waits until the process has exited. */
  kill(): Promise<void>;
  /** Starts the server again on the same port after {@link RedisServer.kill} (empty: no persistence). */
  restart(): Promise<void>;
  /** SIGTERM (SIGCONT first if paused), waits for exit, removes the temporary directory. Idempotent. */
  stop(): Promise<void>;
}

export interface StartRedisOptions {
  /** Extra `redis-server` arguments, e.g. `['--cluster-enabled', 'yes']`. */
  readonly args?: readonly string[];
}

/** Whether `reply` holds one whole RESP reply (a simple line, or a bulk string with its announced length). */
function complete(reply: string): boolean {
  const eol = reply.indexOf('\r\n');
  if (eol < 0) return false;
  if (!reply.startsWith('$')) return true;
  const length = Number(reply.slice(1, eol));
  return length < 0 || Buffer.byteLength(reply.slice(eol + 2)) >= length + 2;
}

/** Sends one inline command on a raw socket and resolves with the first reply chunk. */
function rawCommand(port: number, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: HOST, port });
    let reply = '';
    socket.setEncoding('utf8');
    socket.once('error', reject);
    socket.once('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (chunk: string) => {
      reply += chunk;
      if (complete(reply)) {
        socket.destroy();
        resolve(reply);
      }
    });
    socket.once('close', () => resolve(reply));
  });
}

/** Polls until `check` resolves true, or fails after `timeoutMs` with `what` in the message. */
async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = READY_TIMEOUT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(25);
  }
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return once(child, 'exit').then(() => undefined);
}

/** Starts a redis-server on a free loopback port and waits until it answers PING. */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisServer> {
  // A cluster node listens on its port + 10,000 too (the cluster bus).
  const port = await freePort(options.args?.includes('--cluster-enabled') === true ? [10_000] : []);
  const dir = await mkdtemp(join(tmpdir(), 'damper-redis-'));
  const args = ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', ...(options.args ?? [])];
  let output = '';
  let child: ChildProcess;
  let paused = false;
  let stopped = false;

  const launch = async (): Promise<void> => {
    output = '';
    child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const collect = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-4_000);
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    const failed = new Promise<never>((_, reject) => {
      child.once('error', reject);
      child.once('exit', (code, signal) => reject(new Error(`redis-server on ${port} exited early (${code ?? signal}):\n${output}`)));
    });
    failed.catch(() => {});
    try {
      await Promise.race([failed, waitFor(`redis-server on port ${port}`, async () => (await rawCommand(port, 'PING')).startsWith('+PONG'))]);
    } catch (error) {
      child.kill('SIGKILL');
      await exited(child);
      throw error;
    }
  };

  try {
    await launch();
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }

  return {
    host: HOST,
    port,
    url: `redis://${HOST}:${port}`,
    get pid(): number {
      return child.pid ?? -1;
    },
    pause() {
      paused = child.kill('SIGSTOP') || paused;
    },
    resume() {
      child.kill('SIGCONT');
      paused = false;
    },
    async kill() {
      child.kill('SIGKILL');
      paused = false;
      await exited(child);
    },
    async restart() {
      if (stopped) throw new Error('server stopped');
      if (child.exitCode === null && child.signalCode === null) throw new Error('restart() needs kill() first');
      await launch();
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      if (child.exitCode === null && child.signalCode === null) {
        if (paused) child.kill('SIGCONT');
        child.kill('SIGTERM');
        await exited(child);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A running three-master Redis Cluster. */
export interface RedisCluster {
  readonly nodes: { host: string; port: number }[];
  readonly servers: readonly RedisServer[];
  stop(): Promise<void>;
}

function redisCli(args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', args, { timeout: READY_TIMEOUT_MS }, (error, stdout, stderr) => {
      if (error) reject(new Error(`redis-cli ${args.join(' ')} failed: ${error.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}

/**
 * Starts three cluster-enabled masters, joins them with
 * `redis-cli --cluster create` (no replicas) and waits until every node
 * reports `cluster_state:ok`.
 */
export async function startRedisCluster(): Promise<RedisCluster> {
  const servers: RedisServer[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(servers.map((s) => s.stop()));
  };
  try {
    for (let i = 0; i < 3; i++) {
      // cluster-config-file is relative to --dir, which is the server's own temp dir.
      servers.push(await startRedis({ args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000'] }));
    }
    await redisCli(['--cluster', 'create', ...servers.map((s) => `${s.host}:${s.port}`), '--cluster-replicas', '0', '--cluster-yes']);
    await waitFor('cluster_state:ok on all nodes', async () => {
      const infos = await Promise.all(servers.map((s) => rawCommand(s.port, 'CLUSTER INFO')));
      return infos.every((info) => info.includes('cluster_state:ok'));
    });
    // Every node must also know every slot's owner before a client's first
    // CLUSTER SLOTS, or it may be routed by a partial map.
    await waitFor('all nodes to know all three masters', async () => {
      const infos = await Promise.all(servers.map((s) => rawCommand(s.port, 'CLUSTER INFO')));
      return infos.every((info) => /cluster_known_nodes:3\b/.test(info) && /cluster_slots_ok:16384\b/.test(info));
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return { nodes: servers.map((s) => ({ host: s.host, port: s.port })), servers, stop };
}
