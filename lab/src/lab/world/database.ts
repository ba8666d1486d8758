import { type Clock, onAbort, type Timer, type VirtualClock } from 'damper';
import { type Recorder } from '../judge/metrics.js';
import { type Network } from '../engine/network.js';
import { Fifo } from './fifo.js';

const NOOP = (): void => {};

/** A row as the simulated database stores it. `valid: false` is the Facebook 2010 trigger. */
export interface Row {
  readonly version: number;
  readonly valid: boolean;
}

/** Why a query did not return a row. */
export class QueryError extends Error {}

/** The database refused a query: its queue is full. */
export class DatabaseOverloadedError extends QueryError {
  constructor() {
    super('database overloaded: too many queued queries');
  }
}

/** The caller stopped waiting (its own timeout or abort). The query stays queued: the database does not know. */
export class QueryAbandonedError extends QueryError {
  constructor(reason: string) {
    super(`query abandoned: ${reason}`);
  }
}

// The world raises these by the million in an overload; building a stack
// trace for each was most of a naive run's time, and nobody reads them.
export const OVERLOADED = new DatabaseOverloadedError();
const TIMED_OUT = new QueryAbandonedError('no answer before the caller timed out');
const ABORTED = new QueryAbandonedError('aborted by the caller');

/**
 * A query's answer as its caller waits for it: what `start` settles it
 * with, or a {@link QueryAbandonedError} when `timeoutMs` passes or `signal`
 * aborts first, whichever comes first (the rest is ignored). The database
 * never learns that its caller left: the query runs on.
 */
export function callerSide(clock: Clock, options: { timeoutMs?: number; signal?: AbortSignal }, start: (settle: (outcome: Row | QueryError) => void) => void): Promise<Row | QueryError> {
  return new Promise<Row | QueryError>((answer) => {
    let settled = false;
    const settle = (outcome: Row | QueryError): void => {
      if (settled) return;
      settled = true;
      timer?.cancel();
      unsubscribe();
      answer(outcome);
    };
    const { timeoutMs, signal } = options;
    const timer = timeoutMs === undefined ? undefined : clock.setTimer(() => settle(TIMED_OUT), timeoutMs);
    const unsubscribe = signal === undefined ? NOOP : onAbort(signal, () => settle(ABORTED));
    start(settle);
  });
}

interface Job {
  readonly key: string;
  answer(outcome: Row | QueryError): void;
  /** Answered or given up on. A job given up on is still served; its answer is thrown away. */
  settled: boolean;
  timer: Timer | undefined;
  /** Stops watching the caller's signal: a listener left on it would outlive the query. */
  unsubscribe: () => void;
}

/** What a read path queries: the database itself, or a server's pool of connections to it (connection-pool.ts). */
export interface Queryable {
  query(key: string, options?: { timeoutMs?: number; signal?: AbortSignal }): Promise<Row | QueryError>;
}

/**
 * A database with a fixed capacity: `workers` queries served at a time, each
 * taking `workers / capacityQps` seconds, a FIFO queue in front of them, and
 * an immediate refusal beyond `maxQueue`. Latency is queueing delay, so it
 * grows with the queue. A caller that times out or aborts leaves its query in
 * the queue, and the database still serves it: the wasted work that makes
 * overload sustain itself, as it does in a real database.
 */
export class Database implements Queryable {
  private readonly rows = new Map<string, Row>();
  private readonly queue = new Fifo<Job>();
  private busy = 0;
  private version = 1;
  private readonly serviceMs: number;
  /** Service time × this: a slowdown fault, for queries starting service then. */
  slowdown = 1;

  constructor(
    private readonly clock: VirtualClock,
    private readonly recorder: Recorder,
    private readonly shape: { readonly capacityQps: number; readonly workers: number; readonly maxQueue: number },
    /** Between the callers and the database: a query and its answer make one hop each. */
    private readonly network?: Network,
  ) {
    // Whole milliseconds keep completions on the engine's 1 ms steps.
    this.serviceMs = Math.max(1, Math.round((shape.workers * 1000) / shape.capacityQps));
  }

  /** The current row of `key` (every key exists, valid, until a fault writes it). */
  read(key: string): Row {
    let row = this.rows.get(key);
    if (row === undefined) {
      row = { version: 1, valid: true };
      this.rows.set(key, row);
    }
    return row;
  }

  /** Writes a new version of `key`, valid or not, and returns it. */
  write(key: string, valid: boolean): Row {
    const row = { version: ++this.version, valid };
    this.rows.set(key, row);
    return row;
  }

  /** Queries waiting for a worker. */
  get queued(): number {
    return this.queue.size;
  }

  /**
   * Queries `key`. Resolves with the row, or with {@link DatabaseOverloadedError}
   * at once when the queue is full, or with {@link QueryAbandonedError} when
   * `timeoutMs` passes or `signal` aborts first. It resolves with the failure
   * rather than rejecting: in an overload millions of queries fail, and a
   * rejected promise costs Node's unhandled-rejection bookkeeping twice over.
   */
  query(key: string, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Row | QueryError> {
    const network = this.network;
    return network === undefined || network.free ? this.arrive(key, options) : this.across(network, key, options);
  }

  /**
   * A query over the network: it reaches the database one hop after it was
   * sent and its answer comes back one hop after it was given. The caller's
   * timeout and abort run from the send, on the caller's side; the database
   * never learns of them, as without a network.
   */
  private across(network: Network, key: string, options: { timeoutMs?: number; signal?: AbortSignal }): Promise<Row | QueryError> {
    return callerSide(this.clock, options, (settle) => network.hop(() => void this.arrive(key, {}).then((outcome) => network.hop(() => settle(outcome)))));
  }

  /** A query as it reaches the database. */
  private arrive(key: string, options: { timeoutMs?: number; signal?: AbortSignal }): Promise<Row | QueryError> {
    this.recorder.originQuery(this.clock.now());
    if (this.busy >= this.shape.workers && this.queued >= this.shape.maxQueue) return Promise.resolve(OVERLOADED);
    return new Promise<Row | QueryError>((answer) => {
      const job: Job = { key, answer, settled: false, timer: undefined, unsubscribe: NOOP };
      const { timeoutMs, signal } = options;
      if (timeoutMs !== undefined) job.timer = this.clock.setTimer(() => this.abandon(job, TIMED_OUT), timeoutMs);
      if (signal !== undefined) job.unsubscribe = onAbort(signal, () => this.abandon(job, ABORTED));
      if (this.busy < this.shape.workers) this.serve(job);
      else this.queue.push(job);
    });
  }

  private abandon(job: Job, error: QueryAbandonedError): void {
    if (job.settled) return;
    job.settled = true;
    job.timer?.cancel();
    job.unsubscribe();
    job.answer(error);
  }

  private serve(job: Job): void {
    this.busy++;
    this.clock.setTimer(() => {
      this.busy--;
      if (!job.settled) {
        job.timer?.cancel();
        job.unsubscribe();
        job.settled = true;
        job.answer(this.read(job.key));
      }
      const next = this.queue.shift();
      if (next !== undefined) this.serve(next);
    }, this.slowdown === 1 ? this.serviceMs : Math.max(1, Math.round(this.serviceMs * this.slowdown)));
  }

}
