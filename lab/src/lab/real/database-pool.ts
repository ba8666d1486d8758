import { type Clock } from 'damper';
import { type PgClientLike, type PgPoolLike, postgresLoader } from 'damper/postgres';
import pg from 'pg';
import { callerSide, OVERLOADED, type Queryable, QueryError, type Row } from '../world/database.js';
import { type RowOrigin } from '../world/origin-waits.js';
import { type Render, rendered } from '../world/render.js';
import { LOOPBACK } from './loopback.js';
import { sharedBound } from './pgbouncer.js';
import { ROW_QUERY, type RowRecord } from './postgres.js';
import { PerSecond } from './process-side.js';
import { wallNowMs } from './wall-clock.js';

/** The database as the scenario gives it (`database`). */
export interface DatabaseShape {
  readonly capacityQps: number;
  readonly workers: number;
  readonly maxQueue: number;
}

const NO_ROW = new QueryError('the database has no such row');

/**
 * The database of a real run as its server reaches it: the scenario's
 * `Database` made of real parts. Each query opens its own connection to
 * the run's pgbouncer, which runs at most the database's `workers` at once
 * on PostgreSQL, each asleep for the service time ({@link ROW_QUERY}): the
 * capacity is `workers × 1000 ÷ service ms` queries/s, the scenario's,
 * shared by every server. The queries waiting for one of those are
 * pgbouncer's queue, bounded by its clients (pgbouncer.ts says why a
 * connection per query): one that finds it full is refused at its login,
 * and answered as the simulated database refuses, {@link OVERLOADED}. This
 * server alone never holds more than that bound either: beyond it a query
 * is refused here, without a login.
 *
 * Every query is counted as it arrives, refused or not, by the second it was
 * sent (`sent`): the origin's load, what the simulated database records
 * (`Recorder.originQuery`), so the judge's amplification means the same
 * thing both ways. The runner adds up every server's.
 *
 * The same pool serves both variants: naive's look-aside queries it as a
 * {@link Queryable} (a caller that gives up leaves its query running and its
 * connection held, as the simulated database serves an abandoned query),
 * damper's `Cache` through `postgresLoader` from `damper/postgres`, as a
 * user deploys it ({@link postgresOrigin}): its hard timeout cancels the
 * query on the server (pgbouncer forwards the cancel). Statements are
 * unnamed: pgbouncer 1.18 in transaction mode cannot follow a named one.
 */
export class DatabasePool implements Queryable, PgPoolLike {
  /** Queries that reached the database, by second from time zero. */
  readonly sent = new PerSecond();
  /** One query's service time, ms, as the simulated database rounds it. */
  readonly serviceMs: number;
  private readonly pool: pg.Pool;
  /**
   * Queries admitted and not yet done (on a connection, or waiting for one):
   * counted here, because pg's own counts lag a burst (an idle connection
   * is handed over on the next tick).
   */
  private held = 0;

  /** Queries in service or queued, from every server, beyond which one is refused. */
  private readonly bound: number;

  constructor(
    private readonly clock: Clock,
    /** pgbouncer's port. */
    port: number,
    private readonly shape: DatabaseShape,
  ) {
    this.serviceMs = Math.max(1, Math.round((shape.workers * 1000) / shape.capacityQps));
    this.bound = sharedBound(shape);
    // A connection per query, closed when it is released (maxUses 1): pgbouncer's clients are the queries in flight.
    // The login is pgbouncer's alone; its connections to PostgreSQL stay warm for the run.
    this.pool = new pg.Pool({ host: LOOPBACK, port, user: 'postgres', database: 'postgres', max: this.bound, maxUses: 1, idleTimeoutMillis: 0 });
    // An idle connection that drops (the database stopped at the run's end) must not crash the server.
    this.pool.on('error', () => {});
    // Every connection handed out comes back once: its query is done (or cancelled), whoever asked for it.
    this.pool.on('release', () => void this.held--);
  }

  /** Has pgbouncer open every connection to PostgreSQL before traffic comes, each having run the query once: a backend's first query loads its catalog (about 10 ms). */
  async open(): Promise<void> {
    const clients = await Promise.all(Array.from({ length: this.shape.workers }, () => this.connection()));
    await Promise.all(clients.map((client) => client.query(ROW_QUERY, ['', 0])));
    for (const client of clients) client.release();
  }

  /** Counts a query reaching the database; false when it is refused (every connection busy, the queue full: the simulated database's rule). */
  private admitted(): boolean {
    this.sent.add(wallNowMs());
    return this.held < this.bound;
  }

  /** A connection, held until it is released; pgbouncer's refusal (its clients at the bound) is the database's. */
  private connection(): Promise<pg.PoolClient> {
    this.held++;
    return this.pool.connect().catch((error: unknown) => {
      this.held--;
      throw refusedByPooler(error) ? OVERLOADED : error;
    });
  }

  /** A connection for one query (`postgresLoader`'s way in), or the database's refusal. */
  connect(): Promise<PgClientLike> {
    return this.admitted() ? this.connection() : Promise.reject(OVERLOADED);
  }

  /** `key`'s row, or why not (resolved, never rejected, as the simulated database answers). */
  query(key: string, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Row | QueryError> {
    if (!this.admitted()) return Promise.resolve(OVERLOADED);
    return callerSide(this.clock, options, (settle) =>
      this.connection()
        .then((client) => client.query<RowRecord>({ text: ROW_QUERY, values: [key, this.serviceMs] }).finally(() => client.release()))
        .then(
          ({ rows }) => settle(rows[0] ?? NO_ROW),
          (error: unknown) => settle(error instanceof QueryError ? error : new QueryError(error instanceof Error ? error.message : String(error))),
        ),
    );
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}

/** Whether `error` is pgbouncer turning a login away because its clients are at `max_client_conn`. */
export function refusedByPooler(error: unknown): boolean {
  return error instanceof Error && error.message.includes('max_client_conn');
}

/**
 * damper's way to the rows in a real run: `postgresLoader` over the pool,
 * as a service loads from PostgreSQL, each row rendered with `render`
 * (`servers.missService`) within its load, and each load's return told to
 * the read's `OriginWaits` once rendered (as the simulated loader tells it).
 */
export function postgresOrigin(pool: DatabasePool, render: Render | undefined): RowOrigin {
  const load = postgresLoader<Row, RowRecord>({ pool, text: ROW_QUERY, name: false, params: (key) => [key, pool.serviceMs], row: (r) => ({ version: r.version, valid: r.valid }) });
  return (waits) => async (context) => {
    try {
      const row = await load(context);
      if (row === undefined) throw NO_ROW;
      return render === undefined ? row : await rendered(render, row);
    } finally {
      waits.loaded(context.key);
    }
  };
}
