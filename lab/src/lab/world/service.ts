import { type Cache, type CacheOptions, VirtualClock } from 'damper';
import { type ClientRequest, Clients, type Replies, type RunOptions } from '../engine/clients.js';
import { cacheOptions, damperSettings, type DamperSettings } from '../damper-config.js';
import { DamperGauges } from '../judge/damper-gauges.js';
import { LabCounters } from '../judge/lab-counters.js';
import { Recorder } from '../judge/metrics.js';
import { Network } from '../engine/network.js';
import { type VariantName, type VariantRun } from '../judge/results.js';
import { type Json, replaceFault, ScenarioError, sizeAxis, spanAxis } from '../scenario.js';
import { check } from '../schema/problems.js';
import { serviceFaultSchema, serviceSchema } from '../schema/service.js';
import { remainingFreshness, stream, STREAMS } from '../engine/streams.js';
import { type WorldKind } from './worlds.js';
import { KeySets } from './key-sets.js';
import { Database, type Queryable, type Row } from './database.js';
import { type Answer, answerOf } from './service-answers.js';
import { damperService } from './service-damper.js';
import { damperCacheDefaults, type DatabaseAccess, type DataTier, databaseOnly, inProcessTier, type QueryCounts } from './service-data.js';
import { ConnectionPool } from './connection-pool.js';
import { type Render, renderOn, rendering } from './render.js';
import { serverCapacityQps } from './service-best.js';
import { serviceState, type ServiceState } from './service-faults.js';
import { cacheNodes, damperCacheNodes, damperNodeOptions, naiveCacheNodes, serverConnections } from './service-cache-nodes.js';
import { type CacheCluster } from './cache-nodes.js';
import { naiveCall, naiveFront, type PeerTiers, roundRobin } from './service-naive.js';
import { type Call } from './naive-tiers.js';
import { peerTier } from './peer-tier.js';
import { type RetryCounts } from '../judge/lab-counters.js';
import { checkStackApplies, loadCachePeer, loadPolicyPeer } from '../stacks/peers.js';
import { type CachePeer, isCachePeer, isPolicyPeer, type Knobs, type PeerPolicy, type PolicyPeer, type StackSpec, systemOf } from '../stacks/stack.js';
import { cachePlan, peerCacheNodes, peerCacheTier } from './peer-cache-tier.js';
import { installVirtualTime } from 'damper/testing';
import { undiciSystem } from '../stacks/undici-stack.js';
import { peerPlan } from '../stacks/tier-plan.js';
import { Server } from './service-server.js';
import { TrafficCut } from './traffic-cut.js';
import { markSource, queried } from './origin-waits.js';

/**
 * The service world (issue 12, part 2): a system a user shapes to their own
 * architecture from parts, without code. Client populations (open loop, or
 * closed loop with think time) → optional client tiers (each retrying, each
 * on servers of its own if the scenario gives them) → an
 * optional balancer → `servers.count` servers (workers and a queue, or
 * processor sharing; a service-time distribution; a slowdown with the work
 * held) → an optional cache tier → an optional database, keys read by Zipf's
 * law. Faults: capacity drop, slowdown, hang, node degradation, invalid
 * value, load spike, a load ramp given as a profile, and a cache flush.
 * docs/lab.md ("The service world") has the model and both variants.
 */

/** A service scenario and its faults: the types the schema infers (schema/service.ts), each field described there. */
export type { ServiceFault, ServiceScenario } from '../schema/service.js';
import { type ServiceFault, type ServiceScenario } from '../schema/service.js';

export function parseService(o: Record<string, Json>, where: string): ServiceScenario {
  return check(serviceSchema, o, where);
}

export const service: WorldKind<ServiceScenario> = {
  parse: parseService,
  run: (scenario, variant, seed, options) => runService(scenario, variant, seed, options),
  originCapacityQps: (scenario) => scenario.database?.capacityQps ?? serverCapacityQps(scenario),
  // Without a cache tier every answer waits: no hit ratio to chart.
  cached: (scenario) => scenario.cache !== undefined,
  trigger: spanAxis('trigger held (s)'),
  // The first trigger with a size: a factor (a slowdown, a spike…), or an invalid value's hot key, sized by its share of reads (facebook-2010).
  triggerSize: sizeAxis(
    'trigger factor (×)',
    (s) => s.faults.find((f): f is SizedFault => f.trigger && ('factor' in f || (f.kind === 'invalid-value' && hotShare(s, f.key) !== undefined))),
    (f, s) => ('factor' in f ? f.factor : hotShare(s, f.key)!),
    (s, f, size) => ('factor' in f ? withFactor(s, f, size) : withHotShare(s, f.key, size)),
    (f) => ('factor' in f ? 'trigger factor (×)' : "invalid key's share of reads"),
  ),
};

