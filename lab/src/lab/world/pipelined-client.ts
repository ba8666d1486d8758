import { type LeaseGrant, type SharedRead } from 'damper';
import { type CacheCluster, type CacheNodesClient, closedByEjection } from './cache-nodes.js';
import { Fifo } from './fifo.js';

/**
 * How long ioredis, at its defaults, holds the commands of a connection the
 * node closed before it fails them: it reconnects (`retryStrategy`: 50 ms ×
 * the attempt, at most 2 s), keeps them to send again
 * (`autoResendUnfulfilledCommands`), and fails them once 20 attempts have
 * failed (`maxRetriesPerRequest`): 50 × (1 + … + 20) ms. Measured against
 * ioredis 5 and a server that closes the connection and turns every
 * reconnection away, as an ejected node's pacer does: 10,533–10,641 ms.
 * ioredis's own time, not the scenario's: a fitting does not scale it.
 */
export const IOREDIS_GIVE_UP_MS = 10_500;

/** A reply a connection owes, in the order its command was sent: `deliver` is set once the node has answered. */
interface Owed {
  deliver: (() => void) | undefined;
}

/**
 * One server's client to the cache nodes as ioredis keeps it (and most
 * Redis clients): one connection per node, every command pipelined on it,
 * and the replies in the order the commands were sent, as RESP has them. A
 * node's answer to a later command, its refusal of a full queue included,
 * so waits for the answers to every earlier command on that connection.
 * A degraded node's queue then holds up its refusals too: each of the
 * server's calls to it waits its own timeout rather than failing at once.
 * A real run's ring of redis-servers behind their pacers does exactly this
 * (node-pacer.ts puts a refusal in its place in the replies); the
 * simulation left it out until discord-2019, run on real processes, served
 * fewer calls during its trigger and recovered seconds later than
 * simulated (docs/lab.md, "Measured").
 *
 * An ejected node closes the connection under the calls it owed, and
 * ioredis fails them only {@link IOREDIS_GIVE_UP_MS} later, once its
 * reconnections have been refused. The simulation failed them at once
 * until bentocache's L2, which sets no command timeout, was compared with
 * its real runs (docs/lab.md, "Measured: discord-2019"); naive's and
 * damper's clients give up on a call sooner, at their command and store
 * timeouts, and read the same either way.
 *
 * A pool of connections (`cache.nodes.connections`: one command per
 * connection at a time) has no such order and does not use this. A
 * subscription has a connection of its own, as ioredis keeps one for
 * subscriber mode; a fault (`flush`) and the steady state (`seed`) are
 * the cluster's, not a connection's.
 */
export class PipelinedClient implements CacheNodesClient {
  /** Per node (its index on the ring), the replies owed, oldest first. */
  private readonly connections = new Map<number, Fifo<Owed>>();

  constructor(private readonly cluster: CacheCluster) {}

  /** A call's rejection as ioredis delivers it: an ejection's, once ioredis gives up reconnecting; any other, at once. */
  private failed(error: unknown, reject: () => void): void {
    if (closedByEjection(error)) this.cluster.clock.setTimer(reject, IOREDIS_GIVE_UP_MS);
    else reject();
  }

  get(key: string): Promise<string | undefined> {
    return this.inOrder(key, () => this.cluster.get(key));
  }

  set(key: string, text: string, ttlMs: number): Promise<void> {
    return this.inOrder(key, () => this.cluster.set(key, text, ttlMs));
  }

  del(key: string): Promise<void> {
    return this.inOrder(key, () => this.cluster.del(key));
  }

  read(key: string): Promise<SharedRead | undefined> {
    return this.inOrder(key, () => this.cluster.read(key));
  }

  acquire(key: string, token: string, ttlMs: number): Promise<LeaseGrant> {
    return this.inOrder(key, () => this.cluster.acquire(key, token, ttlMs));
  }

  fill(key: string, token: string, value: string, ttlMs: number): Promise<boolean> {
    return this.inOrder(key, () => this.cluster.fill(key, token, value, ttlMs));
  }

  fail(key: string, token: string, failures: number, backoffMs: number): Promise<boolean> {
    return this.inOrder(key, () => this.cluster.fail(key, token, failures, backoffMs));
  }

  release(key: string, token: string): Promise<void> {
    return this.inOrder(key, () => this.cluster.release(key, token));
  }

  write(key: string, value: string, ttlMs: number): Promise<void> {
    return this.inOrder(key, () => this.cluster.write(key, value, ttlMs));
  }

  remove(key: string): Promise<void> {
    return this.inOrder(key, () => this.cluster.remove(key));
  }

  markTag(tag: string, retainMs: number): Promise<void> {
    return this.inOrder(tag, () => this.cluster.markTag(tag, retainMs));
  }

  tagAge(tag: string): Promise<number | undefined> {
    return this.inOrder(tag, () => this.cluster.tagAge(tag));
  }

  publish(channel: string, message: string): Promise<void> {
    return this.inOrder(channel, () => this.cluster.publish(channel, message));
  }

  subscribe(channel: string, listener: (message: string) => void): Promise<() => Promise<void>> {
    return this.cluster.subscribe(channel, listener);
  }

  flush(): void {
    this.cluster.flush();
  }

  seed(fill: () => Promise<void>): Promise<void> {
    return this.cluster.seed(fill);
  }

  /** The replies owed on the connection to node `node`: for tests. */
  owed(node: number): number {
    return this.connections.get(node)?.size ?? 0;
  }

  /**
   * `call` on the node `key` hashes to now, its answer held until every
   * earlier call's on that node's connection is out. A node that left the
   * ring meanwhile fails the calls its connection owed once ioredis gives
   * up on it ({@link IOREDIS_GIVE_UP_MS}); new calls go to the key's new node.
   */
  private inOrder<T>(key: string, call: () => Promise<T>): Promise<T> {
    const node = this.cluster.ring.nodeOf(key);
    if (node < 0) return call();
    let owed = this.connections.get(node);
    if (owed === undefined) this.connections.set(node, (owed = new Fifo<Owed>()));
    const line = owed;
    const mine: Owed = { deliver: undefined };
    line.push(mine);
    return new Promise<T>((resolve, reject) => {
      call().then(
        (value) => this.answered(line, mine, () => resolve(value)),
        (error: unknown) => this.failed(error, () => this.answered(line, mine, () => reject(error as Error))),
      );
    });
  }

  private answered(line: Fifo<Owed>, owed: Owed, deliver: () => void): void {
    owed.deliver = deliver;
    for (let next = line.oldest; next?.deliver !== undefined; next = line.oldest) {
      line.shift();
      next.deliver();
    }
  }
}
