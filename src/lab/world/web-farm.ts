import { VirtualClock } from '../../index.js';
import { Clients } from '../clients.js';
import { Recorder } from '../metrics.js';
import { Network } from '../network.js';
import { type VariantName, type VariantRun } from '../results.js';
import { array, checkCommon, type FaultSpanDoc, type Json, num, object, parseCacheWindows, parseOrigin, type ScenarioCommon, ScenarioError, spanAxis, str } from '../scenario.js';
import { remainingFreshness } from '../streams.js';
import { KeyPicker } from '../traffic.js';
import { type WorldKind } from '../worlds.js';
import { Database } from './database.js';
import { DamperFrontDoor, type FrontDoor, type HealthShape, NaiveBalancer } from './front-door.js';
import { DamperServer, NaiveServer, type ServerShape, type WebServer } from './web-server.js';

/** A fault of the web-farm world. Both are triggers: the incident's cause. */
export type WebFarmFault = FaultSpanDoc &
  (
    | /** Every client population's rate × `factor` from `startS` to `endS` (the Drudge Report link). */
    { readonly kind: 'traffic-spike'; readonly factor: number }
    /** Server `server` (`web1`, `web2`…) stops answering at `startS`; at `endS` its process is restarted, with an empty cache. */
    | { readonly kind: 'hang-server'; readonly server: string }
  );

/**
 * The Columbia Missourian world: clients → a load balancer with health checks
 * → `servers.count` web servers (workers, a page cache each) → one database.
 */
export interface WebFarmScenario extends ScenarioCommon {
  readonly world: 'web-farm';
  /** The web servers, all alike, named web1, web2…; see {@link ServerShape}. */
  readonly servers: ServerShape & { readonly count: number };
  /** The balancer's health checks; see {@link HealthShape}. */
  readonly balancer: HealthShape;
  /** The database behind every server's cache. */
  readonly origin: { readonly capacityQps: number; readonly workers: number; readonly maxQueue: number };
  /**
   * Each server's page cache: freshness; for damper, the stale window, the
   * origin budget (page loads in flight per server) and the warm-up of a
   * restarted server (loads started per second, loads in flight).
   */
  readonly cache: { readonly ttlS: number; readonly staleForS: number; readonly maxLoads: number; readonly warmRate: number; readonly warmConcurrency: number };
  /** Page popularity: named hot pages with their share of requests, the rest spread over `tailCount` pages. The first hot page is the one health checks request. */
  readonly keys: { readonly hot: readonly { readonly key: string; readonly share: number }[]; readonly tailCount: number };
  readonly faults: readonly WebFarmFault[];
}

/** The name of server `i` (0-based). */
export function serverId(i: number): string {
  return `web${i + 1}`;
}

/** Checks a web-farm scenario document. */
export function parseWebFarm(o: Record<string, Json>, where: string): WebFarmScenario {
  const at = (field: string): string => `${where}.${field}`;
  const serversDoc = object(o.servers, at('servers'));
  const balancerDoc = object(o.balancer, at('balancer'));
  const cacheDoc = object(o.cache, at('cache'));
  const keysDoc = object(o.keys, at('keys'));
  const servers = {
    count: num(serversDoc, 'count', at('servers'), { min: 1, integer: true, max: 100 }),
    cores: num(serversDoc, 'cores', at('servers'), { min: 1, integer: true, max: 1024 }),
    workers: num(serversDoc, 'workers', at('servers'), { min: 1, integer: true, max: 10_000 }),
    limit: num(serversDoc, 'limit', at('servers'), { min: 1, integer: true, max: 10_000 }),
    backlog: num(serversDoc, 'backlog', at('servers'), { min: 0, integer: true, max: 1_000_000 }),
    hitMs: num(serversDoc, 'hitMs', at('servers'), { min: 1, integer: true, max: 60_000 }),
    renderMs: num(serversDoc, 'renderMs', at('servers'), { min: 0, integer: true, max: 60_000 }),
  };
  const balancer = {
    intervalS: num(balancerDoc, 'intervalS', at('balancer'), { min: 0.001, max: 3600 }),
    timeoutMs: num(balancerDoc, 'timeoutMs', at('balancer'), { min: 2, integer: true, max: 600_000 }),
    fall: num(balancerDoc, 'fall', at('balancer'), { min: 1, integer: true, max: 100 }),
    rise: num(balancerDoc, 'rise', at('balancer'), { min: 1, integer: true, max: 100 }),
  };
  const hot = array(keysDoc.hot, at('keys.hot')).map((h, i) => {
    const ho = object(h, at(`keys.hot[${i}]`));
    return { key: str(ho, 'key', at(`keys.hot[${i}]`)), share: num(ho, 'share', at(`keys.hot[${i}]`), { min: 0, max: 1 }) };
  });
  if (hot.length === 0) throw new ScenarioError(at('keys.hot'), 'needs at least one page (the first is the one health checks request)');
  const hotShare = hot.reduce((sum, h) => sum + h.share, 0);
  if (hotShare > 1 + 1e-9) throw new ScenarioError(at('keys.hot'), `shares add up to ${hotShare}, more than 1`);
  const tailCount = num(keysDoc, 'tailCount', at('keys'), { min: 0, integer: true, max: 1_000_000 });
  if (tailCount === 0 && hotShare < 1 - 1e-9) throw new ScenarioError(at('keys'), 'hot shares must add up to 1 when tailCount is 0');
  const ids = Array.from({ length: servers.count }, (_, i) => serverId(i));
  const common = checkCommon(o, where, (fo, span, w): WebFarmFault => {
    switch (span.kind) {
      case 'traffic-spike':
        return { ...span, kind: 'traffic-spike', factor: num(fo, 'factor', w, { min: 0, max: 100 }), trigger: true };
      case 'hang-server': {
        const server = str(fo, 'server', w);
        if (!ids.includes(server)) throw new ScenarioError(`${w}.server`, `"${server}" is not a server (known: ${ids.join(', ')})`);
        return { ...span, kind: 'hang-server', server, trigger: true };
      }
      default:
        throw new ScenarioError(`${w}.kind`, `unknown fault kind "${span.kind}" (known: traffic-spike, hang-server)`);
    }
  });
  return {
    ...common,
    world: 'web-farm',
    servers,
    balancer,
    origin: parseOrigin(o, where),
    cache: {
      ...parseCacheWindows(cacheDoc, at('cache')),
      maxLoads: num(cacheDoc, 'maxLoads', at('cache'), { min: 1, integer: true, max: 10_000 }),
      warmRate: num(cacheDoc, 'warmRate', at('cache'), { min: 0.001 }),
      warmConcurrency: num(cacheDoc, 'warmConcurrency', at('cache'), { min: 1, integer: true }),
    },
    keys: { hot, tailCount },
    faults: common.faults as readonly WebFarmFault[],
  };
}

