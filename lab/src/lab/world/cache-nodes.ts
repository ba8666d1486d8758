import { type Clock, type LeaseGrant, type SharedBackend, type SharedRead, SharedSlots, type Timer, type VirtualClock } from 'damper';
import { type Network } from '../engine/network.js';
import { HashRing } from './hash-ring.js';
import { Fifo } from './fifo.js';

/** Why a cache node did not answer. One instance of each: an overload raises them by the thousand, and nobody reads a stack. */
export class CacheNodeError extends Error {}
/** The node is down (failed): connection refused, or closed under a queued call. */
const DOWN = new CacheNodeError('cache node unavailable');
/** The node left the cluster (ejected): its connections closed under the calls they owed (pipelined-client.ts holds these as ioredis does). */
const EJECTED = new CacheNodeError('cache node ejected: connection closed');

/** Whether `error` is a call an ejection failed: the node closed the connection that owed it. */
export function closedByEjection(error: unknown): boolean {
  return error === EJECTED;
}
/** The node's queue is full: the client's connection pool refuses the call at once. */
const BUSY = new CacheNodeError('cache node overloaded: too many queued calls');
/** No node left on the ring. */
const EMPTY = new CacheNodeError('cache cluster has no node');

/** The shape of one node. */
export interface CacheNodeShape {
  /** Calls served per second when healthy. */
  readonly capacityOps: number;
  /** Round trip added to each call once served, ms (a constant). */
  readonly latencyMs: number;
  /** Calls waiting beyond this are refused at once. */
  readonly maxQueue: number;
}


/** A call waiting for the node: applied atomically when served, answered `latencyMs` later. */
interface Call {
  apply(): unknown;
  resolve(value: unknown): void;
  reject(error: Error): void;
}

/**
 * One Redis-like cache node: a single-threaded server that serves
 * `capacityOps × factor` calls per second from a FIFO queue. Each call is
 * applied atomically when its turn comes, and answered `latencyMs` later
 * (or, given a `latency` source, a round trip drawn per call), times the
 * node's `slowness` (a slow network or fault proxy in front of it).
 * Latency is queueing delay plus the round trip, so a degraded node (`degrade`)
 * answers ever more slowly as its queue grows: a caller that gives up leaves
 * its call queued, and the node still serves it (wasted work, as a real Redis
 * does with the commands already in its socket buffer). Beyond `maxQueue`
 * waiting calls the node refuses at once.
 */
export class CacheNode {
  /** What the node holds: values, leases and failure counts, with their expiries. */
  readonly data: SharedSlots;
  private readonly queue = new Fifo<Call>();
  private factor = 1;
  private credit = 1;
  private lastCredit = 0;
  private tick: Timer | undefined;
  /**
   * `up`, `hung` (SIGSTOP: takes calls and answers none until it resumes;
   * its data survives), `failed` (refuses every call, keeps its data) or
   * `ejected` (out of the cluster, data gone).
   */
  state: 'up' | 'hung' | 'failed' | 'ejected' = 'up';
  /** Every round trip × this: 1 when healthy. */
  slowness = 1;
  /** Calls served, for tests and figures. */
  served = 0;

  constructor(
    readonly id: number,
    // Any Clock (it reads now() and sets timers, nothing virtual): a real run's NodePacer paces a redis-server with this same node on the system clock.
    private readonly clock: Clock,
    private readonly shape: CacheNodeShape,
    /** A round trip per call, ms, drawn when it is served; absent: `shape.latencyMs` for every call. */
    private readonly latency?: () => number,
  ) {
    this.data = new SharedSlots(clock);
  }

  /** Calls per second this node serves now. */
  get rate(): number {
    return this.shape.capacityOps * this.factor;
  }

  get queued(): number {
    return this.queue.size;
  }

  /** The share of its throughput the node keeps now. */
  get share(): number {
    return this.factor;
  }

  /** The node keeps `factor` (0 < factor ≤ 1) of its throughput: its queue grows and its answers slow down. 1 restores it. */
  degrade(factor: number): void {
    this.accrue();
    this.factor = factor;
    // The next turn was timed at the old rate: time it again at the new one.
    if (this.tick !== undefined) {
      this.tick.cancel();
      this.tick = this.clock.setTimer(this.serve, this.delayToNext());
    }
  }

