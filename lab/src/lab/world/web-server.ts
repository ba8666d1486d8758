import { Cache, type CacheOptions, ConcurrencyLimiter, guarded, OverloadedError, type Priority, type VirtualClock } from 'damper';
import { admissionOptions, cacheOptions, type DamperSettings } from '../damper-config.js';
import { type Watch } from '../damper-gauges.js';
import { type CacheCounts } from '../lab-counters.js';
import { Cpu } from './cpu.js';
import { type Database, QueryError, type Row } from './database.js';
import { type Source } from './origin-waits.js';
import { StaleAnswers } from './stale-answers.js';

/**
 * The server side of the web-farm world (the Columbia Missourian, 2010): a web
 * server with a fixed number of workers, its own page cache in front of the
 * shared database, and a process that can hang and be restarted.
 *
 * A request holds a worker from start to end. Serving a cached page takes
 * `hitMs` of CPU work; a page that is not cached first costs a database query
 * (the worker waits, the CPU does not) and then `renderMs` more of CPU work.
 * The CPU's `cores` are shared by every request running on them (see
 * {@link Cpu}), so response time grows with load, and a server with a cold
 * cache can serve several times fewer requests than a warm one.
 */
export interface ServerShape {
  /** Processors, shared by the requests in service. */
  readonly cores: number;
  /** Requests served at once (worker threads: Apache's MaxClients). */
  readonly workers: number;
  /** Requests waiting for a worker beyond which connections are refused. */
  readonly backlog: number;
  /** CPU work to serve a cached page, ms. */
  readonly hitMs: number;
  /** CPU work to render a page from its database row, after the query, ms. */
  readonly renderMs: number;
  /** damper only: requests admitted to run at once by the server's `ConcurrencyLimiter` (the rest queue briefly or are shed). */
  readonly limit: number;
}

/** How a request was served: from the server's cache (fresh or stale), or rendered from the database. */
export interface Served {
  readonly source: Source;
}

/** Why a web server gave no page. */
export class ServerError extends Error {}

const HIT: Served = { source: 'cache' };
const STALE: Served = { source: 'stale' };
const MISS: Served = { source: 'origin' };
/** One `Served` per source, made once (a storm would make millions). */
export const SERVED: Readonly<Record<Source, Served>> = { cache: HIT, stale: STALE, origin: MISS };
// Raised by the thousand in an outage: one instance each, no stack per request.
const REFUSED = new ServerError('connection refused: the backlog is full');
const RESET = new ServerError('connection reset: the server was restarted');

/** One request held by a server until it answers it. */
interface Job {
  readonly key: string;
  readonly priority: Priority;
  answer: ((outcome: Served | Error) => void) | undefined;
}

/**
 * What both variants' servers share: the process's life. While `hung`, the
 * process accepts connections and answers nothing (the Missourian's first
 * server "stopped being responsive"); `restart` ends the hang with a new
 * process: every open connection is reset and the cache is empty.
 */
export abstract class WebServer {
  /** Open connections: answered, or reset at a restart. */
  private readonly open = new Set<Job>();
  private hungNow = false;
  /** Bumped by each restart: work of an older process never answers. */
  protected epoch = 0;
  protected cpu: Cpu;

  constructor(
    readonly id: string,
    protected readonly clock: VirtualClock,
    protected readonly db: Database,
    protected readonly shape: ServerShape,
  ) {
    this.cpu = new Cpu(clock, shape.cores);
  }

  get hung(): boolean {
    return this.hungNow;
  }

  /** Serves `key`. Resolves with how it was served, or with why not; never rejects. */
  handle(key: string, priority: Priority = 'normal'): Promise<Served | Error> {
    return new Promise((answer) => {
      const job: Job = { key, priority, answer };
      this.open.add(job);
      if (!this.hungNow) this.accept(job);
    });
  }

  /** The process stops answering: requests in service and new ones wait until the restart. */
  hang(): void {
    this.hungNow = true;
  }

  /** A new process: every open connection is reset, the workers are free, the cache is empty. */
  restart(): void {
    this.hungNow = false;
    this.epoch++;
    for (const job of this.open) this.settle(job, RESET);
    this.open.clear();
    this.cpu = new Cpu(this.clock, this.shape.cores);
    this.reset();
  }

  /** Answers `job` unless the process is hung (then the client waits, and is reset at the restart). */
  protected reply(job: Job, epoch: number, outcome: Served | Error): boolean {
    if (epoch !== this.epoch || this.hungNow) return false;
    this.open.delete(job);
    this.settle(job, outcome);
    return true;
  }

