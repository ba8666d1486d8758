import { systemClock } from 'damper';
import { QueryError } from '../world/database.js';
import { DatabasePool, type DatabaseShape } from './database-pool.js';
import { sharedBound } from './pgbouncer.js';
import { RealRunError } from './real-error.js';
import { wallNowMs } from './wall-clock.js';

/**
 * What the real database's capacity costs beyond its sleep, measured, so it
 * can be taken off the sleep.
 *
 * A real run makes the scenario's capacity real by sleeping each query's
 * service time in PostgreSQL (postgres.ts's `ROW_QUERY`), but a query holds
 * its slot a little longer than its sleep: pgbouncer hands the connection
 * over, PostgreSQL plans and runs the statement, the row goes back. Measured
 * here, about 1.4 ms a query: checkout's database of 4 workers at 33 ms
 * served 116 queries/s where the simulated one serves 121, and
 * facebook-2010's at 10 ms would lose a tenth of its capacity. So each run
 * measures it through the very path the servers use (a connection per query
 * through pgbouncer, every slot kept busy) and sleeps that much less.
 */

/** Rounds of queries per slot the measurement spans at least: enough that the first answers' logins weigh little. */
const ROUNDS = 12;
/**
 * How long the measurement lasts at least, ms: twelve rounds of a 10-ms
 * query (120 ms) read 0.4 to 1.8 ms of overhead in three runs of
 * facebook-2010, the timers' own jitter; over 600 ms it weighs a fifth.
 */
const MEASURE_MS = 600;

/** What a run's database was measured to cost per query, ms. */
export interface SlotCost {
  /** The service time the scenario gives a query (`workers × 1000 ÷ capacityQps`, rounded as simulated). */
  readonly serviceMs: number;
  /** How long a query held its slot, sleeping the service time. */
  readonly measuredMs: number;
  /** What the sleep is shortened by: the difference, at least 0 and at most half the service time. */
  readonly overheadMs: number;
}

/**
 * The time each query held one of `workers` slots, from the instants the
 * queries ended while every slot was kept busy: the answers come
 * `measured ÷ workers` apart on average, whether the slots run in step (a
 * staircase: each round's answers together) or staggered. The slope of the
 * least-squares line through the sorted instants reads both alike.
 */
export function slotCost(ends: readonly number[], workers: number, serviceMs: number): SlotCost {
  if (ends.length < 2 * workers) throw new RangeError(`${ends.length} answers cannot measure ${workers} slots`);
  const sorted = [...ends].sort((a, b) => a - b);
  const n = sorted.length;
  const meanIndex = (n - 1) / 2;
  const meanEnd = sorted.reduce((sum, t) => sum + t, 0) / n;
  let covariance = 0;
  let variance = 0;
  sorted.forEach((t, i) => {
    covariance += (i - meanIndex) * (t - meanEnd);
    variance += (i - meanIndex) ** 2;
  });
  const measuredMs = (workers * covariance) / variance;
  return { serviceMs, measuredMs, overheadMs: Math.min(serviceMs / 2, Math.max(0, measuredMs - serviceMs)) };
}

/**
 * Measures a run's database through pgbouncer on `port`: twice `workers`
 * queries kept going at once (every slot busy, as many waiting), each
 * reading `key` and sleeping the full service time, until {@link ROUNDS}
 * per slot have ended, and at least {@link MEASURE_MS}. Done before the servers start: nothing else queries.
 */
export async function measureSlotCost(port: number, shape: DatabaseShape, key: string): Promise<SlotCost> {
  const pool = new DatabasePool(systemClock, port, shape);
  try {
    await pool.open();
    const total = Math.max(ROUNDS, Math.ceil(MEASURE_MS / pool.serviceMs)) * shape.workers;
    const ends: number[] = [];
    let sent = 0;
    const loop = async (): Promise<void> => {
      while (sent < total) {
        sent++;
        const outcome = await pool.query(key);
        if (outcome instanceof QueryError) throw new RealRunError(`measuring the database's cost per query: ${outcome.message}`);
        ends.push(wallNowMs());
      }
    };
    await Promise.all(Array.from({ length: Math.min(2 * shape.workers, sharedBound(shape)) }, loop));
    return slotCost(ends, shape.workers, pool.serviceMs);
  } finally {
    await pool.close();
  }
}