/** A trigger the sweep can size: one with a factor, or an invalid value of a hot key. */
type SizedFault = Extract<ServiceFault, { factor: number }> | Extract<ServiceFault, { kind: 'invalid-value' }>;

/** The scenario with trigger `f`'s factor `factor`, within the range its kind takes (a degraded node keeps at most all of its throughput). */
function withFactor(scenario: ServiceScenario, f: Extract<ServiceFault, { factor: number }>, factor: number): ServiceScenario {
  const resized = check(serviceFaultSchema, { ...f, factor } as unknown as Json, `${scenario.name}: faults[${scenario.faults.indexOf(f)}]`) as typeof f;
  return replaceFault(scenario, f, resized);
}

/** The share of reads of hot key `key`, or undefined when it is not a hot key. */
function hotShare(scenario: ServiceScenario, key: string): number | undefined {
  return scenario.keys?.hot?.find((h) => h.key === key)?.share;
}

/** The scenario with hot key `key` read by `share` of requests; the Zipf tail takes the difference, so the hot keys may not pass 1. */
function withHotShare(scenario: ServiceScenario, key: string, share: number): ServiceScenario {
  const hot = scenario.keys!.hot!;
  const others = hot.reduce((sum, h) => (h.key === key ? sum : sum + h.share), 0);
  if (!(share > 0 && share + others <= 1)) {
    throw new ScenarioError(scenario.name, [{ field: 'keys.hot', problem: `the invalid key's share must be above 0 and at most ${Number((1 - others).toFixed(6))} (the other hot keys hold ${Number(others.toFixed(6))}), got ${share}` }]);
  }
  return { ...scenario, keys: { ...scenario.keys!, hot: hot.map((h) => (h.key === key ? { ...h, share } : h)) } };
}

/**
 * What a variant's characteristic metrics are read from: damper's through
 * damper/otel's instruments on its own objects, naive's from the lab's
 * counters with the same definitions.
 */
type Observed = { readonly variant: 'naive'; readonly counters: LabCounters } | { readonly variant: 'damper'; readonly gauges: DamperGauges };

/**
 * How the servers reach `db`: straight, or each through a pool of
 * `servers.databaseConnections` connections; the one `Cache` that stands
 * for every server's (damper without cache nodes) through a pool of all of
 * them together. With `servers.missService`, a row a server gets is then
 * rendered on it (`render(i)`): the query's answer comes after that work.
 */
function databaseAccess(clock: VirtualClock, scenario: ServiceScenario, db: Database, render: (server: number) => Render): DatabaseAccess {
  const { count, databaseConnections: size } = scenario.servers;
  const ways: Queryable[] = size === undefined ? Array.from({ length: count }, () => db) : Array.from({ length: count }, () => new ConnectionPool(clock, size, db));
  const tier = size === undefined ? db : new ConnectionPool(clock, size * count, db);
  if (scenario.servers.missService === undefined) return { server: (i) => ways[i]!, tier };
  const rendered = ways.map((way, i) => rendering(way, render(i)));
  return { server: (i) => rendered[i]!, tier };
}

/**
 * The cache tier and database behind the servers, per variant: none, the
 * database alone, or a cache in front of it (its reads and loads observed):
 * without `cache.nodes` one in-process tier for all, with them a client per
 * server over the nodes (service-cache-nodes.ts).
 */
