import { type Clock } from 'damper';
import { type VariantName } from '../judge/results.js';
import { type Backoff } from '../schema/common.js';

/**
 * The stacks the lab can put in one system (issue 31): its own two variants
 * (`naive`, the outage's behaviour; `damper`, the library as a user deploys
 * it), and the peer stacks users run today in place of damper's client side.
 * A peer keeps the rest of the system naive (servers that admit every
 * request, no cache of damper's): only what the peer library replaces
 * changes, so a row of the table answers "would my stack have survived
 * this?" for that library alone. docs/lab.md ("Other stacks") gives every
 * peer setting and the page it comes from.
 */
/** The peers that make a system's client tiers (a retrying HTTP client, a resilience library around the call). */
export const CLIENT_PEERS = ['undici', 'cockatiel', 'opossum'] as const;
/** The peers that make a system's in-process cache (a read-through cache in the servers' memory). */
export const CACHE_PEERS = ['lru-cache', 'bentocache', 'cache-manager'] as const;
export const PEERS = [...CLIENT_PEERS, ...CACHE_PEERS] as const;
export type PeerName = (typeof PEERS)[number];
export type CachePeerName = (typeof CACHE_PEERS)[number];
/** The client peers whose library wraps a promise-returning call (undici's stack is naive's with undici's backoff). */
export type PolicyPeerName = Exclude<(typeof CLIENT_PEERS)[number], 'undici'>;

/** What a run of a system is made with: one of the lab's variants, or a peer stack. */
export type Stack = VariantName | PeerName;

/** Every stack, in a table's order: naive first, damper last. */
export const STACKS: readonly Stack[] = ['naive', ...PEERS, 'damper'];

/** A peer's knob as a command line may set it (`cockatiel:bulkhead=24`): a name and a number. */
export type Knobs = Readonly<Record<string, number>>;

/** A stack and the knobs its peer was given (none for naive and damper): what a table's row names. */
export interface StackSpec {
  readonly stack: Stack;
  readonly knobs: Knobs;
}

/** The system a stack runs in: damper's, or the naive one (a peer replaces only its client side). */
export function systemOf(stack: Stack): VariantName {
  return stack === 'damper' ? 'damper' : 'naive';
}

export function isPolicyPeer(stack: Stack): stack is PolicyPeerName {
  return stack === 'cockatiel' || stack === 'opossum';
}

/** The cache peers with a second level on shared nodes of their own (a Redis driver): lru-cache is in-process only. */
export const TWO_LEVEL_PEERS: readonly CachePeerName[] = ['bentocache', 'cache-manager'];

export function isCachePeer(stack: Stack): stack is CachePeerName {
  return (CACHE_PEERS as readonly string[]).includes(stack);
}

/** A stack's name with its knobs, as a command line gives it and `parseStackSpec` reads it back (`cockatiel:bulkhead=24`). */
export type SpecName = Stack | `${Stack}:${string}`;

/** A peer stack's name with its knobs (`cockatiel:bulkhead=24`). */
export type PeerSpecName = PeerName | `${PeerName}:${string}`;

/** A row's name: the stack, and its knobs as given (`cockatiel:bulkhead=24`). */
export function specName(spec: StackSpec): SpecName {
  const knobs = Object.entries(spec.knobs).map(([k, v]) => `${k}=${v}`);
  return knobs.length === 0 ? spec.stack : `${spec.stack}:${knobs.join(':')}`;
}

/**
 * What a peer's tier is told of the system, from the scenario: how many
 * times the tier retries and how it waits (the system's own choice, kept for
 * every stack; a peer with a backoff of its own uses its own), the timeout
 * of each attempt when the scenario gives one, and the knobs the command
 * line set.
 */
export interface TierPlan {
  readonly tier: number;
  readonly retries: number;
  readonly backoff: Backoff;
  readonly attemptTimeoutMs: number | undefined;
  readonly knobs: Knobs;
  /**
   * The fitting's time scale (`--time-scale K`, 1 unfitted): a peer's own
   * durations (a backoff, a breaker's wait) are divided by it, as the
   * scenario's are, so a fitted run is the same system K times faster.
   */
  readonly timeScale: number;
  /** The run's clock, for what the lab itself does around a peer (the system's own retry loop beside opossum): the peer's library reads the platform's. */
  readonly clock: Clock;
}

/** How a peer's own rejection ended an attempt: its timeout, or a refusal (an open breaker, a full bulkhead). */
export type PeerRejection = 'timeout' | 'refused';

