import { VirtualClock } from 'damper';
import { damperSettings } from '../damper-config.js';
import { Clients, type RunOptions } from '../clients.js';
import { Recorder } from '../metrics.js';
import { Network } from '../network.js';
import { type VariantName, type VariantRun } from '../results.js';
import { type FaultSpanDoc, type Json, type ScenarioCommon, replaceFault, sizeAxis, spanAxis } from '../scenario.js';
import { check } from '../schema/problems.js';
import { serverId, webFarmSchema } from '../schema/web-farm.js';
import { KeyPicker } from '../traffic.js';
import { remainingFreshness } from '../streams.js';
import { type WorldKind } from '../worlds.js';
import { Database } from './database.js';
import { markSource } from './origin-waits.js';
import { DamperFrontDoor, type FrontDoor, type HealthShape, NaiveBalancer } from './front-door.js';
import { DamperServer, NaiveServer, type ServerShape, type WebServer } from './web-server.js';
import { DamperGauges } from '../damper-gauges.js';
import { LabCounters } from '../lab-counters.js';

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

/** The name of server `i` (0-based), as a `hang-server` fault names it: part of the scenario format, so it lives with the schema. */
export { serverId };

/** Checks a web-farm scenario document. */
export function parseWebFarm(o: Record<string, Json>, where: string): WebFarmScenario {
  return check(webFarmSchema, o, where);
}

/** The web-farm world, for the registry in worlds.ts. */
export const webFarm: WorldKind<WebFarmScenario> = {
  parse: parseWebFarm,
  run: (scenario, variant, seed, options) => runWebFarm(scenario, variant, seed, options),
  originCapacityQps: (scenario) => scenario.origin.capacityQps,
  cached: () => true,
  trigger: spanAxis('server hung (s)', (s) => s.faults.find((f) => f.kind === 'hang-server')!),
  triggerSize: sizeAxis(
    'traffic spike (× the clients’ rates)',
    (s) => s.faults.find((f) => f.kind === 'traffic-spike'),
    (f) => f.factor,
    (s, f, factor) => replaceFault(s, f, { ...f, factor }),
  ),
};

/**
 * Runs one variant of a web-farm scenario. Both variants get the same
 * arrivals and pages, the same servers and database, and the same faults; they
 * differ in the balancer and in what runs on the servers.
 */
export async function runWebFarm(scenario: WebFarmScenario, variant: VariantName, seed: number, options: RunOptions = {}): Promise<VariantRun> {
  const clock = new VirtualClock({ seed });
  const recorder = new Recorder(scenario.durationS);
  const network = new Network(clock, scenario.network.hopDelay, seed);
  const db = new Database(clock, recorder, scenario.origin, network);
  const picker = new KeyPicker(scenario.keys.hot, scenario.keys.tailCount);
  const keys = picker.keys;
  const ids = Array.from({ length: scenario.servers.count }, (_, i) => serverId(i));
  let servers: WebServer[];
  let door: FrontDoor;
  let characteristics: LabCounters | DamperGauges;
  if (variant === 'naive') {
    const counters = new LabCounters(clock);
    characteristics = counters;
    servers = ids.map((id) => new NaiveServer(id, clock, db, scenario.servers, scenario.cache.ttlS, counters.cache(`server=${id}`)));
    door = new NaiveBalancer(clock, servers, scenario.balancer, keys[0]!);
  } else {
    const settings = await damperSettings(scenario, clock);
    const gauges = new DamperGauges(clock);
    characteristics = gauges;
    const options = { ttlS: scenario.cache.ttlS, staleForS: scenario.cache.staleForS, warmRate: scenario.cache.warmRate, warmConcurrency: scenario.cache.warmConcurrency, maxLoads: scenario.cache.maxLoads, keys, settings, watch: gauges.watch };
    const damperServers = ids.map((id, index) => new DamperServer(id, clock, db, scenario.servers, { ...options, index }));
    servers = damperServers;
    door = new DamperFrontDoor(clock, damperServers, scenario.balancer, settings);
  }
  // Steady state, not a cold start: every server has served for a long time,
  // so each holds every page with a remaining freshness spread evenly over the
  // ttl. Drawn from a stream of its own, equal for both variants.
  const freshness = remainingFreshness(seed, scenario.cache.ttlS * 1000);
  for (const server of servers) for (const key of keys) await server.prewarm(key, db.read(key), freshness());

  const pick = (random: () => number): string => picker.pick(random);
  const clients: Clients<WebFarmFault> = new Clients<WebFarmFault>(
    { clock, recorder, scenario, seed, network, characteristics },
    {
      send(req, replies) {
        void door.send(req.key, req.population.priority, req.population.timeoutMs).then((outcome) => {
          if (outcome instanceof Error) return replies.fail(req);
          // A page the server had to render from the database waited for it; a stale one is not a hit.
          markSource(req, outcome.source);
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
    await clients.run(options);
  } finally {
    door.close();
    for (const s of servers) if (s instanceof DamperServer) s.close();
  }
  return clients.result();
}