  /** The node stops answering: every call, queued or new, is refused. Its data survives. */
  fail(): void {
    this.state = 'failed';
    this.dropQueue(DOWN);
  }

  /** A failed node answers again. */
  recover(): void {
    if (this.state === 'failed') this.state = 'up';
  }

  /** The process is stopped (SIGSTOP): calls queue (up to `maxQueue`, the clients' pools) and none is served. */
  hang(): void {
    if (this.state !== 'up') return;
    this.state = 'hung';
    this.tick?.cancel();
    this.tick = undefined;
  }

  /** A hung node goes on (SIGCONT): it serves its backlog, callers who left included, at its rate. */
  resume(): void {
    if (this.state !== 'hung') return;
    this.state = 'up';
    // Credit does not accrue while stopped.
    this.lastCredit = this.clock.now();
    if (this.queued > 0) this.tick = this.clock.setTimer(this.serve, this.delayToNext());
  }

  /** A killed node is started again in its place, empty (nothing kept on disk): its keys are cold, its ring position the same. */
  restart(): void {
    if (this.state !== 'failed') return;
    this.state = 'up';
    this.data.clear();
  }

  /** Removed from the cluster: queued calls fail (their connections close), its data is gone. */
  eject(): void {
    this.state = 'ejected';
    this.dropQueue(EJECTED);
    this.data.clear();
  }

  /** A replacement node joins where this one was: healthy, empty. */
  rejoin(): void {
    this.state = 'up';
    this.factor = 1;
    this.data.clear();
  }

  /** Queues `apply`; resolves with its result once served and sent back. Never throws synchronously. */
  call<T>(apply: () => T): Promise<T> {
    if (this.state === 'failed') return Promise.reject(DOWN);
    if (this.state === 'ejected') return Promise.reject(EJECTED);
    if (this.queued >= this.shape.maxQueue) return Promise.reject(BUSY);
    return new Promise<T>((resolve, reject) => {
      const waking = this.tick === undefined && this.state === 'up';
      // Before the call joins the queue: the credit earned while idle is capped.
      if (waking) this.accrue();
      this.queue.push({ apply, resolve: resolve as (value: unknown) => void, reject });
      if (waking) this.tick = this.clock.setTimer(this.serve, this.delayToNext());
    });
  }

  /**
   * Credit for calls accrues at `rate`. While the node is idle (nothing
   * queued) at most one call's or one ms's worth is kept, so a node that
   * rested does not burst; while it is busy all of it is kept, so it serves
   * its rate exactly whatever the timers' step: capping there too threw away
   * the fraction a whole-ms tick overshoots by (300 calls/s served 250, 700
   * served 500), and on real timers, which fire late, more (the pacer of a
   * real run, node-pacer.ts, runs this same node).
   */
  private accrue(): void {
    const now = this.clock.now();
    const perMs = this.rate / 1000;
    const credit = this.credit + (now - this.lastCredit) * perMs;
    this.credit = this.queued === 0 ? Math.min(credit, Math.max(1, perMs)) : credit;
    this.lastCredit = now;
  }

  /** Whole ms until one more call's credit has accrued (at least 1: serving takes a step). */
  private delayToNext(): number {
    const perMs = this.rate / 1000;
    return this.credit >= 1 ? 1 : Math.max(1, Math.ceil((1 - this.credit) / perMs));
  }

  private readonly serve = (): void => {
    this.tick = undefined;
    this.accrue();
    const answers: { call: Call; result: unknown }[] = [];
    while (this.credit >= 1 && this.queued > 0) {
      const call = this.queue.shift()!;
      this.credit -= 1;
      this.served++;
      answers.push({ call, result: call.apply() });
    }
    if (answers.length > 0) {
      if (this.latency === undefined && this.slowness === 1) this.sendAll(answers, this.shape.latencyMs);
      else if (this.latency === undefined) this.sendAll(answers, Math.round(this.shape.latencyMs * this.slowness));
      else for (const a of answers) this.sendAll([a], Math.round(this.latency() * this.slowness));
    }
    if (this.queued > 0) this.tick = this.clock.setTimer(this.serve, this.delayToNext());
  };