function dataTier(clock: VirtualClock, scenario: ServiceScenario, observed: Observed, database: Database | undefined, keyCount: number, settings: DamperSettings, nodes: CacheCluster | undefined, render: (server: number) => Render, peer: Peers['cache']): (DataTier & { readonly caches?: readonly Cache<Row>[] }) | undefined {
  if (database === undefined) return undefined;
  const db = databaseAccess(clock, scenario, database, render);
  const shape = scenario.cache;
  if (shape === undefined) return databaseOnly(db);
  const servers = scenario.servers.count;
  const workers = scenario.database!.workers;
  // In the servers' memory: naive's maps or damper's Cache(s), composed as a real run's server composes them.
  const origin = { server: (i: number) => queried(db.server(i)), tier: queried(db.tier) };
  if (peer !== undefined) {
    // A peer's cache in place of naive's (issue 31): in the servers' memory, or its two levels over the nodes.
    const plan = cachePlan(shape, keyCount, peer.knobs, peer.timeScale);
    if (nodes === undefined) return peerCacheTier(clock, shape, servers, origin, peer.peer, plan);
    return peerCacheNodes(clock, db, nodes, shape, [...Array(servers).keys()], peer.peer, plan, serverConnections(nodes, shape));
  }
  if (observed.variant === 'naive') {
    // A server that tries failed queries again is a retrying client too.
    const counts = (name: string): QueryCounts => ({ cache: observed.counters.cache(name), ...(shape.naive.queryRetries > 0 ? { retry: observed.counters.retry(name) } : {}) });
    if (nodes === undefined) return inProcessTier(clock, shape, servers, db, origin, { variant: 'naive', counts });
    return naiveCacheNodes(clock, db, nodes, shape, (i) => counts(`server=${i}`), serverConnections(nodes, shape));
  }
  if (nodes === undefined) {
    // Each server's own Cache (or the tier's one, facebook-2010) under the configuration's cache(i), asked again when a server restarts.
    const options = (i: number): CacheOptions<Row> => cacheOptions(settings, i, damperCacheDefaults(shape, keyCount, workers), { clock });
    return inProcessTier(clock, shape, servers, db, origin, { variant: 'damper', options, watch: observed.gauges.watch });
  }
  // Each server's Cache under the configuration's cache(i), the origin budget split over the servers.
  const lab = damperNodeOptions(clock, scenario, keyCount, settings, (limiter, i) => observed.gauges.watch(limiter, { server: i }));
  const tier = damperCacheNodes(clock, db, nodes, shape, [...Array(servers).keys()], lab, serverConnections(nodes, shape));
  tier.caches.forEach((cache, i) => observed.gauges.watch(cache, { server: i }));
  return tier;
}

/**
 * Puts the cache nodes in the state the faults make: round trips × `slow`,
 * throughput × `keep`; stopped while `hung`; refusing while `down`, and
 * started again empty when it ends.
 */
function applyToNodes(nodes: CacheCluster, state: ServiceState['cacheNodes']): void {
  state.forEach((s, i) => {
    const node = nodes.nodes[i]!;
    if (node.state === 'ejected') return;
    node.slowness = s.slow;
    if (node.share !== s.keep) node.degrade(s.keep);
    if (s.down) node.fail();
    else node.restart();
    if (s.hung) node.hang();
    else node.resume();
  });
}

/** An ejection's start takes node `n` off the ring, its keys moving to the others cold; its end puts an empty replacement back. */
function ejection(nodes: CacheCluster, n: number, starts: boolean): void {
  if (starts) nodes.eject(n);
  else nodes.rejoin(n);
}

/** What the user's request ended with, told to the clients. Without a database the servers are the origin: every answer waited. */
function reply(req: ClientRequest, replies: Replies, a: Answer, originIsServer: boolean): void {
  switch (a.outcome) {
    case 'ok':
      markSource(req, originIsServer ? 'origin' : a.source);
      return replies.answer(req);
    case 'invalid':
      return replies.invalid(req);
    case 'shed':
      replies.shed(req);
      return replies.fail(req);
    default:
      return replies.fail(req);
  }
}

/** How a variant sends a user's request into the system: naive's callbacks, or damper's guards and balancer (each observed). */
function requestPath(clock: VirtualClock, scenario: ServiceScenario, observed: Observed, servers: readonly Server[], settings: DamperSettings, seed: number, probeKey: string, arrived: (() => void) | undefined, peer: PeerTierPlan | undefined) {
  const hosts = tierServers(clock, scenario, seed);
  if (observed.variant === 'naive') {
    const { front, close } = naiveFront(clock, servers, scenario.balancer, probeKey);
    // The client tiers retry (without them the users do, which no tier sees); naive's servers have no limiter to shed with.
    const counts = Array.from({ length: scenario.tiers?.count ?? 0 }, (_, t) => observed.counters.retry(`tier=${t}`));
    const peers = peer === undefined ? undefined : peerTiers(clock, scenario, peer, counts);
    const call = naiveCall(clock, front, scenario.tiers, stream(seed, STREAMS.retryJitter), counts, hosts.map((pool) => (pool === undefined ? undefined : roundRobin(pool))), peers?.tiers);
    return {
      send: (req: ClientRequest, done: (a: Answer) => void) => call(req.population, req.key, done),
      close: () => (peers?.close(), close()),
    };
  }
  const { send, close } = damperService(clock, servers, scenario, settings, observed.gauges.watch, arrived, hosts);
  return {
    send: (req: ClientRequest, done: (a: Answer) => void): void => {
      const { population: p } = req;
      send(req.key, p.priority, req.start + p.timeoutMs).then(done, (error: unknown) => done(answerOf(error)));
    },
    close,
  };
}