  private settle(job: Job, outcome: Served | Error): void {
    const answer = job.answer;
    job.answer = undefined;
    answer?.(outcome);
  }

  /** Work that stalls while the process is hung, or that belongs to a process since restarted. */
  protected stalled(epoch: number): boolean {
    return epoch !== this.epoch || this.hungNow;
  }

  /** Starts serving a job the process accepted. */
  protected abstract accept(job: Job): void;
  /** Forgets the old process's state (queue, cache). */
  protected abstract reset(): void;
  /** Puts `row` in the cache, fresh for `freshMs` more: the steady state a run starts from. */
  abstract prewarm(key: string, row: Row, freshMs: number): Promise<void>;
}

/**
 * The 2010 server: a FIFO queue in front of the workers (the listen backlog),
 * no admission control, and a page cache that is a map with a ttl: a miss
 * renders the page from the database, and concurrent misses of one page each
 * render it (no coalescing). A client that gave up leaves its request in the
 * queue and the server still serves it: wasted work. `counts` counts its
 * page cache's lookups and renders, for the characteristic metrics.
 */
export class NaiveServer extends WebServer {
  private busy = 0;
  private queue: Job[] = [];
  private head = 0;
  private pages = new Map<string, number>();
  private readonly ttlMs: number;

  constructor(
    id: string,
    clock: VirtualClock,
    db: Database,
    shape: ServerShape,
    ttlS: number,
    private readonly counts: CacheCounts,
  ) {
    super(id, clock, db, shape);
    this.ttlMs = ttlS * 1000;
  }

  protected accept(job: Job): void {
    if (this.busy < this.shape.workers) this.serve(job);
    else if (this.queue.length - this.head < this.shape.backlog) this.queue.push(job);
    else this.reply(job, this.epoch, REFUSED);
  }

  protected reset(): void {
    this.busy = 0;
    this.queue = [];
    this.head = 0;
    this.pages = new Map();
  }

  async prewarm(key: string, _row: Row, freshMs: number): Promise<void> {
    this.pages.set(key, this.clock.now() + freshMs);
  }

  private serve(job: Job): void {
    this.busy++;
    const epoch = this.epoch;
    const cpu = this.cpu;
    const expires = this.pages.get(job.key);
    this.counts.requests++;
    if (expires !== undefined && expires > this.clock.now()) {
      cpu.run(this.shape.hitMs, () => this.done(job, epoch, HIT));
      return;
    }
    this.counts.loads++;
    void this.db.query(job.key).then((outcome) => {
      if (this.stalled(epoch)) return;
      if (outcome instanceof QueryError) return this.done(job, epoch, outcome);
      cpu.run(this.shape.renderMs + this.shape.hitMs, () => {
        if (this.stalled(epoch)) return;
        this.pages.set(job.key, this.clock.now() + this.ttlMs);
        this.done(job, epoch, MISS);
      });
    });
  }

  private done(job: Job, epoch: number, outcome: Served | Error): void {
    // A hung process holds its workers: nothing more is served until the restart.
    if (this.stalled(epoch)) return;
    this.reply(job, epoch, outcome);
    this.busy--;
    if (this.head < this.queue.length) {
      const next = this.queue[this.head]!;
      this.queue[this.head++] = undefined as unknown as Job;
      if (this.head > 4096 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      this.serve(next);
    }
  }
}

/** Settings of the damper server's admission control and warm-up. */
export interface DamperServerOptions {
  readonly ttlS: number;
  readonly staleForS: number;
  /** Most warm-up loads started per second after a restart: its origin budget. */
  readonly warmRate: number;
  /** Most warm-up loads in flight at once. */
  readonly warmConcurrency: number;
  /** Most page loads (query and render) in flight at once per server: the cache's origin budget. */
  readonly maxLoads: number;
  /** Every page, most requested first: what a restarted server warms. */
  readonly keys: readonly string[];
  /** The user's damper configuration: its `admission(i).limiter` replaces the limiter and `cache(i)` lays over the cache's options, for server number `index`. */
  readonly settings: DamperSettings;
  readonly index: number;
  /** Instruments each process's cache and limiter (a restart replaces both, under the same attributes). */
  readonly watch: Watch;
}

/**
 * The same server with damper: a `ConcurrencyLimiter` of `limit` slots is its
 * admission control, so the CPU never runs more requests than it can serve
 * quickly (a bounded queue with CoDel and priority shedding: beyond that, a
 * request is refused at once with `OverloadedError` instead of slowing every
 * other one down and waiting past its client's timeout); its page cache is a
 * damper `Cache` (coalescing, origin budget, stale if error); and a restarted
 * process warms its cache with `cache.warm` at `warmRate` before and while
 * traffic returns to it.
 */
export class DamperServer extends WebServer {
  private limiter!: ConcurrencyLimiter;
  private cache!: Cache<Row>;
  private stale!: StaleAnswers;
  private warming: AbortController | undefined;
  private unwatch: (() => void)[] = [];
  private readonly loader = async ({ key }: { key: string }): Promise<Row> => {
    const outcome = await this.db.query(key);
    if (outcome instanceof QueryError) throw outcome;
    await this.work(this.shape.renderMs);
    return outcome;
  };

