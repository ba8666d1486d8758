import { type Clock, type Priority } from 'damper';
import { sampleMs } from '../engine/delay.js';
import { type ServiceScenario } from '../schema/service.js';
import { Cpu } from './cpu.js';
import { Fifo } from './fifo.js';
import { type Source } from './origin-waits.js';

/** A server of the service world, as the scenario gives it (`servers`, all servers alike; each field described in the schema). */
export type ServerShape = Pick<ServiceScenario['servers'], 'workers' | 'maxQueue' | 'cores' | 'service' | 'missService' | 'slowdownPerInFlight'>;

/** How a request ended at the server and behind it. */
export type Outcome = 'ok' | 'invalid' | 'error' | 'shed' | 'refused' | 'dropped';

/** How a request's call behind the server ended: its data read (the cache and database), or a tier's call to the tier below. */
export type BelowOutcome = 'ok' | 'invalid' | 'error' | 'shed';

/** What a request's data read (the cache and database behind the server) ends with, and where its value came from. */
export type DataRead = (key: string, priority: Priority, then: (outcome: BelowOutcome, source: Source) => void) => void;

/** One request held by a server. */
export interface Job {
  readonly key: string;
  readonly priority: Priority;
  /** Called once with the outcome; cleared by the caller when it stops waiting. */
  done: ((outcome: Outcome, source: Source) => void) | undefined;
  /** Whether nobody waits for this job any more: a damper request carries its signal, a naive one nobody's word. */
  readonly abandoned?: () => boolean;
  /**
   * On a client tier's servers: the tier's calls to the tier below, made
   * once a worker has taken the job (and holding it), in place of the
   * server's data read.
   */
  readonly below?: (then: (outcome: BelowOutcome, source: Source) => void) => void;
}

/**
 * A server, the same for both variants: `workers` requests in service, a
 * FIFO queue of at most `maxQueue` behind them (beyond it, refused at once).
 * A request first reads its data (the cache, the database; a worker waits,
 * no core does), or on a client tier's servers makes the tier's calls below
 * (`Job.below`), then costs `service × (1 + slowdownPerInFlight × held) ×
 * slowdown` ms of work, on its worker alone or on the shared `cores`
 * (processor sharing, {@link Cpu}). It serves a job whose caller left like
 * any other unless the job says it was abandoned (damper's requests carry
 * their signal): then a worker that takes it up drops it at once.
 *
 * Faults set `slowdown` (service time ×), `keep` (the share of workers and
 * cores left) and `hung` (a hung server takes requests and answers none:
 * work that finishes while it hangs holds its worker, and is answered when
 * the hang ends), or end a hang with `restart` (a new process: every open
 * connection reset, nothing of the old process's work answered).
 *
 * It is the process, not only its workers: what stands in front of them in
 * the same process (damper's admission) reads, sheds and answers only while
 * it runs ({@link whenRunning}).
 */
export class Server {
  private queue = new Fifo<Job>();
  private cpu: Cpu | undefined;
  private busy = 0;
  /**
   * What reached the process or was due to leave it while it hangs, in that
   * order: a SIGSTOPped process reads no request, refuses none and answers
   * none. Done when the hang ends; reset by a restart.
   */
  private held: { readonly run: () => void; readonly reset: () => void }[] = [];
  /** The jobs in service, for a restart to reset. */
  private readonly serving = new Set<Job>();
  /** Bumped by each restart: work of an older process never answers. */
  private epoch = 0;
  private kept = 1;
  private hungNow = false;
  /** Service time × this: a slowdown or a degraded node. */
  slowdown = 1;

  constructor(
    private readonly clock: Clock,
    private readonly shape: ServerShape,
    /** The service-time source (drawn only when `service` is random). */
    private readonly random: () => number,
    private readonly read: DataRead | undefined,
    /** Called for each request that reaches the server (the origin's load, when the servers are the origin). */
    private readonly arrived?: () => void,
  ) {
    this.cpu = shape.cores === undefined ? undefined : new Cpu(clock, shape.cores);
  }

  /** Workers left: at least 1 of a server that is up (a capacity drop to none is a hang). */
  private get workers(): number {
    return Math.max(1, Math.round(this.shape.workers * this.kept));
  }

  /** The share of its workers and cores the server keeps (a capacity drop; 1 when it ends). */
  set keep(share: number) {
    this.kept = share;
    if (this.shape.cores !== undefined) this.cpu!.setCores(this.shape.cores * share);
    this.next();
  }

  get hung(): boolean {
    return this.hungNow;
  }