/**
 * A peer library's policies around one client tier's calls, shared by every
 * call the tier makes (one breaker, one bulkhead per tier, as a service
 * that builds its policies once at start-up). `attempt` is one call to the
 * tier below; the policy decides how often and when to make it. Built
 * inside the run it serves: in a simulation the platform's clock and
 * timers are virtual by then (`installVirtualTime`).
 */
export interface PeerPolicy {
  execute<T>(attempt: (signal: AbortSignal) => Promise<T>, signal?: AbortSignal): Promise<T>;
  /** How a rejection of the peer's own ended (undefined: the attempt's own failure, passed on). */
  rejection(error: unknown): PeerRejection | undefined;
  /** Stops the peer's own timers (opossum's rolling window). */
  close(): void;
}

/** One setting of a peer, as the docs and the page give it: its value and where the library documents it. */
export interface PeerSetting {
  readonly name: string;
  readonly value: string;
  readonly source: string;
}

/** A peer stack whose policies wrap a promise-returning call (cockatiel, opossum). */
export interface PolicyPeer {
  readonly name: PolicyPeerName;
  settings(plan: TierPlan): readonly PeerSetting[];
  tier(plan: TierPlan): PeerPolicy;
}

/**
 * What a peer's in-process cache is told of the system, from the scenario's
 * `cache`: how long a value is fresh and how long past that it may still be
 * served (the stale window the scenario gives every cache), how long a load
 * may take, how many entries it holds, the knobs given, and the fitting's
 * time scale.
 */
export interface CachePlan {
  readonly ttlMs: number;
  readonly staleForMs: number;
  readonly loadTimeoutMs: number;
  /** What a server holds in its own memory: every key, or `cache.processEntries` when the cache is on nodes. */
  readonly maxEntries: number;
  /** With `cache.nodes`: the tier is on nodes, and the peer's second level is there (`cache<V>(plan, remote)`). */
  readonly nodes?: {
    /** How long the system's breaker in front of the cache stays open (`cache.naive.breaker.openMs`), if it has one. */
    readonly breakerOpenMs: number | undefined;
  };
  readonly knobs: Knobs;
  readonly timeScale: number;
}

/**
 * A cache tier on nodes as a peer's second level reaches it: a server's
 * client to the lab's ring (world/cache-nodes.ts' `CacheNodesClient`, in
 * a simulation or over real redis-servers), with ioredis's defaults: no
 * command timeout. Plain GET, SET PX and DEL are what a peer's Redis
 * driver sends; publish and subscribe carry a peer's bus. A channel hashes
 * to a node like a key.
 */
export interface PeerRemote {
  get(key: string): Promise<string | undefined>;
  set(key: string, text: string, ttlMs: number): Promise<void>;
  del(key: string): Promise<void>;
  publish(channel: string, message: string): Promise<void>;
  subscribe(channel: string, listener: (message: string) => void, interrupted?: () => void): Promise<() => Promise<void>>;
}

/**
 * A peer library's read-through cache (issue 31), as a server holds it: its
 * own get-or-load with its own coalescing, stale and timeout rules. `load`
 * is the loader a user writes for it, the same for every peer: it queries
 * the database and rejects on an error or an invalid row (it validates, as
 * damper's `validate` does). `set` is the write path's, which a peer
 * takes as it comes.
 */
export interface PeerCache<V> {
  /** A value, or a rejection: never undefined (a peer's "no value" is a failed read). */
  get(key: string, load: (signal: AbortSignal) => Promise<V>): Promise<V>;
  set(key: string, value: V, ttlMs: number): Promise<void>;
  /**
   * The steady state a run starts from: `value` where this cache's reads
   * find it (its own memory and, with a second level, that level), telling
   * no other process. A state, not traffic: no bus message.
   */
  prime(key: string, value: V, ttlMs: number): Promise<void>;
  clear(): Promise<void>;
  close(): Promise<void>;
}

/** A peer whose library makes the servers' in-process cache (lru-cache, bentocache, cache-manager). */
export interface CachePeer {
  readonly name: CachePeerName;
  settings(plan: CachePlan): readonly PeerSetting[];
  /** With `remote` (a cache on nodes; `plan.nodes` set), a cache of two levels: the process's memory, then the nodes. */
  cache<V extends object>(plan: CachePlan, remote?: PeerRemote): PeerCache<V>;
}

/** A peer's own duration as a run sets it, in words: `10 s`, or fitted `5 s (10 s ÷ the time scale 2)`. */
export function scaledWords(ms: number, timeScale: number): string {
  const seconds = (v: number): string => `${Number((v / 1000).toFixed(3))} s`;
  return timeScale === 1 ? seconds(ms) : `${seconds(ms / timeScale)} (${seconds(ms)} ÷ the time scale ${timeScale})`;
}
