import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { type Row } from '../world/database.js';
import { freePort, LOOPBACK } from './loopback.js';
import { type ProcessGroup } from './process-group.js';
import { RealRunError } from './real-error.js';
import { asServerUser, SERVER_USER, serverUserDir } from './server-user.js';

/**
 * The database of a real run: a PostgreSQL of its own, never the machine's.
 * `initdb` makes a cluster in the run's temp dir, and `postgres` is started
 * on a free loopback port through the run's `ProcessGroup` (its keeper stops
 * it on every ending: the run's, an error's, Ctrl-C's, a SIGKILLed lab's).
 * Durability is off (fsync, synchronous commit, full-page writes): the run
 * measures the database's capacity as the scenario gives it, which is a
 * service time spent in the query ({@link ROW_QUERY}), not the disk's.
 *
 * The rows are the scenario's keys (key, version, valid), every one valid
 * at first, as the simulated `Database` has them; `knob` holds the database
 * slowdown a fault sets. The servers reach it through the run's pgbouncer
 * (pgbouncer.ts); the runner's own connection, which writes the faults,
 * comes straight here. As root the binaries run as `postgres`
 * (server-user.ts).
 */

/** The database a real run started, as the runner uses it: where it listens, and the faults written to it. */
export interface RealPostgres {
  readonly port: number;
  /** Writes a new version of `key`, valid or not (an invalid value's start and its fix), and returns it. */
  write(key: string, valid: boolean): Promise<Row>;
  /** Sets the service time's factor for queries that start from now (a database slowdown). */
  slowdown(factor: number): Promise<void>;
  /** Shortens every query's sleep by what a query costs its slot beyond it, ms (measured: database-calibration.ts), so the capacity is the scenario's. */
  takeOff(overheadMs: number): Promise<void>;
  /** Ends the runner's own connection (the group stops the server). */
  close(): Promise<void>;
}

/**
 * The one query a server sends per load: the key's row, after `$2` ms of
 * service × the slowdown knob, less what a query costs its slot beyond its
 * sleep (`overhead`, measured for the run: database-calibration.ts), spent
 * asleep in the backend that serves it.
 * So a connection is held for the service time, PostgreSQL does the
 * waiting, and the knob is read as the query starts: a slowdown applies to
 * work that starts during it, as in the simulation.
 */
export const ROW_QUERY = 'SELECT r.version, r.valid FROM rows r, knob k, pg_sleep(greatest(0, $2::float8 * k.slowdown - k.overhead) / 1000) WHERE r.key = $1';

/** A row as {@link ROW_QUERY} returns it. */
export interface RowRecord {
  readonly version: number;
  readonly valid: boolean;
}

/** How long initdb may take, ms: about a second when idle. */
const INITDB_TIMEOUT_MS = 60_000;
/** Connections beyond pgbouncer's: the runner's own, and room for a cancel's. */
const SPARE_CONNECTIONS = 5;

/** The directory of the newest PostgreSQL server binaries (Debian's `/usr/lib/postgresql/<major>/bin`), or `$PG_BIN`. */
export function postgresBin(): string {
  const fromEnv = process.env['PG_BIN'];
  if (fromEnv !== undefined && existsSync(join(fromEnv, 'initdb'))) return fromEnv;
  const root = '/usr/lib/postgresql';
  const majors = existsSync(root) ? readdirSync(root).filter((d) => existsSync(join(root, d, 'bin', 'initdb'))) : [];
  const newest = majors.sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a))[0];
  if (newest === undefined) throw new RealRunError('a database needs PostgreSQL’s server binaries (apt-get install postgresql; found none in /usr/lib/postgresql/*/bin, and PG_BIN is not set)');
  return join(root, newest, 'bin');
}

/** Runs initdb into `dataDir`: a cluster with trust authentication on loopback, no sync (it is thrown away with the run). */
async function initdb(bin: string, base: string, dataDir: string): Promise<void> {
  const { command, args } = asServerUser(join(bin, 'initdb'), ['-D', dataDir, '-U', SERVER_USER, '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
  await new Promise<void>((resolve, reject) =>
    execFile(command, args, { cwd: base, timeout: INITDB_TIMEOUT_MS, env: { ...process.env, LC_ALL: 'C', LANG: 'C' } }, (error, stdout, stderr) =>
      error ? reject(new RealRunError(`initdb failed: ${error.message}\n${stdout}${stderr}`)) : resolve(),
    ),
  );
}

/**
 * Starts the run's PostgreSQL in `runDir` (the run's temp dir, removed with
 * it) as the group's process `database`, and fills its table with `keys`.
 * `connections`: how many pgbouncer opens to it (the database's workers).
 */
export async function startPostgres(group: ProcessGroup, runDir: string, keys: readonly string[], connections: number): Promise<RealPostgres> {
  const bin = postgresBin();
  const base = await serverUserDir(runDir, 'postgres');
  const dataDir = join(base, 'data');
  await initdb(bin, base, dataDir);
  const port = await freePort();
  const settings = { listen_addresses: LOOPBACK, fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: String(connections + SPARE_CONNECTIONS) };
  const flags = Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`]);
  const server = asServerUser(join(bin, 'postgres'), ['-D', dataDir, '-p', String(port), '-k', base, ...flags]);
  // PostgreSQL listens before it can answer: ready when it says so. Its fast shutdown is SIGINT.
  const child = group.spawn('database', server.command, server.args, { readyWhen: { kind: 'output', pattern: 'ready to accept connections' }, stopSignal: 'SIGINT' });
  await Promise.race([child.ready(), group.failure]);
  const admin = new pg.Client({ host: LOOPBACK, port, user: SERVER_USER, database: SERVER_USER });
  // The database stopped under it (the run interrupted, or its process died, which the group reports): a query
  // in flight fails on its own; without a listener, the drop itself would crash the runner before it cleans up.
  admin.on('error', () => {});
  await admin.connect();
  await admin.query('CREATE TABLE rows (key text PRIMARY KEY, version integer NOT NULL, valid boolean NOT NULL)');
  await admin.query('CREATE TABLE knob (slowdown float8 NOT NULL, overhead float8 NOT NULL)');
  await admin.query('INSERT INTO knob VALUES (1, 0)');
  // Versions go on from the first rows' 1, as the simulated database counts its writes.
  await admin.query('CREATE SEQUENCE versions START 2');
  await admin.query('INSERT INTO rows SELECT key, 1, true FROM unnest($1::text[]) AS key', [keys]);
  return {
    port,
    async write(key, valid) {
      const { rows } = await admin.query<RowRecord>("UPDATE rows SET version = nextval('versions'), valid = $2 WHERE key = $1 RETURNING version, valid", [key, valid]);
      const row = rows[0];
      if (row === undefined) throw new RealRunError(`the database has no row ${key} to write`);
      return { version: row.version, valid: row.valid };
    },
    async slowdown(factor) {
      await admin.query('UPDATE knob SET slowdown = $1', [factor]);
    },
    async takeOff(overheadMs) {
      await admin.query('UPDATE knob SET overhead = $1', [overheadMs]);
    },
    close: () => admin.end(),
  };
}