/** A policy peer and what its tiers are told besides the scenario. */
interface PeerTierPlan {
  readonly peer: PolicyPeer;
  readonly knobs: Knobs;
  readonly timeScale: number;
}

/**
 * The peer's client tiers: one policy per tier (one breaker, one bulkhead,
 * as a tier's process builds them once), built at the tier's first call,
 * inside the run, where the platform's time is the run's; the first
 * population's retries and backoff, as a real tier's one client takes them.
 */
function peerTiers(clock: VirtualClock, scenario: ServiceScenario, { peer, knobs, timeScale }: PeerTierPlan, counts: readonly RetryCounts[]): { tiers: PeerTiers; close(): void } {
  const policies: PeerPolicy[] = [];
  return {
    tiers: (t, below, patienceMs) => {
      const policy = (): PeerPolicy => (policies[t] ??= peer.tier(peerPlan(scenario, t, knobs, timeScale, clock)));
      let built: Call<Answer> | undefined;
      return (key, onDone) => (built ??= peerTier(clock, policy(), below, counts[t], patienceMs))(key, onDone);
    },
    close: () => policies.forEach((p) => p.close()),
  };
}

/** The servers each client tier runs on (`tiers.each[t].servers`), per tier; undefined for a tier that costs nothing. */
function tierServers(clock: VirtualClock, scenario: ServiceScenario, seed: number): (readonly Server[] | undefined)[] {
  const serviceTimes = stream(seed, STREAMS.tierServiceTime);
  return (scenario.tiers?.each ?? []).map(({ servers: shape }) => (shape === undefined ? undefined : Array.from({ length: shape.count }, () => new Server(clock, shape, serviceTimes, undefined))));
}

/**
 * Runs one variant of a service scenario. Both variants get the same
 * open-loop arrivals and keys, the same servers, cache and database, and the
 * same faults; they differ in the client tiers, the front, the servers'
 * admission and the cache.
 */
export async function runService(scenario: ServiceScenario, variant: VariantName, seed: number, options: RunOptions = {}): Promise<VariantRun> {
  return runStack(scenario, { stack: variant, knobs: {} }, seed, options);
}

/**
 * Runs one stack of a service scenario (issue 31): one of the lab's two
 * variants, or a peer stack in naive's system. undici's is naive's with
 * undici's backoff; a policy peer's library (cockatiel, opossum) makes the
 * client tiers, its clock and timers the run's (`platformTime: 'virtual'`),
 * so its run is as reproducible from the seed as damper's.
 */
export async function runStack(scenario: ServiceScenario, spec: StackSpec, seed: number, options: RunOptions & { readonly timeScale?: number } = {}): Promise<VariantRun> {
  const { stack, knobs } = spec;
  const timeScale = options.timeScale ?? 1;
  if (stack === 'undici') return runStack(undiciSystem(scenario, timeScale), { stack: 'naive', knobs: {} }, seed, options);
  checkStackApplies(scenario, stack);
  const peers: Peers = {
    ...(isPolicyPeer(stack) ? { client: { peer: await loadPolicyPeer(stack), knobs, timeScale } } : {}),
    ...(isCachePeer(stack) ? { cache: { peer: await loadCachePeer(stack), knobs, timeScale } } : {}),
  };
  const clock = new VirtualClock({ seed });
  if (peers.client === undefined && peers.cache === undefined) return runSystem(scenario, systemOf(stack), clock, seed, options, peers);
  // A peer's library reads the platform's clock and timers from its construction on: the run's, from here to its end.
  const release = installVirtualTime(clock);
  try {
    return await runSystem(scenario, 'naive', clock, seed, { ...options, platformTime: 'virtual' }, peers);
  } finally {
    release();
  }
}

/** The peers a run's system is made with: its client tiers' library, its in-process cache's. */
interface Peers {
  readonly client?: PeerTierPlan;
  readonly cache?: { readonly peer: CachePeer; readonly knobs: Knobs; readonly timeScale: number };
}

