import { onAbort, type VirtualClock } from 'damper';
import { type Queryable, QueryAbandonedError, type QueryError, type Row } from './database.js';
import { Fifo } from './fifo.js';

// Raised by the thousand when a pool runs dry: one instance each, no stack per query.
const TIMED_OUT = new QueryAbandonedError('no connection and answer before the caller timed out');
const ABORTED = new QueryAbandonedError('aborted by the caller');

/** A query waiting for a connection, or on one. */
interface Wait {
  readonly key: string;
  readonly answer: (outcome: Row | QueryError) => void;
  settled: boolean;
  stop: () => void;
}

/**
 * A server's pool of `size` connections to the database (pg-pool's `max`):
 * a query takes a connection, or waits for one in a FIFO queue; the
 * connection is held until the database answers, even when the caller gave
 * up first (its query is still running on it, as with node-postgres), so
 * abandoned queries keep the pool dry: often the first thing to grow in a
 * real outage. The caller's timeout and signal run from the moment it asks,
 * over the wait and the query both.
 */
export class ConnectionPool implements Queryable {
  private free: number;
  private readonly waiting = new Fifo<Wait>();

  constructor(
    private readonly clock: VirtualClock,
    size: number,
    private readonly db: Queryable,
  ) {
    this.free = size;
  }

  /** Queries waiting for a connection. */
  get queued(): number {
    return this.waiting.size;
  }

  query(key: string, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Row | QueryError> {
    return new Promise<Row | QueryError>((answer) => {
      const wait: Wait = { key, answer, settled: false, stop: () => {} };
      const { timeoutMs, signal } = options;
      const timer = timeoutMs === undefined ? undefined : this.clock.setTimer(() => this.settle(wait, TIMED_OUT), timeoutMs);
      const unsubscribe = signal === undefined ? undefined : onAbort(signal, () => this.settle(wait, ABORTED));
      wait.stop = () => {
        timer?.cancel();
        unsubscribe?.();
      };
      if (this.free > 0) this.send(wait);
      else this.waiting.push(wait);
    });
  }

  private settle(wait: Wait, outcome: Row | QueryError): void {
    if (wait.settled) return;
    wait.settled = true;
    wait.stop();
    wait.answer(outcome);
  }

  /** Runs `wait`'s query on a connection, which goes back to the pool when the database answers. */
  private send(wait: Wait): void {
    this.free--;
    void this.db.query(wait.key).then((outcome) => {
      this.free++;
      this.settle(wait, outcome);
      this.next();
    });
  }

  /** Hands free connections to the queries still waiting (those whose callers left are dropped). */
  private next(): void {
    while (this.free > 0) {
      const wait = this.waiting.shift();
      if (wait === undefined) return;
      if (!wait.settled) this.send(wait);
    }
  }
}