/** The web-farm world, for the registry in worlds.ts. */
export const webFarm: WorldKind<WebFarmScenario> = {
  parse: parseWebFarm,
  run: (scenario, variant, seed, onProgress) => runWebFarm(scenario, variant, seed, onProgress),
  originCapacityQps: (scenario) => scenario.origin.capacityQps,
  trigger: spanAxis('server hung, s', (s) => s.faults.find((f) => f.kind === 'hang-server')!),
};

/**
 * Runs one variant of a web-farm scenario. Both variants get the same
 * arrivals and pages, the same servers and database, and the same faults; they
 * differ in the balancer and in what runs on the servers.
 */
export async function runWebFarm(scenario: WebFarmScenario, variant: VariantName, seed: number, onProgress?: (fraction: number) => void): Promise<VariantRun> {
  const clock = new VirtualClock({ seed });
  const recorder = new Recorder(scenario.durationS);
  const network = new Network(clock, scenario.network.hopDelay, seed);
  const db = new Database(clock, recorder, scenario.origin, network);
  const picker = new KeyPicker(scenario.keys.hot, scenario.keys.tailCount);
  const keys = picker.keys;
  const ids = Array.from({ length: scenario.servers.count }, (_, i) => serverId(i));
  let servers: WebServer[];
  let door: FrontDoor;
  if (variant === 'naive') {
    servers = ids.map((id) => new NaiveServer(id, clock, db, scenario.servers, scenario.cache.ttlS));
    door = new NaiveBalancer(clock, servers, scenario.balancer, keys[0]!);
  } else {
    const options = { ttlS: scenario.cache.ttlS, staleForS: scenario.cache.staleForS, warmRate: scenario.cache.warmRate, warmConcurrency: scenario.cache.warmConcurrency, maxLoads: scenario.cache.maxLoads, keys };
    const damperServers = ids.map((id) => new DamperServer(id, clock, db, scenario.servers, options));
    servers = damperServers;
    door = new DamperFrontDoor(clock, damperServers, scenario.balancer);
  }
  // Steady state, not a cold start: every server has served for a long time,
  // so each holds every page with a remaining freshness spread evenly over the
  // ttl. Drawn from a stream of its own, equal for both variants.
  const freshness = remainingFreshness(seed, scenario.cache.ttlS * 1000);
  for (const server of servers) for (const key of keys) await server.prewarm(key, db.read(key), freshness());

  const pick = (random: () => number): string => picker.pick(random);
  const clients: Clients<WebFarmFault> = new Clients<WebFarmFault>(
    { clock, recorder, scenario, seed, network },
    {
      send(req, replies) {
        void door.send(req.key, req.population.priority, req.population.timeoutMs).then((outcome) => {
          if (outcome instanceof Error) return replies.fail(req);
          // A page the server had to render from the database waited for it.
          if (!outcome.hit) req.waitedForOrigin = true;
          replies.answer(req);
        });
      },
      fault({ fault, starts }) {
        if (fault.kind === 'traffic-spike') clients.load = starts ? fault.factor : 1;
        else {
          const server = servers[ids.indexOf(fault.server)]!;
          if (starts) server.hang();
          else server.restart();
        }
      },
      keys: () => pick,
    },
  );

  try {
    await clients.run(onProgress);
  } finally {
    door.close();
    for (const s of servers) if (s instanceof DamperServer) s.close();
  }
  return clients.result();
}