  /** Answers `answers` `ms` from now (at once when 0). */
  private sendAll(answers: readonly { call: Call; result: unknown }[], ms: number): void {
    const send = (): void => {
      for (const a of answers) a.call.resolve(a.result);
    };
    if (ms > 0) this.clock.setTimer(send, ms);
    else send();
  }

  private dropQueue(why: CacheNodeError): void {
    const calls = this.queue.drain();
    this.tick?.cancel();
    this.tick = undefined;
    for (const call of calls) call.reject(why);
  }
}

/**
 * What the variants' clients ask of a cache tier on nodes, whoever keeps
 * it: the simulated {@link CacheCluster}, or a real run's ring of
 * redis-server processes (real/redis-ring.ts), so both run the world's one
 * client code (service-cache-nodes.ts). damper's shared tier calls it as a
 * {@link SharedBackend}; naive's look-aside calls the plain commands, on
 * the key as it is.
 */
export interface CacheNodesClient extends SharedBackend {
  /** GET: the value's text, or undefined on a miss. */
  get(key: string): Promise<string | undefined>;
  /** SET … PX: stores `text` for `ttlMs`. */
  set(key: string, text: string, ttlMs: number): Promise<void>;
  /** DEL. */
  del(key: string): Promise<void>;
  /** Every node loses its data at once (FLUSHALL on each); the ring stays. A fault, not a client's call: it costs the nodes nothing. */
  flush(): void;
  /** Runs `fill`, whose calls cost no node capacity: how the steady state a run starts from is put in place. */
  seed(fill: () => Promise<void>): Promise<void>;
}

/**
 * A Redis-like cache cluster: nodes placed on a consistent-hashing ring (with
 * virtual nodes), each key served by the node it hashes to, at the cost of one
 * unit of that node's capacity per call. An ejection removes a node from the
 * ring: its keys now hash to the other nodes, where they are cold.
 *
 * It is a {@link SharedBackend}, with the same atomic semantics as
 * `InMemorySharedStore` (value with TTL, lease token, failure marker and
 * count, release, write, remove, publish/subscribe), so damper's shared tier
 * (leases, the store's breaker and timeout, the bus) runs over it unchanged,
 * exactly as it runs over Redis. It also offers plain `get`/`set`: what the
 * naive variant's cache-aside code calls.
 *
 * Pub/sub: a channel hashes to a node like a key, and a publish costs that
 * node one call; every subscriber, in every process, receives the message one
 * round trip after the node served it.
 */
export class CacheCluster implements CacheNodesClient {
  readonly nodes: readonly CacheNode[];
  readonly ring: HashRing;
  private readonly channels = new Map<string, Set<(message: string) => void>>();
  /** Inside {@link seed}: calls cost nothing and take no time. */
  private seeding = false;

  constructor(
    readonly clock: VirtualClock,
    count: number,
    private readonly shape: CacheNodeShape,
    vnodes = 160,
    /** Between the processes and the nodes: a call and its answer make one hop each, beside the node's own `latencyMs`. */
    private readonly network?: Network,
    /** Each call's round trip, ms, drawn per call; absent: `shape.latencyMs`. */
    latency?: () => number,
  ) {
    this.nodes = Array.from({ length: count }, (_, i) => new CacheNode(i, clock, shape, latency));
    this.ring = new HashRing(vnodes);
    for (let i = 0; i < count; i++) this.ring.add(i);
  }

  /** The node `key` lives on now, or undefined when none is left. */
  nodeOf(key: string): CacheNode | undefined {
    const i = this.ring.nodeOf(key);
    return i < 0 ? undefined : this.nodes[i];
  }

  /** Removes node `i` from the ring: its data is gone and its keys move to the other nodes. */
  eject(i: number): void {
    this.ring.remove(i);
    this.nodes[i]!.eject();
  }

  /** A replacement for node `i` joins the ring, empty: the keys that move back to it are cold. */
  rejoin(i: number): void {
    this.nodes[i]!.rejoin();
    this.ring.add(i);
  }

