import { type ChildProcess, spawn } from 'node:child_process';
import { connect } from 'node:net';
import { constants } from 'node:os';
import { joinGroup } from './child.js';
import { procGauge } from './host-meter.js';
import { type KeeperSpec, type Protocol, type ServerReady } from './ipc.js';
import { LOOPBACK } from './loopback.js';
import { after } from './wall-clock.js';

/**
 * A keeper: the Node process a `ProcessGroup` forks in front of each server
 * binary it runs (redis-server, PostgreSQL), because only a child of ours
 * knows when the lab is gone. The keeper spawns the binary in a process
 * group of its own, forwards its output, meters its CPU from /proc, and
 * stops it when the lab asks (SIGTERM), when the lab is gone (its IPC
 * channel closes, even after a SIGKILL), or when the keeper is interrupted.
 * A binary that exits of itself, or of a fault the lab injected, takes its
 * keeper with it, so the group sees the pair as one process.
 *
 * Its one argument is a {@link KeeperSpec} as JSON.
 */

interface KeeperProtocol extends Protocol {
  readonly ready: ServerReady;
  readonly requests: Record<never, never>;
}

/** How often a keeper waiting for a port tries it, ms. */
const PORT_POLL_MS = 25;
/** How long a binary's last output may take to arrive after it exited, ms: its descendants may hold the pipes a little longer. */
const OUTPUT_FLUSH_MS = 200;
/** How long a keeper waits for the SIGKILLed rest of its server's process group to be reaped, ms, and how often it looks. */
const REAP_WAIT_MS = 1_000;
const REAP_POLL_MS = 10;
/** How much of the binary's output the ready pattern is matched against: enough for a line, whatever the chunking. */
const SCAN_CHARS = 8_192;

function specFrom(arg: string | undefined): KeeperSpec {
  const spec = JSON.parse(arg ?? 'null') as Partial<KeeperSpec> | null;
  if (typeof spec?.command !== 'string' || !Array.isArray(spec.args) || spec.readyWhen === undefined || typeof spec.stopSignal !== 'string' || typeof spec.graceMs !== 'number') {
    throw new Error(`keeper: expected a KeeperSpec as JSON, got ${arg}`);
  }
  return spec as KeeperSpec;
}

/** Calls `ready` once a connection to `port` on loopback succeeds; stops trying once `gone` says so. */
function whenListening(port: number, gone: () => boolean, ready: () => void): void {
  if (gone()) return;
  const socket = connect({ host: LOOPBACK, port });
  socket.once('connect', () => {
    socket.destroy();
    ready();
  });
  socket.once('error', () => {
    socket.destroy();
    after(PORT_POLL_MS, () => whenListening(port, gone, ready));
  });
}

function keep(spec: KeeperSpec): void {
  const server: ChildProcess = spawn(spec.command, spec.args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const pid = server.pid;
  let leaving = false;
  let exited = false;
  // The whole process group: PostgreSQL's backends stop and freeze with their postmaster.
  const signal = (name: NodeJS.Signals): void => {
    if (pid === undefined) return;
    try {
      process.kill(-pid, name);
    } catch {
      // Already gone.
    }
  };
  const leave = (): void => {
    if (leaving) return;
    leaving = true;
    if (exited || pid === undefined) process.exit(0);
    signal('SIGCONT');
    signal(spec.stopSignal);
    after(spec.graceMs, () => signal('SIGKILL'));
  };
  process.on('SIGTERM', leave);
  process.on('SIGINT', leave);
  const link = joinGroup<KeeperProtocol>({}, { gauge: () => procGauge(pid ?? process.pid), whenParentGone: leave });

  let announced = false;
  const announce = (): void => {
    if (announced || exited || leaving || pid === undefined) return;
    announced = true;
    link.ready({ pid });
  };
  let scanned = '';
  const forward = (to: NodeJS.WriteStream) => (chunk: Buffer) => {
    to.write(chunk);
    if (spec.readyWhen.kind !== 'output' || announced) return;
    scanned = (scanned + chunk.toString('utf8')).slice(-SCAN_CHARS);
    if (new RegExp(spec.readyWhen.pattern).test(scanned)) announce();
  };
  server.stdout?.on('data', forward(process.stdout));
  server.stderr?.on('data', forward(process.stderr));
  if (spec.readyWhen.kind === 'spawned') server.once('spawn', announce);
  if (spec.readyWhen.kind === 'port') whenListening(spec.readyWhen.port, () => exited || leaving || announced, announce);

  server.once('error', (error) => {
    process.stderr.write(`keeper: could not start ${spec.command}: ${error.message}\n`);
    process.exit(127);
  });
  server.once('exit', (code, by) => {
    exited = true;
    // Its descendants go with it: nothing of the server outlives its keeper.
    signal('SIGKILL');
    if (!leaving) process.stderr.write(`keeper: ${spec.command} (pid ${pid}) ${by === null ? `exited with code ${code}` : `was killed by ${by}`}\n`);
    const status = leaving ? 0 : (code ?? 128 + (by === null ? 0 : constants.signals[by]));
    let flushed = false;
    const flush = (): void => {
      if (flushed) return;
      flushed = true;
      finish(status);
    };
    server.once('close', flush);
    after(OUTPUT_FLUSH_MS, flush);
  });
  // The keeper goes when nothing of its server is left, so a group that saw it go knows the server gone too.
  const finish = (status: number, waitedMs = 0): void => {
    if (!groupExists() || waitedMs >= REAP_WAIT_MS) process.exit(status);
    after(REAP_POLL_MS, () => finish(status, waitedMs + REAP_POLL_MS));
  };
  const groupExists = (): boolean => {
    try {
      process.kill(-pid!, 0);
      return true;
    } catch {
      return false;
    }
  };
}

try {
  keep(specFrom(process.argv[2]));
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(2);
}