  constructor(
    id: string,
    clock: VirtualClock,
    db: Database,
    shape: ServerShape,
    private readonly options: DamperServerOptions,
  ) {
    super(id, clock, db, shape);
    this.fresh();
  }

  /** The liveness probe the balancer's health checker calls: answered at once by a live process, never by a hung one. */
  alive(signal: AbortSignal): Promise<void> {
    if (!this.hung) return Promise.resolve();
    return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
  }

  protected accept(job: Job): void {
    const epoch = this.epoch;
    const limiter = this.limiter;
    const cache = this.cache;
    const stale = this.stale;
    guarded(
      limiter,
      async () => {
        const t0 = this.clock.now();
        const read = stale.read(() => cache.get(job.key, this.loader));
        await read.result;
        const served = read.stale ? STALE : this.clock.now() === t0 ? HIT : MISS;
        await this.work(this.shape.hitMs);
        return served;
      },
      { priority: job.priority },
    )
      .then(
        (served) => this.reply(job, epoch, served),
        (error: unknown) => this.reply(job, epoch, error instanceof Error ? error : new ServerError(String(error))),
      );
  }

  protected reset(): void {
    this.warming?.abort();
    this.fresh();
    // The new process warms its cache within an origin budget; live traffic
    // (slowly given back by the balancer) loads what it asks for meanwhile.
    const warming = new AbortController();
    this.warming = warming;
    const limiter = this.limiter;
    // A warm-up render takes a worker like any other, at background priority: live traffic comes first.
    const warmLoader = (context: { key: string }): Promise<Row> => guarded(limiter, () => this.loader(context), { priority: 'background' });
    void this.cache.warm(this.options.keys, warmLoader, { rate: this.options.warmRate, concurrency: this.options.warmConcurrency, signal: warming.signal }).catch(() => {});
  }

  /** Stops a warm-up still running: nothing is left on the clock by this server. */
  close(): void {
    this.warming?.abort();
    for (const detach of this.unwatch) detach();
  }

  async prewarm(key: string, row: Row, freshMs: number): Promise<void> {
    await this.cache.set(key, row, { ttl: freshMs });
  }

  private fresh(): void {
    const { limit, backlog } = this.shape;
    const { settings, index } = this.options;
    // A restart is a new process: the user's factories are asked again, as the process would build its guards and cache anew.
    // This world's servers guard their work with the admission's limiter alone (its deadline and shedding are the world's own until the worlds are one: issue 28).
    this.limiter = admissionOptions(settings, index, {}, { clock: this.clock }).limiter ?? new ConcurrencyLimiter({ clock: this.clock, limit, maxQueue: backlog });
    const lab: CacheOptions<Row> = {
      ttl: this.options.ttlS * 1000,
      staleFor: this.options.staleForS * 1000,
      maxEntries: this.options.keys.length + 1,
      maxConcurrentLoads: this.options.maxLoads,
      // A page past its ttl is refreshed by the request that finds it, as in
      // the naive server, so a render always costs a worker's time; the stale
      // window serves when that refresh fails or is refused by the budget.
      staleWhileRevalidate: false,
    };
    this.cache = new Cache<Row>(cacheOptions(settings, index, lab, { clock: this.clock }));
    this.stale = new StaleAnswers(this.cache);
    for (const detach of this.unwatch) detach();
    const { watch } = this.options;
    const attributes = { server: this.id };
    this.unwatch = [watch(this.cache, attributes)];
    this.unwatch.push(watch(this.limiter, attributes));
  }

  private work(ms: number): Promise<void> {
    const cpu = this.cpu;
    return new Promise((resolve) => cpu.run(ms, resolve));
  }
}

/** Is `error` a server refusing work to protect itself (not a sign of death)? */
export function isShedding(error: unknown): boolean {
  return error instanceof OverloadedError;
}
