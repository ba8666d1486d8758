/**
 * A real, throwaway PostgreSQL server for tests: its own data directory in a
 * temp dir, its own loopback port, killable, restartable and freezable, so
 * tests (and chaos tests) never touch the machine's own server.
 *
 * Needs Debian's server binaries (`apt-get install postgresql`), found in
 * `/usr/lib/postgresql/<major>/bin` (the highest major wins), or in
 * `$PG_BIN` if set. initdb refuses to run as root, so when the tests run as
 * root every server command runs as the `postgres` user (`runuser`), and the
 * temp dir is handed to that user.
 */
import { execFile, spawnSync } from 'node:child_process';
import { chownSync, existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// The lab's real runs take their servers' ports the same way, for the same reason.
import { freePort } from '../../lab/src/lab/real/loopback.js';

export interface PostgresServer {
  readonly host: string;
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:PORT/postgres` (trust auth, no password). */
  readonly connectionString: string;
  /** The data directory (inside the temp dir). */
  readonly dataDir: string;
  /** Clean shutdown (`pg_ctl stop -m fast`), then removes the temp dir. Idempotent; resumes a paused server first. */
  stop(): Promise<void>;
  /** Crash-like stop (`pg_ctl stop -m immediate`): connections drop, no checkpoint. The data dir stays, for `restart`. */
  kill(): Promise<void>;
  /** Starts the server again on the same port and data dir (after `kill`; crash recovery runs). */
  restart(): Promise<void>;
  /**
   * Freezes the server: SIGSTOP to the postmaster and every child process
   * (backends, checkpointer, walwriter…). The port still accepts TCP
   * connections (the kernel's backlog), but nothing answers: a hung server,
   * not a dead one.
   */
  pause(): void;
  /** SIGCONT to the processes `pause` stopped. */
  resume(): void;
}

/** The directory of the newest PostgreSQL server binaries, or undefined if none is installed. */
export function findPostgresBin(): string | undefined {
  const fromEnv = process.env['PG_BIN'];
  if (fromEnv !== undefined && existsSync(join(fromEnv, 'initdb'))) return fromEnv;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const majors = readdirSync(root)
    .filter((d) => /^\d+(\.\d+)?$/.test(d) && existsSync(join(root, d, 'bin', 'initdb')))
    .sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a));
  return majors[0] === undefined ? undefined : join(root, majors[0], 'bin');
}

const asRoot = process.getuid?.() === 0;

/** Runs a server binary, as `postgres` when we are root. */
function run(bin: string, args: readonly string[], cwd: string, timeoutMs = 60_000): Promise<string> {
  const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, [...args]];
  return new Promise((resolve, reject) => {
    execFile(file, argv, { cwd, timeout: timeoutMs, env: { ...process.env, LC_ALL: 'C', LANG: 'C' } }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${bin} ${args.join(' ')} failed: ${error.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}


/** Every live process whose parent is `pid` (from /proc). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // Field 4 (ppid) follows the ")" that closes the command name.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(entry));
    } catch {
      // the process ended meanwhile
    }
  }
  return out;
}

/**
 * Creates a cluster in a new temp dir and starts it on a free loopback port.
 * Takes about a second. Throws if no PostgreSQL binaries are installed.
 */
export async function startPostgres(): Promise<PostgresServer> {
  const bin = findPostgresBin();
  if (bin === undefined) throw new Error('PostgreSQL server binaries not found in /usr/lib/postgresql/*/bin (apt-get install postgresql)');
  const base = await mkdtemp(join(tmpdir(), 'damper-pg-'));
  const dataDir = join(base, 'data');
  const logFile = join(base, 'log');
  if (asRoot) {
    const pw = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const gw = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    if (pw.status !== 0 || gw.status !== 0) throw new Error('running as root but there is no `postgres` user to run the server as');
    chownSync(base, Number(pw.stdout.trim()), Number(gw.stdout.trim()));
  }
  await run(join(bin, 'initdb'), ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync'], base);

  const host = '127.0.0.1';
  const port = await freePort();
  const pgCtl = join(bin, 'pg_ctl');
  const serverOptions = `-p ${port} -k ${base} -c listen_addresses=${host} -c fsync=off -c synchronous_commit=off -c full_page_writes=off`;
  const start = (): Promise<string> => run(pgCtl, ['-D', dataDir, '-o', serverOptions, '-w', '-t', '30', '-l', logFile, 'start'], base);

  let running = false;
  let removed = false;
  let paused: number[] = [];
  const postmasterPid = (): number | undefined => {
    try {
      const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      return Number.isInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  };
  const signal = (pids: readonly number[], sig: NodeJS.Signals): void => {
    for (const pid of pids) {
      try {
        process.kill(pid, sig);
      } catch {
        // gone already
      }
    }
  };
  const resume = (): void => {
    // Postmaster first, so it is ready when its children wake up and report.
    signal(paused, 'SIGCONT');
    paused = [];
  };
  // If the test process dies without calling stop(), do not leave a server behind.
  const onExit = (): void => {
    resume();
    if (running) {
      const args = ['-D', dataDir, '-m', 'immediate', '-w', 'stop'];
      if (asRoot) spawnSync('runuser', ['-u', 'postgres', '--', pgCtl, ...args], { cwd: base, stdio: 'ignore' });
      else spawnSync(pgCtl, args, { cwd: base, stdio: 'ignore' });
    }
    if (!removed) rmSync(base, { recursive: true, force: true });
  };
  process.on('exit', onExit);

  try {
    await start();
  } catch (error) {
    const log = existsSync(logFile) ? readFileSync(logFile, 'utf8') : '';
    onExit();
    process.off('exit', onExit);
    throw new Error(`${(error as Error).message}\n--- server log ---\n${log}`);
  }
  running = true;

  return {
    host,
    port,
    connectionString: `postgres://postgres@${host}:${port}/postgres`,
    dataDir,
    async stop() {
      resume();
      if (running) {
        running = false;
        await run(pgCtl, ['-D', dataDir, '-m', 'fast', '-w', 'stop'], base).catch(() => run(pgCtl, ['-D', dataDir, '-m', 'immediate', '-w', 'stop'], base).catch(() => undefined));
      }
      if (!removed) {
        removed = true;
        rmSync(base, { recursive: true, force: true });
      }
      process.off('exit', onExit);
    },
    async kill() {
      resume();
      if (!running) return;
      running = false;
      await run(pgCtl, ['-D', dataDir, '-m', 'immediate', '-w', 'stop'], base);
    },
    async restart() {
      if (removed) throw new Error('the server was stopped and its data dir removed');
      if (running) return;
      await start();
      running = true;
    },
    pause() {
      const pid = postmasterPid();
      if (pid === undefined || !running) throw new Error('the server is not running');
      // Postmaster first, so it forks no new backend while its children are being stopped.
      process.kill(pid, 'SIGSTOP');
      const children = childrenOf(pid);
      signal(children, 'SIGSTOP');
      paused = [pid, ...paused, ...children];
    },
    resume,
  };
}