  set hung(hung: boolean) {
    this.hungNow = hung;
    if (hung) return;
    const held = this.held;
    this.held = [];
    for (const { run } of held) run();
    this.next();
  }

  /**
   * Runs `run` when the process runs: now, or when its hang ends, in the
   * order things reached it; `reset` instead when a restart comes first (the
   * connection closed). Whatever the process does for a request (read it,
   * admit or shed it, answer it) passes here. The simulation once let a hung
   * server's admission go on shedding: a request it could not queue was
   * answered 503 at once and the caller's breaker opened, where a SIGSTOPped
   * process answers nothing and every call sent to it waits for its deadline
   * (real-balancer.json: 272 ms against 5,120 ms for damper's p99, docs/lab.md).
   */
  whenRunning(run: () => void, reset: () => void): void {
    if (this.hungNow) this.held.push({ run, reset });
    else run();
  }

  /** Takes a request; `job.done` is called with its outcome (synchronously when refused by a process that runs). */
  submit(job: Job): void {
    this.arrived?.();
    if (this.hungNow) this.held.push({ run: () => this.take(job), reset: () => job.done?.('refused', 'cache') });
    else this.take(job);
  }

  /** The process reads `job`: a worker takes it, or it queues, or beyond `maxQueue` it is refused. */
  private take(job: Job): void {
    if (this.busy >= this.workers) {
      if (this.queue.size >= this.shape.maxQueue) job.done?.('refused', 'cache');
      else this.queue.push(job);
    } else this.serve(job);
  }

  /**
   * A new process in the old one's place (a hang's end with `then:
   * restart`): every open connection (in service, queued, held by the hang)
   * is reset, the workers and cores are free, and nothing the old process
   * was doing answers any more.
   */
  restart(): void {
    this.epoch++;
    const open = [...this.serving, ...this.queue.drain()];
    const held = this.held;
    this.serving.clear();
    this.held = [];
    this.busy = 0;
    this.hungNow = false;
    if (this.shape.cores !== undefined) {
      this.cpu = new Cpu(this.clock, this.shape.cores);
      this.cpu.setCores(this.shape.cores * this.kept);
    }
    for (const job of open) job.done?.('refused', 'cache');
    for (const { reset } of held) reset();
  }

  /** `ms` of work on this server (its worker's time, or its cores shared), then `then`: a page rendered from its row. Work of a process since restarted never ends. */
  render(ms: number, then: () => void): void {
    const epoch = this.epoch;
    const done = (): void => {
      if (epoch === this.epoch) then();
    };
    const scaled = Math.max(1, Math.round(ms * this.slowdown));
    if (this.cpu === undefined) this.clock.setTimer(done, scaled);
    else this.cpu.run(scaled, done);
  }

  private serve(job: Job): void {
    if (job.abandoned?.() === true) {
      job.done?.('dropped', 'cache');
      return;
    }
    this.busy++;
    this.serving.add(job);
    const epoch = this.epoch;
    if (job.below === undefined && this.read === undefined) return this.work(job, 'cache', epoch);
    const then = (outcome: BelowOutcome, source: Source): void => (outcome === 'ok' ? this.work(job, source, epoch) : this.finish(job, outcome, source, epoch));
    if (job.below !== undefined) job.below(then);
    else this.read!(job.key, job.priority, then);
  }

  private work(job: Job, source: Source, epoch: number): void {
    if (epoch !== this.epoch) return;
    const ms = Math.max(1, Math.round(sampleMs(this.shape.service, this.random) * (1 + this.shape.slowdownPerInFlight * (this.busy + this.queue.size)) * this.slowdown));
    const then = (): void => this.finish(job, 'ok', source, epoch);
    if (this.cpu === undefined) this.clock.setTimer(then, ms);
    else this.cpu.run(ms, then);
  }

  private finish(job: Job, outcome: Outcome, source: Source, epoch: number): void {
    if (epoch !== this.epoch) return;
    // A hung process answers nothing and holds its workers until the hang ends; a restart resets the job (it is `serving`).
    if (this.hungNow) {
      this.held.push({ run: () => this.finish(job, outcome, source, epoch), reset: NOOP });
      return;
    }
    this.busy--;
    this.serving.delete(job);
    job.done?.(outcome, source);
    this.next();
  }

  private next(): void {
    while (!this.hungNow && this.busy < this.workers) {
      const job = this.queue.shift();
      if (job === undefined) return;
      this.serve(job);
    }
  }
}

const NOOP = (): void => {};
