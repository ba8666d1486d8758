import { AsyncLocalStorage } from 'node:async_hooks';
import { Redis } from 'ioredis';
import { type LeaseGrant, type SharedRead } from 'damper';
import { RedisStore } from 'damper/redis';
import { type CacheNodesClient } from '../world/cache-nodes.js';
import { HashRing } from '../world/hash-ring.js';
import { LOOPBACK } from './loopback.js';

/** Where one cache node of a real run answers: through its pacer (the scenario's capacity), and the redis-server itself. */
export interface NodePorts {
  /** The pacer in front of the node (node-pacer.ts): what the servers' clients call. */
  readonly paced: number;
  /** The redis-server: the steady state is written here, at no cost to the node's capacity, as the simulation seeds it. */
  readonly direct: number;
}

/** One node as a client reaches it: a plain connection (naive's commands, a flush) and damper's store over it. */
interface NodeClient {
  readonly plain: Redis;
  readonly store: RedisStore;
}

/** A subscription, placed on the node its channel hashes to now; moved when the ring changes. */
interface Subscription {
  readonly channel: string;
  readonly listener: (message: string) => void;
  readonly interrupted: (() => void) | undefined;
  /** The node it is placed on, and the unsubscribe of that placement. */
  node: number;
  placed: Promise<() => Promise<void>>;
}

/** No node left on the ring: what the simulated cluster answers too. */
const EMPTY = new Error('cache cluster has no node');

/**
 * A server's client to a real run's cache nodes: one redis-server per node,
 * each behind its pacer, placed on the simulation's own consistent-hashing
 * ring (`HashRing`, the same vnodes), so every key lives on the node it
 * lives on in the simulation. naive's look-aside calls the plain commands
 * (GET, SET PX, DEL) on an ioredis connection per node, with ioredis's
 * defaults, as a plain look-aside does; damper's shared tier calls a
 * `RedisStore` per node (damper/redis, over that same connection), routed by
 * key here: the composition a user with a client-side ring (ketama,
 * twemproxy, Discord's) writes around the store, and what `CacheCluster`
 * is in the simulation. A channel hashes to a node like a key.
 *
 * `seed` runs its calls on direct connections to the redis-servers, past
 * the pacers: the steady state is a state, not traffic (`CacheCluster.seed`).
 * The calls made inside `fill`, and only those (an async context), go
 * there, so the live traffic beside it is paced as ever.
 */
export class RedisRing implements CacheNodesClient {
  private readonly ring: HashRing;
  private readonly paced: readonly NodeClient[];
  private readonly direct: readonly NodeClient[];
  private readonly seeding = new AsyncLocalStorage<true>();
  private readonly subscriptions = new Set<Subscription>();

  constructor(nodes: readonly NodePorts[], vnodes: number) {
    this.ring = new HashRing(vnodes);
    nodes.forEach((_, i) => this.ring.add(i));
    this.paced = nodes.map((n) => nodeClient(n.paced));
    this.direct = nodes.map((n) => nodeClient(n.direct));
  }

  /** The nodes in `out` are off the ring (an operator's ejection: their keys hash to the other nodes from now on); the others on it (a replacement joins where its node was). */
  ejected(out: ReadonlySet<number>): void {
    this.paced.forEach((_, i) => (out.has(i) ? this.ring.remove(i) : this.ring.add(i)));
    // A channel follows its key's rule: publishers now send on its new node, so its subscribers listen there.
    for (const sub of this.subscriptions) if (this.ring.nodeOf(sub.channel) !== sub.node) this.place(sub);
  }

  get(key: string): Promise<string | undefined> {
    return this.on(key, async (n) => (await n.plain.get(key)) ?? undefined);
  }

  set(key: string, text: string, ttlMs: number): Promise<void> {
    return this.on(key, async (n) => void (await n.plain.set(key, text, 'PX', Math.max(1, Math.round(ttlMs)))));
  }

  del(key: string): Promise<void> {
    return this.on(key, async (n) => void (await n.plain.del(key)));
  }

