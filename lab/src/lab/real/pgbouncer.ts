import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type DatabaseShape } from './database-pool.js';
import { freePort, LOOPBACK } from './loopback.js';
import { type ProcessGroup } from './process-group.js';
import { RealRunError } from './real-error.js';
import { asServerUser, SERVER_USER, serverUserDir } from './server-user.js';

/**
 * The one bound every server of a real run shares: pgbouncer in front of
 * the run's PostgreSQL, as production shares a database among servers.
 * The simulated database serves `workers` queries at once and queues at
 * most `maxQueue` more, whichever server sent them, refusing the rest as
 * overloaded. Here:
 *
 * - `default_pool_size = workers`, `pool_mode = transaction`: at most
 *   `workers` server connections, each query taking one for its
 *   transaction, so PostgreSQL runs at most `workers` queries at once;
 * - the others wait in pgbouncer's queue, first come first served;
 * - pgbouncer does not bound that queue, but it bounds its clients
 *   (`max_client_conn`): a server opens a connection per query and closes
 *   it when the query is done (database-pool.ts), so pgbouncer's clients
 *   are exactly the queries in service or queued, from every server, and
 *   `max_client_conn = workers + maxQueue` refuses the one beyond, at its
 *   login, as the simulated database refuses it.
 *
 * Where it differs from the simulation: a query's slot is freed when
 * pgbouncer reads its client's close, a fraction of a millisecond after
 * the answer (a query arriving then can be refused with one slot nearly
 * free); and each query pays a loopback login to pgbouncer (answered by
 * pgbouncer alone, no PostgreSQL backend starts) before it is queued.
 * The alternative, each server a persistent pool of its share of
 * `workers + maxQueue`, would split the queue: a server alone under load
 * (the other one hung, missourian-2010) could queue only half of it.
 */

/** The pgbouncer a real run started, as its servers reach it. */
export interface RealPgbouncer {
  readonly port: number;
}

/** Where Debian's pgbouncer is, or `$PGBOUNCER`. */
export function pgbouncerBin(): string {
  const bin = process.env['PGBOUNCER'] ?? '/usr/sbin/pgbouncer';
  if (!existsSync(bin)) throw new RealRunError(`a database behind the servers needs pgbouncer (apt-get install pgbouncer; found none at ${bin}, set PGBOUNCER to its path)`);
  return bin;
}

/** What pgbouncer listens on and forwards to, and where its auth file is. */
export interface PgbouncerPlace {
  readonly port: number;
  readonly postgresPort: number;
  readonly authFile: string;
}

/** The most queries that may be in service or queued at once, from every server: pgbouncer's `max_client_conn`. */
export function sharedBound(database: DatabaseShape): number {
  return database.workers + database.maxQueue;
}

/** pgbouncer's configuration for `database` at `place` (its `.ini`). */
export function pgbouncerConfig(database: DatabaseShape, place: PgbouncerPlace): string {
  const settings: Record<string, string | number> = {
    listen_addr: LOOPBACK,
    listen_port: place.port,
    // No unix socket: loopback TCP only, nothing left outside the run's dir.
    unix_socket_dir: '',
    auth_type: 'trust',
    auth_file: place.authFile,
    pool_mode: 'transaction',
    default_pool_size: database.workers,
    // The database's workers are the bound: no reserve beyond them, none for another database.
    reserve_pool_size: 0,
    max_db_connections: database.workers,
    max_client_conn: sharedBound(database),
    // No sanity query before handing out a connection idle for 30 s: it would cost a round trip the simulation has not.
    server_check_query: '',
    // A line per login and per refusal would cost pgbouncer's one core more than the queries do.
    log_connections: 0,
    log_disconnections: 0,
    log_pooler_errors: 0,
    // A query waits in the queue as long as the simulated one does: its caller's timeout, not pgbouncer's.
    query_wait_timeout: 0,
  };
  const lines = Object.entries(settings).map(([name, value]) => `${name} = ${value}`);
  return ['[databases]', `${SERVER_USER} = host=${LOOPBACK} port=${place.postgresPort} dbname=${SERVER_USER} user=${SERVER_USER}`, '', '[pgbouncer]', ...lines, ''].join('\n');
}

/**
 * Starts the run's pgbouncer in `runDir` as the group's process `pooler`
 * (stopped on every ending, as PostgreSQL is), in front of the PostgreSQL
 * on `postgresPort`, and returns where the servers connect.
 */
export async function startPgbouncer(group: ProcessGroup, runDir: string, postgresPort: number, database: DatabaseShape): Promise<RealPgbouncer> {
  const bin = pgbouncerBin();
  const dir = await serverUserDir(runDir, 'pgbouncer');
  const authFile = join(dir, 'users.txt');
  // Trust on loopback, as the run's PostgreSQL: pgbouncer still wants the user listed.
  writeFileSync(authFile, `"${SERVER_USER}" ""\n`);
  const port = await freePort();
  const configFile = join(dir, 'pgbouncer.ini');
  writeFileSync(configFile, pgbouncerConfig(database, { port, postgresPort, authFile }));
  const { command, args } = asServerUser(bin, [configFile]);
  // Its immediate shutdown is SIGTERM (SIGINT would wait for its clients).
  const child = group.spawn('pooler', command, args, { readyWhen: { kind: 'port', port }, stopSignal: 'SIGTERM' });
  await Promise.race([child.ready(), group.failure]);
  return { port };
}
