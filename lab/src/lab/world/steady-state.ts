import { Cache, type Snapshot, VirtualClock } from 'damper';
import { stream, STREAMS } from '../engine/streams.js';
import { type CacheNodesClient } from './cache-nodes.js';
import { type Row } from './database.js';
import { type KeySets } from './key-sets.js';

/** Every key's row before anything is written. */
const FIRST: Row = { version: 1, valid: true };

/** The cache settings the steady state is written with: the scenario's freshness and stale window. */
export interface SteadyShape {
  readonly ttlMs: number;
  readonly staleForMs: number;
}

/**
 * The steady state a run starts from, written by the library itself: a
 * `Cache` on the cluster (standing for the processes that served before the
 * run) `set`s every key's `row` with its remaining freshness `freshness[i]`, so the
 * cluster holds damper's own keys and envelopes; its `snapshot()` is what
 * the run's processes `restore`. It runs on a clock of its own, as another
 * machine would: it draws nothing from the run's clock, and its timers never
 * fire.
 */
export async function steadyState(cluster: CacheNodesClient, shape: SteadyShape, namespace: string, keys: readonly string[], freshness: readonly number[], row: (key: string) => Row = () => FIRST): Promise<Snapshot<Row>> {
  let snapshot: Snapshot<Row> | undefined;
  await cluster.seed(async () => {
    const writer = new Cache<Row>({
      clock: new VirtualClock(),
      ttl: shape.ttlMs,
      // Each key's remaining freshness is drawn already.
      ttlJitter: 0,
      staleFor: shape.staleForMs,
      maxEntries: keys.length + 1,
      // While seeding, the writer never hears its own bus (publishes reach
      // nobody): without this, it would hold every value fresh for 1 s only.
      shared: { store: cluster, namespace, freshWithoutBus: shape.ttlMs },
    });
    await Promise.all(keys.map((key, i) => writer.set(key, row(key), { ttl: freshness[i]! })));
    snapshot = writer.snapshot();
    await writer.close();
  });
  return snapshot!;
}

/**
 * What server `server` holds of the steady state when it holds at most
 * `limit` keys (undefined: everything): see {@link heldKeys}.
 */
export function held(steady: Snapshot<Row>, limit: number | undefined, keys: KeySets, seed: number, server: number): Snapshot<Row> {
  const mine = heldKeys(limit, keys, seed, server);
  return mine === undefined ? steady : { ...steady, entries: steady.entries.filter((e) => mine.has(e.key)) };
}

/**
 * The keys server `server` holds in memory when it holds at most `limit`
 * (undefined, or every key: all of them, told as undefined): each key with
 * the probability an LRU of that size holds it ({@link KeySets.heldIn}:
 * under Zipf's law the popular keys, under uniform reads a random subset),
 * drawn from the server's own source, so servers hold different keys; at
 * most `limit`, most read first. damper's servers and a peer's draw the
 * same keys at the same seed.
 */
export function heldKeys(limit: number | undefined, keys: KeySets, seed: number, server: number): ReadonlySet<string> | undefined {
  if (limit === undefined || limit >= keys.keys.length) return undefined;
  const probability = keys.heldIn(limit);
  const draw = stream(seed, STREAMS.processKeys ^ (server * 0x9e37_79b9));
  const mine = new Set<string>();
  for (let i = 0; i < keys.keys.length && mine.size < limit; i++) if (draw() < probability[i]!) mine.add(keys.keys[i]!);
  return mine;
}
