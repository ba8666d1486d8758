import { type Clock } from 'damper';
import { type PgClientLike, type PgPoolLike, postgresLoader } from 'damper/postgres';
import pg from 'pg';
import { callerSide, OVERLOADED, type Queryable, QueryError, type Row } from '../world/database.js';
import { type RowOrigin } from '../world/origin-waits.js';
import { LOOPBACK } from './loopback.js';
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
 * `Database` made of real parts. A `pg.Pool` of the database's `workers`
 * connections, so PostgreSQL serves at most that many queries at a time,
 * each asleep for the service time ({@link ROW_QUERY}): the capacity is
 * `workers × 1000 ÷ service ms` queries/s, the scenario's. The pool's own
 * FIFO of callers waiting for a connection is the database's queue, bounded
 * here by `maxQueue`: a query that finds it full is refused at once.
 *
 * Every query is counted as it arrives, refused or not, by the second it was
 * sent (`sent`): the origin's load, what the simulated database records
 * (`Recorder.originQuery`), so the judge's amplification means the same
 * thing both ways. One server reaches the database through one pool, so the
 * bound is the database's only while there is one server (real-plan.ts).
 *
 * The same pool serves both variants: naive's look-aside queries it as a
 * {@link Queryable} (a caller that gives up leaves its query running and its
 * connection held, as the simulated database serves an abandoned query),
 * damper's `Cache` through `postgresLoader` from `damper/postgres`, as a
 * user deploys it ({@link postgresOrigin}): its hard timeout cancels the
 * query on the server.
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

  constructor(
    private readonly clock: Clock,
    port: number,
    private readonly shape: DatabaseShape,
  ) {
    this.serviceMs = Math.max(1, Math.round((shape.workers * 1000) / shape.capacityQps));
    // Connections kept for the run: a real database's pool is warm, and a new connection costs a backend's start.
    this.pool = new pg.Pool({ host: LOOPBACK, port, user: 'postgres', database: 'postgres', max: shape.workers, idleTimeoutMillis: 0 });
    // An idle connection that drops (the database stopped at the run's end) must not crash the server.
    this.pool.on('error', () => {});
    // Every connection handed out comes back once: its query is done (or cancelled), whoever asked for it.
    this.pool.on('release', () => void this.held--);
  }

  /** Opens every connection before traffic comes, each having run the query once: a backend's first query loads its catalog (about 10 ms). */
  async open(): Promise<void> {
    const clients = await Promise.all(Array.from({ length: this.shape.workers }, () => this.connection()));
    await Promise.all(clients.map((client) => client.query(ROW_QUERY, ['', 0])));
    for (const client of clients) client.release();
  }

  /** Counts a query reaching the database; false when it is refused (every connection busy, the queue full: the simulated database's rule). */
  private admitted(): boolean {
    this.sent.add(wallNowMs());
    return this.held < this.shape.workers + this.shape.maxQueue;
  }

  /** A connection, held until it is released. */
  private connection(): Promise<pg.PoolClient> {
    this.held++;
    return this.pool.connect().catch((error: unknown) => {
      this.held--;
      throw error;
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
        .then((client) => client.query<RowRecord>({ name: 'lab_row', text: ROW_QUERY, values: [key, this.serviceMs] }).finally(() => client.release()))
        .then(
          ({ rows }) => settle(rows[0] ?? NO_ROW),
          (error: unknown) => settle(new QueryError(error instanceof Error ? error.message : String(error))),
        ),
    );
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}

/**
 * damper's way to the rows in a real run: `postgresLoader` over the pool,
 * as a service loads from PostgreSQL, each load's return told to the
 * read's `OriginWaits` (as the simulated loader tells it).
 */
export function postgresOrigin(pool: DatabasePool): RowOrigin {
  const load = postgresLoader<Row, RowRecord>({ pool, text: ROW_QUERY, params: (key) => [key, pool.serviceMs], row: (r) => ({ version: r.version, valid: r.valid }) });
  return (waits) => async (context) => {
    try {
      const row = await load(context);
      if (row === undefined) throw NO_ROW;
      return row;
    } finally {
      waits.loaded(context.key);
    }
  };
}