/** Runs the system of `variant` (a peer's is naive's), with `peers` in place of its client tiers or its cache. */
async function runSystem(scenario: ServiceScenario, variant: VariantName, clock: VirtualClock, seed: number, options: RunOptions, peers: Peers): Promise<VariantRun> {
  const recorder = new Recorder(scenario.durationS);
  const network = new Network(clock, scenario.network.hopDelay, seed);
  const settings = variant === 'damper' ? await damperSettings(scenario, clock) : {};
  const observed: Observed = variant === 'naive' ? { variant, counters: new LabCounters(clock) } : { variant, gauges: new DamperGauges(clock) };
  const keys = scenario.database === undefined ? undefined : new KeySets(scenario.clients, scenario.keys);
  const db = scenario.database === undefined ? undefined : new Database(clock, recorder, scenario.database, network);
  const nodes = scenario.cache?.nodes === undefined ? undefined : cacheNodes(clock, scenario.cache, network, stream(seed, STREAMS.cacheLatency));
  // The servers exist once the data tier does (each reads through it); a render is their work, looked up when it happens.
  const servers: Server[] = [];
  const missService = scenario.servers.missService;
  const renderTimes = stream(seed, STREAMS.renderTime);
  const render = (i: number): Render => renderOn(() => servers[i]!, missService!, renderTimes);
  const data = dataTier(clock, scenario, observed, db, keys?.keys.length ?? 0, settings, nodes, render, peers.cache);
  if (data !== undefined && scenario.cache !== undefined) {
    // Steady state: every key cached, its remaining freshness spread evenly over the ttl.
    await data.prewarm(keys!, (key) => db!.read(key), remainingFreshness(seed, scenario.cache.ttlS * 1000), seed);
  }
  const serviceTimes = stream(seed, STREAMS.serviceTime);
  // Without a database the servers are the origin: every attempt reaching one counts, admitted or shed (a shed costs the server a request too).
  const arrived = db === undefined ? () => recorder.originQuery(clock.now()) : undefined;
  // naive's servers take every attempt; damper's are counted before their admission.
  for (let i = 0; i < scenario.servers.count; i++) servers.push(new Server(clock, scenario.servers, serviceTimes, data?.reader(i), variant === 'naive' ? arrived : undefined));
  const path = requestPath(clock, scenario, observed, servers, settings, seed, keys?.keys[0] ?? '', arrived, peers.client);
  const active = new Set<ServiceFault>();
  const apply = (t: number): void => {
    const state = serviceState(scenario, active, t / 1000);
    state.servers.forEach((s, i) => Object.assign(servers[i]!, s));
    if (nodes !== undefined) applyToNodes(nodes, state.cacheNodes);
    if (db !== undefined) db.slowdown = state.databaseSlowdown;
    clients.load = state.load;
  };
  // A new process in server i's place (a hang's end, an operator's restart): before the fault is applied, so what the old one held is reset, never answered.
  const restart = (i: number): void => {
    servers[i]!.restart();
    data?.restart?.(i);
  };
  const door = new TrafficCut(stream(seed, STREAMS.admission));
  const clients: Clients<ServiceFault> = new Clients<ServiceFault>(
    { clock, recorder, scenario, seed, network, retriedBy: scenario.tiers === undefined ? 'clients' : 'world', characteristics: observed.variant === 'naive' ? observed.counters : observed.gauges },
    {
      send(req, replies) {
        if (door.turnsAway()) replies.fail(req);
        else path.send(req, (a) => reply(req, replies, a, db === undefined));
      },
      fault({ fault, starts }, t) {
        if (starts) active.add(fault);
        else active.delete(fault);
        if (fault.kind === 'invalid-value') {
          const row = db!.write(fault.key, !starts);
          if (starts) data!.push(fault.key, row);
        } else if (fault.kind === 'cache-flush' && starts) data!.flush();
        else if (fault.kind === 'eject-cache') for (const n of fault.nodes) ejection(nodes!, n, starts);
        else if (fault.kind === 'cut-traffic') door.cut(t, starts ? undefined : fault.rampS * 1000);
        else if (fault.kind === 'hang' && fault.then === 'restart' && !starts) restart(fault.server);
        else if (fault.kind === 'restart' && starts) for (const i of fault.servers ?? servers.keys()) restart(i);
        apply(t);
      },
      ...(keys === undefined ? {} : { keys: (population) => keys.pickerOf(population.name) }),
      everyStep: (t) => {
        door.update(t);
        for (const f of active) if (f.kind === 'load-ramp') return apply(t);
      },
    },
  );
  try {
    await clients.run(options);
  } finally {
    path.close();
    data?.close?.();
    for (const cache of data?.caches ?? []) cache.close();
  }
  return clients.result();
}