  /** FLUSHALL on every node, past the pacers: a fault, which costs the nodes nothing in the simulation either. */
  flush(): void {
    for (const n of this.direct) n.plain.flushall().catch(() => {});
  }

  seed(fill: () => Promise<void>): Promise<void> {
    return this.seeding.run(true, fill);
  }

  read(key: string): Promise<SharedRead | undefined> {
    return this.on(key, (n) => n.store.read(key));
  }

  acquire(key: string, token: string, ttlMs: number): Promise<LeaseGrant> {
    return this.on(key, (n) => n.store.acquire(key, token, ttlMs));
  }

  fill(key: string, token: string, value: string, ttlMs: number): Promise<boolean> {
    return this.on(key, (n) => n.store.fill(key, token, value, ttlMs));
  }

  fail(key: string, token: string, failures: number, backoffMs: number): Promise<boolean> {
    return this.on(key, (n) => n.store.fail(key, token, failures, backoffMs));
  }

  release(key: string, token: string): Promise<void> {
    return this.on(key, (n) => n.store.release(key, token));
  }

  write(key: string, value: string, ttlMs: number): Promise<void> {
    return this.on(key, (n) => n.store.write(key, value, ttlMs));
  }

  remove(key: string): Promise<void> {
    return this.on(key, (n) => n.store.remove(key));
  }

  markTag(tag: string, retainMs: number): Promise<void> {
    return this.on(tag, (n) => n.store.markTag(tag, retainMs));
  }

  tagAge(tag: string): Promise<number | undefined> {
    return this.on(tag, (n) => n.store.tagAge(tag));
  }

  publish(channel: string, message: string): Promise<void> {
    return this.on(channel, (n) => n.store.publish(channel, message));
  }

  /**
   * On the node the channel hashes to now, and on its next one when an
   * ejection moves it (the simulated cluster's bus reaches every subscriber
   * whichever node serves it). An interruption is told only while the
   * subscription is still placed where it happened: the old node's, once it
   * has moved, is the ejection's.
   */
  async subscribe(channel: string, listener: (message: string) => void, interrupted?: () => void): Promise<() => Promise<void>> {
    const sub: Subscription = { channel, listener, interrupted, node: -1, placed: Promise.reject(EMPTY) };
    this.place(sub);
    await sub.placed;
    this.subscriptions.add(sub);
    return async () => {
      this.subscriptions.delete(sub);
      await (await sub.placed)();
    };
  }

  /** Places `sub` on the node its channel hashes to now, and drops its old placement. */
  private place(sub: Subscription): void {
    const old = sub.placed;
    const node = this.ring.nodeOf(sub.channel);
    sub.node = node;
    const interrupted = (): void => {
      if (sub.node === node) sub.interrupted?.();
    };
    sub.placed = node < 0 ? Promise.reject(EMPTY) : this.paced[node]!.store.subscribe(sub.channel, sub.listener, interrupted);
    sub.placed.catch(() => {});
    old.then((unsubscribe) => unsubscribe()).catch(() => {});
  }

  /** Closes every connection. */
  async close(): Promise<void> {
    await Promise.all(
      [...this.paced, ...this.direct].map(async (n) => {
        await n.store.close().catch(() => {});
        n.plain.disconnect();
      }),
    );
  }

  /** A call on the node `key` hashes to now: through its pacer, or straight to it inside `seed`. */
  private on<T>(key: string, call: (node: NodeClient) => Promise<T>): Promise<T> {
    const i = this.ring.nodeOf(key);
    if (i < 0) return Promise.reject(EMPTY);
    const nodes = this.seeding.getStore() === true ? this.direct : this.paced;
    return call(nodes[i]!);
  }
}

/** A connection to loopback `port` with ioredis's defaults (it queues while it connects, reconnects, waits for ever), and a store over it. */
function nodeClient(port: number): NodeClient {
  const plain = new Redis({ host: LOOPBACK, port });
  // An ejected node's pacer closes its connections: ioredis reconnects by itself; the calls that failed are the clients' to count.
  plain.on('error', () => {});
  return { plain, store: new RedisStore({ client: plain }) };
}
