import { type PeerRemote } from './stack.js';

/**
 * The peers' drivers for a cache on the lab's nodes (discord-2019): the
 * second level of bentocache and of cache-manager, and bentocache's bus.
 * Neither library's own Redis driver can address the lab's ring (a
 * client-side consistent-hashing ring over plain redis-servers, as
 * Discord's; their drivers talk to one Redis, or to Redis Cluster), so
 * each gets a driver over the server's client to the ring (`PeerRemote`):
 * the composition a user with a client-side ring writes, and what the lab
 * does for damper's `RedisStore`. The drivers send what the libraries'
 * Redis drivers send (GET, SET PX, DEL; PUBLISH, SUBSCRIBE), on the ring's
 * ioredis connections with ioredis's defaults (no command timeout), so
 * what the peer does about a slow or failing node is the peer's own code:
 * its breaker, its suppressed errors, its grace, its retry queue.
 */

/** A value a driver is given no ttl for is kept this long (a day): Redis's "for ever", within a run. */
const FOREVER_MS = 86_400_000;

/** bentocache's L2 cache driver over the nodes (its `L2CacheDriver` contract: docs, "Extend": custom cache driver), and cache-manager's Keyv store. */
class NodesDriver {
  readonly type = 'l2' as const;

  constructor(
    private readonly remote: PeerRemote,
    private readonly prefix: string,
  ) {}

  namespace(namespace: string): NodesDriver {
    return new NodesDriver(this.remote, this.prefix === '' ? namespace : `${this.prefix}:${namespace}`);
  }

  get(key: string): Promise<string | undefined> {
    return this.remote.get(this.keyOf(key));
  }

  async pull(key: string): Promise<string | undefined> {
    const value = await this.remote.get(this.keyOf(key));
    await this.remote.del(this.keyOf(key));
    return value;
  }

  async set(key: string, value: string, ttl?: number): Promise<boolean> {
    await this.remote.set(this.keyOf(key), value, ttl ?? FOREVER_MS);
    return true;
  }

  async delete(key: string): Promise<boolean> {
    await this.remote.del(this.keyOf(key));
    return true;
  }

  async deleteMany(keys: string[]): Promise<boolean> {
    await Promise.all(keys.map((key) => this.remote.del(this.keyOf(key))));
    return true;
  }

  /** A clear of the nodes is a fault of the run's (a flush), never a server's call. */
  async clear(): Promise<void> {}

  /** The ring is the run's, shared by every server's caches: closing a cache leaves it up. */
  async disconnect(): Promise<void> {}

  private keyOf(key: string): string {
    return this.prefix === '' ? key : `${this.prefix}:${key}`;
  }
}

/** bentocache's `useL2Layer` argument: the driver over `remote`. */
export function nodesDriver(remote: PeerRemote): { readonly options: Record<string, never>; readonly factory: () => NodesDriver } {
  return { options: {}, factory: () => new NodesDriver(remote, '') };
}

/** What a bus message carries on the wire: its sender, and bentocache's payload (the keys, the kind, the namespace). */
interface Envelope {
  readonly busId: string;
  readonly payload: unknown;
}

/**
 * bentocache's bus transport over the nodes' pub/sub (the `Transport` of
 * @boringnode/bus, which bentocache's redis bus is): a message from this
 * bus's own id is dropped, as its Redis transport drops it, and a
 * subscription the node interrupted is told to the bus, which then sends
 * its retry queue (its Redis transport's "reconnecting").
 */
class NodesBusTransport {
  private id = '';
  private readonly reconnected: (() => void)[] = [];
  private readonly subscriptions = new Map<string, Promise<() => Promise<void>>>();

  constructor(private readonly remote: PeerRemote) {}

  setId(id: string): this {
    this.id = id;
    return this;
  }

  onReconnect(callback: () => void): void {
    this.reconnected.push(callback);
  }

  async publish(channel: string, message: unknown): Promise<void> {
    const envelope: Envelope = { busId: this.id, payload: message };
    await this.remote.publish(channel, JSON.stringify(envelope));
  }

  async subscribe<T>(channel: string, handler: (payload: T) => void | Promise<void>): Promise<void> {
    const placed = this.remote.subscribe(
      channel,
      (text) => {
        const envelope = decoded(text);
        // The payload is bentocache's own message; bentocache reads its fields itself.
        // Its handler's failure is bentocache's to log; it must not become an unhandled rejection here.
        if (envelope !== undefined && envelope.busId !== this.id) void Promise.resolve(handler(envelope.payload as T)).catch(() => {});
      },
      () => this.reconnected.forEach((callback) => callback()),
    );
    this.subscriptions.set(channel, placed);
    await placed;
  }

  async unsubscribe(channel: string): Promise<void> {
    const placed = this.subscriptions.get(channel);
    this.subscriptions.delete(channel);
    if (placed !== undefined) await (await placed)();
  }

  async disconnect(): Promise<void> {
    await Promise.all([...this.subscriptions.keys()].map((channel) => this.unsubscribe(channel)));
  }
}

/**
 * A message off the nodes is untrusted bytes: anything but a bus envelope
 * whose payload has bentocache's fields (a kind, the keys) is dropped, as
 * its Redis transport drops what it cannot decode.
 */
function decoded(text: string): Envelope | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isRecord(value) || typeof value.busId !== 'string' || !isRecord(value.payload)) return undefined;
  const { type, keys, namespace } = value.payload;
  const fits = typeof type === 'string' && Array.isArray(keys) && keys.every((k) => typeof k === 'string') && (namespace === undefined || typeof namespace === 'string');
  return fits ? { busId: value.busId, payload: value.payload } : undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** bentocache's `useBus` argument: the transport over `remote`, its retry queue sent again every `retryMs`. */
export function nodesBus(remote: PeerRemote, retryMs: number): { readonly options: { readonly retryQueue: { readonly enabled: true; readonly retryInterval: number } }; readonly factory: () => NodesBusTransport } {
  return { options: { retryQueue: { enabled: true, retryInterval: retryMs } }, factory: () => new NodesBusTransport(remote) };
}

/**
 * A Keyv store over the nodes (Keyv's `KeyvStoreAdapter` contract, what
 * @keyv/redis is): bentocache's driver has its shape (get, set with a ttl
 * in ms, delete, clear). Keyv hands it its own serialized text, and turns
 * a failed call into a miss itself.
 */
export function nodesKeyvStore(remote: PeerRemote): NodesDriver {
  return new NodesDriver(remote, '');
}
