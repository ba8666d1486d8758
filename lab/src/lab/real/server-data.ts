import { isCachePeer, systemOf } from '../stacks/stack.js';
import { loadCachePeer } from '../stacks/peers.js';
import { cachePlan, peerCacheNodes, peerCacheTier } from '../world/peer-cache-tier.js';
import { type Clock } from 'damper';
import { cacheOptions, type DamperSettings } from '../damper-config.js';
import { remainingFreshness } from '../engine/streams.js';
import { type ServiceScenario } from '../schema/service.js';
import { KeySets } from '../world/key-sets.js';
import { type Render, rendering } from '../world/render.js';
import { damperCacheNodes, damperNodeOptions, naiveCacheNodes } from '../world/service-cache-nodes.js';
import { type CacheShape, damperCacheDefaults, type DatabaseAccess, type DataTier, databaseOnly, inProcessTier, type InProcessVariant, type QueryCounts } from '../world/service-data.js';
import { DatabasePool, postgresOrigin } from './database-pool.js';
import { type ProcessArgs } from './process-side.js';
import { RedisRing } from './redis-ring.js';

/** A real server's data tier, and the pool its queries go through (the origin's load is counted there). */
export interface ServerData {
  readonly tier: DataTier;
  readonly pool: DatabasePool;
  /** Puts the tier in the state a run starts from, fresh from now: every key cached, its remaining freshness drawn as the simulation draws it. */
  prewarm(): Promise<void>;
  /** With `cache.nodes`: this server's client to them, on the simulation's ring. */
  readonly ring?: RedisRing;
}

/** naive's characteristic counts, which nobody reads on a real server: the run is judged from the users' calls and the queries. */
const unread = (): QueryCounts => ({ cache: { requests: 0, loads: 0, stale: 0 } });

/** The one server's data read: there is one server per process, and a tier of its own counts as server 0. */
export const OWN = 0;

/**
 * What stands behind a real run's server `index`: the world's own data
 * tier (`inProcessTier`, or the database alone), composed as the simulation
 * composes it, over PostgreSQL on `databasePort` instead of the simulated
 * database. naive: the look-aside map with the scenario's naive switches,
 * querying the pool; damper: `Cache` with the lab's options under the
 * configuration's `cache(index)`, loading through `postgresLoader`; each
 * row got rendered with `render` first (`servers.missService`). The
 * tier is in this process's memory: a cache of scope server is this
 * server's, and a tier's one cache stands for the tier only while the tier
 * has one server (real-plan.ts). With `cache.nodes`, the world's clients
 * to the nodes (service-cache-nodes.ts) over real redis-servers on the
 * simulation's ring (redis-ring.ts): naive's look-aside with its switches,
 * damper's `Cache` with `RedisStore` as its shared tier, the options the
 * simulation gives server `index`. Undefined without a database.
 */
export async function serverData(scenario: ServiceScenario, args: ProcessArgs, clock: Clock, settings: DamperSettings, render: Render | undefined): Promise<ServerData | undefined> {
  const { index, seed, databasePort } = args;
  // A peer stack replaces the client tiers only: its servers are naive's.
  const variant = systemOf(args.variant);
  const database = scenario.database;
  if (database === undefined) return undefined;
  if (databasePort === undefined) throw new Error('a server of a scenario with a database is told its port');
  const pool = new DatabasePool(clock, databasePort, database);
  await pool.open();
  // With servers.missService, a row the server gets is rendered on it before it is handed on, as the simulation's databaseAccess does.
  const way = render === undefined ? pool : rendering(pool, render);
  const db: DatabaseAccess = { server: () => way, tier: pool };
  const shape = scenario.cache;
  if (shape === undefined) return { tier: databaseOnly(db), pool, prewarm: async () => {} };
  const keys = new KeySets(scenario.clients, scenario.keys);
  // Every row as the database first has it: version 1, valid.
  const steady = (tier: DataTier) => (): Promise<void> => tier.prewarm(keys, () => ({ version: 1, valid: true }), remainingFreshness(seed, shape.ttlS * 1000), seed);
  if (shape.nodes !== undefined) return { ...(await onNodes(scenario, args, clock, settings, db, shape, keys, steady)), pool };
  const origin = postgresOrigin(pool, render);
  if (isCachePeer(args.variant)) {
    // A peer's cache in place of naive's maps (issue 31), composed as the simulation composes it.
    const peer = await loadCachePeer(args.variant);
    const tier = peerCacheTier(clock, shape, 1, { server: () => origin, tier: origin }, peer, cachePlan(shape, keys.keys.length, args.knobs ?? {}, args.timeScale ?? 1));
    return { tier, pool, prewarm: steady(tier) };
  }
  const how: InProcessVariant =
    variant === 'naive'
      ? { variant, counts: unread }
      : { variant, options: () => cacheOptions(settings, index, damperCacheDefaults(shape, keys.keys.length, database.workers), { clock }), watch: () => () => {} };
  const tier = inProcessTier(clock, shape, 1, db, { server: () => origin, tier: origin }, how);
  return { tier, pool, prewarm: steady(tier) };
}

/** The cache tier on nodes, as this server's client to them. */
async function onNodes(scenario: ServiceScenario, args: ProcessArgs, clock: Clock, settings: DamperSettings, db: DatabaseAccess, shape: CacheShape, keys: KeySets, steady: (tier: DataTier) => () => Promise<void>): Promise<Omit<ServerData, 'pool'>> {
  if (args.cacheNodes === undefined) throw new Error('a server of a scenario with cache nodes is told their ports');
  const ring = new RedisRing(args.cacheNodes, shape.nodes!.vnodes);
  const variant = args.variant;
  const tier = isCachePeer(variant)
    ? peerCacheNodes(clock, db, ring, shape, [args.index], await loadCachePeer(variant), cachePlan(shape, keys.keys.length, args.knobs ?? {}, args.timeScale ?? 1))
    : systemOf(variant) === 'naive'
      ? naiveCacheNodes(clock, db, ring, shape, unread)
      : damperCacheNodes(clock, db, ring, shape, [args.index], damperNodeOptions(clock, scenario, keys.keys.length, settings));
  return { tier, ring, prewarm: steady(tier) };
}
