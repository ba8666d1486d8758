import { Cache, type Snapshot, VirtualClock } from 'damper';
import { stream, STREAMS } from '../streams.js';
import { type CacheCluster } from './cache-nodes.js';
import { type Row } from './database.js';

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
export async function steadyState(cluster: CacheCluster, shape: SteadyShape, namespace: string, keys: readonly string[], freshness: readonly number[], row: (key: string) => Row = () => FIRST): Promise<Snapshot<Row>> {
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
 * What process `i` holds of the steady state when it holds at most `limit`
 * keys (undefined: everything).
 *
 * - `random`: a random subset of that many, its own, drawn per process:
 *   what an LRU holds in steady state under uniform reads (cache-cluster).
 * - `popular`: the `limit` most popular, `ranked` most popular first: what
 *   an LRU holds, near enough, under a skewed (Zipf) popularity, where the
 *   popular keys are read again long before they could be evicted (the
 *   service world).
 */
export function held(steady: Snapshot<Row>, limit: number | undefined, pick: { readonly kind: 'random'; readonly seed: number; readonly process: number } | { readonly kind: 'popular'; readonly ranked: readonly string[] }): Snapshot<Row> {
  if (limit === undefined || limit >= steady.entries.length) return steady;
  if (pick.kind === 'popular') {
    const top = new Set(pick.ranked.slice(0, limit));
    return { ...steady, entries: steady.entries.filter((e) => top.has(e.key)) };
  }
  const draw = stream(pick.seed, STREAMS.processKeys ^ (pick.process * 0x9e37_79b9));
  const mine = [...steady.entries];
  for (let j = mine.length - 1; j > 0; j--) {
    const k = Math.floor(draw() * (j + 1));
    [mine[j], mine[k]] = [mine[k]!, mine[j]!];
  }
  return { ...steady, entries: mine.slice(0, limit) };
}