  /** Every node loses its data at once (FLUSHALL on each, or a failover to cold replicas); the ring stays. */
  flush(): void {
    for (const node of this.nodes) node.data.clear();
  }

  /**
   * Runs `fill`, whose calls are applied at once, cost no node capacity and
   * take no time, and whose publishes reach nobody: how the steady state a
   * run starts from is put in place, by the clients' own code (the naive
   * `SET`s, a damper `Cache`'s `set`), before the run. A state, not traffic.
   */
  async seed(fill: () => Promise<void>): Promise<void> {
    this.seeding = true;
    try {
      await fill();
    } finally {
      this.seeding = false;
    }
  }

  // ------------------------------------------------- plain commands (naive)

  /** GET: the value's text, or undefined on a miss. */
  get(key: string): Promise<string | undefined> {
    return this.on(key, (node) => node.data.read(key)?.value);
  }

  /** SET … PX: stores `text` for `ttlMs`. */
  set(key: string, text: string, ttlMs: number): Promise<void> {
    return this.on(key, (node) => node.data.write(key, text, ttlMs));
  }

  /** DEL. */
  del(key: string): Promise<void> {
    return this.on(key, (node) => node.data.remove(key));
  }

  // ------------------------------------------------- SharedBackend (damper)

  read(key: string): Promise<SharedRead | undefined> {
    return this.on(key, (node) => node.data.read(key));
  }

  acquire(key: string, token: string, ttlMs: number): Promise<LeaseGrant> {
    return this.on(key, (node) => node.data.acquire(key, token, ttlMs));
  }

  fill(key: string, token: string, value: string, ttlMs: number): Promise<boolean> {
    return this.on(key, (node) => node.data.fill(key, token, value, ttlMs));
  }

  fail(key: string, token: string, failures: number, backoffMs: number): Promise<boolean> {
    return this.on(key, (node) => node.data.fail(key, token, failures, backoffMs));
  }

  release(key: string, token: string): Promise<void> {
    return this.on(key, (node) => node.data.release(key, token));
  }

  write(key: string, value: string, ttlMs: number): Promise<void> {
    return this.on(key, (node) => node.data.write(key, value, ttlMs));
  }

  remove(key: string): Promise<void> {
    return this.on(key, (node) => node.data.remove(key));
  }

  markTag(tag: string, retainMs: number): Promise<void> {
    return this.on(tag, (node) => node.data.markTag(tag, retainMs));
  }

  tagAge(tag: string): Promise<number | undefined> {
    return this.on(tag, (node) => node.data.tagAge(tag));
  }

  publish(channel: string, message: string): Promise<void> {
    if (this.seeding) return Promise.resolve();
    return this.on(channel, () => {
      const listeners = this.channels.get(channel);
      if (listeners === undefined || listeners.size === 0) return;
      // Delivered one round trip after the node served the publish: never inside the publisher's call.
      const deliver = (): void => {
        for (const listener of listeners) listener(message);
      };
      this.clock.setTimer(deliver, Math.max(1, this.shape.latencyMs));
    });
  }

  subscribe(channel: string, listener: (message: string) => void): Promise<() => Promise<void>> {
    let set = this.channels.get(channel);
    if (set === undefined) this.channels.set(channel, (set = new Set()));
    const listeners = set;
    // Wrapped so one listener subscribed twice is two subscriptions, as on Redis.
    const wrapped = (message: string): void => listener(message);
    listeners.add(wrapped);
    return Promise.resolve(async () => {
      listeners.delete(wrapped);
    });
  }

  /** One call on the node `key` hashes to now. */
  private on<T>(key: string, apply: (node: CacheNode) => T): Promise<T> {
    const node = this.nodeOf(key);
    if (node === undefined) return Promise.reject(EMPTY);
    if (this.seeding) return Promise.resolve(apply(node));
    const network = this.network;
    if (network === undefined || network.free) return node.call(() => apply(node));
    return new Promise<T>((resolve, reject) =>
      network.hop(() =>
        node.call(() => apply(node)).then(
          (value) => network.hop(() => resolve(value)),
          (error: unknown) => network.hop(() => reject(error as Error)),
        ),
      ),
    );
  }
}
