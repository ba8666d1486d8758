import { z } from 'zod';
import { exponentForHitRatio } from '../world/zipf.js';
import { readRate as populationReadRate } from '../world/key-sets.js';
import { backoff, type Delay, delay, healthChecks, hotKey, origin, parsed, refined, type Report, scenario, span, tagged, when } from './common.js';

/**
 * The service world's scenario file: a system shaped like the user's own,
 * from parts: client populations (open or closed loop), optional client
 * tiers, an optional balancer over `servers.count` servers, an optional
 * cache tier in front of an optional database, Zipf keys, and faults.
 */

/** What every pool of servers has: the servers' (the innermost tier's upstreams) and a client tier's own. */
const poolFields = {
  count: z.int().min(1).max(100).default(1).meta({ description: 'Servers, all alike (default 1).' }),
  workers: z.int().min(1).max(100_000).meta({ description: 'Requests in service at once per server (threads).' }),
  maxQueue: z.int().min(0).max(10_000_000).meta({ description: 'Requests waiting for a worker beyond which a server refuses at once.' }),
  cores: z.number().min(0.01).max(1024).exactOptional().meta({ description: 'Processor sharing: the requests in service share this many cores; absent, each worker serves alone.' }),
  service: delay.meta({ description: 'The work a request costs an idle server, ms, drawn per request.' }),
};
const slowdownPerInFlight = z.number().min(0).max(100).default(0).meta({ description: 'Each request a server holds (in service and queued) adds this share to every service time started.' });
const admissionLimit = z.int().min(1).max(1_000_000).exactOptional();

/**
 * The servers a client tier runs on (the API in front of the profile
 * service): a call to the tier waits for one of them, holds a worker while
 * the tier makes its attempts at the tier below, then costs its own work.
 */
const tierServers = z
  .strictObject({
    ...poolFields,
    slowdownPerInFlight,
    admissionLimit: admissionLimit.meta({ description: 'damper: requests the lab’s ConcurrencyLimiter admits per server of this tier at once (default: workers).' }),
  })
  .meta({
    description:
      'The servers this tier runs on, a pool of its own (an API in front of the service the scenario’s servers are): a call to this tier waits for a worker of one of them (naive: round robin; damper: the tier above balances over them, each behind its own Admission), holds it while this tier makes its attempts at the tier below, then costs `service` of work (on the worker, or on the shared cores: a Node server is one core and many workers). Not for tier 0, the users’ own client. Faults reach the scenario’s servers only.',
  });

/** One client tier's own settings, where they differ from the populations'. */
const tierSettings = z
  .strictObject({
    retries: z.int().min(0).max(10).exactOptional().meta({ description: 'Retries this tier makes at the tier below per call (default: the population’s).' }),
    backoff: backoff.exactOptional().meta({ description: 'naive: the wait before each of this tier’s retries (default: the population’s). damper’s tiers wait as its Retry does.' }),
    attemptTimeoutMs: z.int().min(1).max(600_000).exactOptional().meta({ description: 'This tier’s timeout per attempt at the tier below, ms (default: none; the innermost’s: tiers.attemptTimeoutMs).' }),
    timerTickMs: z
      .int()
      .min(1)
      .max(60_000)
      .exactOptional()
      .meta({ description: 'naive: this tier’s client checks its timeouts on a tick this long (undici: about 500 ms), so an attempt timeout fires at the first tick after it is due, up to a tick late (default: on time). damper’s timers are exact.' }),
    hedgeAfterMs: z
      .int()
      .min(1)
      .max(600_000)
      .exactOptional()
      .meta({
        description:
          'This tier hedges: when an attempt has not answered after this long, ms, it sends one more (naive: always, with no budget; damper: its Dependency’s hedge, drawn from its retry budget, only to another upstream than the one it waits on). The first good answer wins (default: no hedging).',
      }),
    servers: tierServers.exactOptional(),
  })
  .meta({ description: 'A client tier’s own retries, backoff, attempt timeout and hedging, and the servers it runs on, where they differ from the defaults.' });

const serverList = z.array(z.int().min(0)).min(1, 'needs at least one server').exactOptional().meta({ description: 'The servers, by index from 0; default: every server.' });
const nodeList = z.array(z.int().min(0)).min(1, 'needs at least one node').exactOptional().meta({ description: 'The cache nodes, by index from 0; default: every node (the whole tier).' });
const ONE_MS: Delay = { kind: 'constant', ms: 1 };
const factor = (min: number, max: number, description: string) => z.number().min(min).max(max).meta({ description });

/** A fault kind of the service world: a trigger unless it says `trigger: false` (an operator's action); an operator's kind the other way round. */
function serviceFault<const K extends string, S extends z.ZodRawShape>(kind: K, description: string, shape: S, byOperators = false) {
  const trigger = byOperators
    ? z.boolean().default(false).meta({ description: 'An operator’s action (the default); true: part of the incident’s cause.' })
    : z.boolean().default(true).meta({ description: 'Part of the incident’s cause (the default); false: an operator’s action.' });
  return z.strictObject({ kind: z.literal(kind), ...span, trigger, ...shape }).meta({ description });
}

const point = z.tuple([z.number().min(0), z.number().min(0).max(1000)]).meta({ description: '[s from the fault’s start, load factor].' });

/** One fault of the service world; the sweep checks a resized trigger against it. */
export const serviceFaultSchema = tagged('kind', 'fault kind', [
  serviceFault('capacity-drop', 'The servers keep `factor` of their workers (at least 1) and of their cores from startS to endS.', { servers: serverList, factor: factor(0.0001, 1, 'The share of capacity kept.') }),
  serviceFault('slowdown', 'Service times × `factor` from startS to endS, for work starting then: of the servers, or of the database; of the cache nodes, every round trip × `factor` (a slow network or disk, the fault proxy’s added latency).', {
    target: z.enum(['servers', 'database', 'cache']).default('servers').meta({ description: 'What slows down: the servers (default), the database, or the cache tier’s nodes (needs cache.nodes).' }),
    servers: serverList,
    nodes: nodeList,
    factor: factor(0.01, 1000, 'The service-time multiplier.'),
  }),
  serviceFault('hang', 'Server `server` takes requests and answers none from startS to endS; then it answers what it held and serves on, or, with then: restart, it is restarted.', {
    server: z.int().min(0).meta({ description: 'The server, by index from 0.' }),
    then: z
      .enum(['resume', 'restart'])
      .default('resume')
      .meta({ description: 'resume (the default): at endS the process answers what it held, and serves on; restart: at endS a new process starts: every open connection is reset, its workers and queue are free, and its own cache (cache.scope: server) is empty (the Missourian’s web1).' }),
  }),
  serviceFault('degrade-servers', 'Node degradation: the servers keep `factor` of their throughput (service time ÷ factor) from startS to endS; the others are healthy.', {
    servers: z.array(z.int().min(0)).min(1, 'needs at least one server').meta({ description: 'The servers, by index from 0.' }),
    factor: factor(0.0001, 1, 'The share of throughput kept.'),
  }),
  serviceFault('invalid-value', 'The database’s copy of `key` becomes invalid at startS (the write is pushed to the cache tier) and is fixed at endS.', { key: z.string().min(1).meta({ description: 'A key: key:0 (the most popular) … key:<keys.count − 1>.' }) }),
  serviceFault('load-spike', 'Every population’s rate (open loop) and users (closed loop) × `factor` from startS to endS.', { factor: factor(0, 1000, 'The load multiplier.') }),
  serviceFault('load-ramp', 'The load follows a profile from startS to endS: piecewise linear between its points, the last one held until endS; × every population’s rate and users.', {
    profile: z.array(point).min(1, 'needs at least one point').meta({ description: '[[s, factor], …] from the fault’s start, s ascending, the first at 0.' }),
  }),
  serviceFault('degrade-cache', 'Cache nodes keep `factor` of their throughput from startS to endS (a node short of CPU): their queues grow and their answers slow down (needs cache.nodes).', {
    nodes: nodeList,
    factor: factor(0.0001, 1, 'The share of throughput kept.'),
  }),
  serviceFault('hang-cache', 'Cache nodes stop (SIGSTOP) from startS to endS: they take calls and answer none; then they serve what they held (needs cache.nodes).', { nodes: nodeList }),
  serviceFault('kill-cache', 'Cache nodes die at startS: every call is refused at once (connection refused); at endS each starts again in its place, empty (needs cache.nodes).', { nodes: nodeList }),
  serviceFault('eject-cache', 'At startS cache nodes leave the hash ring (their keys move to the other nodes, cold); at endS empty replacements join (needs cache.nodes). Usually an operator’s action: give trigger false, and when.', {
    nodes: z.array(z.int().min(0)).min(1, 'needs at least one node').meta({ description: 'The cache nodes, by index from 0.' }),
    when,
  }),
  serviceFault(
    'cut-traffic',
    'Operators turn traffic away at the front door from startS to endS (each call fails at once), then let it back in linearly over rampS (Facebook 2010’s way out). An operator’s action by default.',
    {
      when,
      rampS: z.number().min(0).default(0).meta({ description: 'Seconds over which traffic is let back in from endS (default 0: all at once).' }),
    },
    true,
  ),
  serviceFault(
    'restart',
    'Operators restart servers at startS (by hand, or a deploy): each a new process: every open connection reset, its workers and queue free, its own cache (cache.scope: server) empty, and damper’s warmed as cache.warm says; endS only ends its span on the timeline. An operator’s action by default.',
    { servers: serverList, when },
    true,
  ),
  serviceFault('cache-flush', 'At startS the cache tier loses every entry (a restart, a flush, a failover to a cold replica); endS only ends its span on the timeline.', {}),
]);

const fields = scenario(
  'service',
  'A world shaped like your own service: client populations (open or closed loop) → optional client tiers → an optional balancer → servers (workers or processor sharing) → an optional cache tier → an optional database.',
  {
    tiers: z
      .strictObject({
        count: z.int().min(1).max(5).meta({ description: 'Tiers of clients between the users and the servers, each retrying at the tier below per the population’s retries and backoff (naive).' }),
        attemptTimeoutMs: z.int().min(1).max(600_000).meta({ description: 'The innermost tier’s timeout per attempt, ms.' }),
        each: z
          .array(tierSettings)
          .exactOptional()
          .meta({ description: 'Each tier’s own settings, outermost first, one per tier: its retries, backoff and attempt timeout (an API that retries 3 times in front of a service that retries once).' }),
      })
      .exactOptional()
      .meta({ description: 'Client tiers (a front end, a mid tier…): with them, the populations’ retries are made at each tier, not by the users.' }),
    balancer: healthChecks
      .exactOptional()
      .meta({ description: 'A balancer over the servers with health checks; without one, requests go to the servers round robin.' }),
    servers: z
      .strictObject({
        ...poolFields,
        missService: delay
          .exactOptional()
          .meta({
            description:
              'More work when a value is loaded from the database, ms, drawn per load (rendering a page from its row): on the server’s workers or cores, after the query. naive pays it for every read that queried; damper’s Cache once per load, shared by the reads that waited for it. Needs database; with a cache of scope tier, its nodes.',
          }),
        slowdownPerInFlight,
        admissionLimit: admissionLimit.meta({ description: 'damper: requests the lab’s ConcurrencyLimiter admits per server at once (default: workers); a configuration module’s admission(i) replaces it.' }),
        databaseConnections: z
          .int()
          .min(1)
          .max(100_000)
          .exactOptional()
          .meta({ description: 'Connections each server’s pool keeps to the database (pg-pool’s max): a query waits for one, and holds it until the database answers, even when its caller gave up (default: no pool, no limit). Needs database.' }),
      })
      .meta({ description: 'The servers: service time service × (1 + slowdownPerInFlight × requests held) × the faults’ slowdown.' }),
    database: origin.exactOptional(),
    cache: z
      .strictObject({
        ttlS: z.number().min(0.001).meta({ description: 'How long a cached value is fresh, s.' }),
        staleForS: z.number().min(0).default(0).meta({ description: 'damper: how long past its freshness a value may be served stale, s.' }),
        loadTimeoutMs: z.int().min(1).max(600_000).exactOptional().meta({ description: 'How long a server waits for the database on a miss, ms (naive caches nothing then; damper’s loadTimeout); default: the shortest client timeout.' }),
        scope: z
          .enum(['tier', 'server'])
          .default('tier')
          .meta({
            description:
              'tier (the default): one cache tier every server reads (with nodes, a Redis cluster; without, one in-process Cache stands for it); server: each server its own cache in its memory (a page cache), which a restart empties (no nodes).',
          }),
        warm: z
          .strictObject({
            rate: z.number().min(0.001).max(1_000_000).meta({ description: 'Loads started per second.' }),
            concurrency: z.int().min(1).max(100_000).meta({ description: 'Loads in flight at once.' }),
          })
          .exactOptional()
          .meta({ description: 'damper, with scope server: a restarted server warms its empty cache with Cache.warm over every key, most read first, within this budget, while traffic returns to it (default: no warm-up).' }),
        nodes: z
          .strictObject({
            count: z.int().min(1).max(1000).default(1).meta({ description: 'Cache nodes (Redis processes), keys spread over them on a consistent-hashing ring (default 1).' }),
            capacityOps: z.number().min(1).max(100_000_000).meta({ description: 'Calls per second each node serves (a Redis process: one core).' }),
            latency: delay.default(ONE_MS).meta({ description: 'Each call’s round trip once served, drawn per call (default: 1 ms).' }),
            maxQueue: z.int().min(0).max(10_000_000).default(10_000).meta({ description: 'Calls waiting at a node beyond which it refuses a call at once (on a pipelined connection the refusal comes in its place among the replies; default 10,000).' }),
            vnodes: z.int().min(1).max(10_000).default(160).meta({ description: 'Points per node on the hash ring (default 160).' }),
            connections: z
              .int()
              .min(1)
              .max(100_000)
              .exactOptional()
              .meta({
                description:
                  'Connections each server’s client keeps to the cache tier, in both variants (node-redis’s isolation pool, a memcached client’s poolSize): a command waits for a free one and holds it until its node answers, even when its caller gave up (default: no pool and no limit, as ioredis pipelines every command over one connection per node, its replies in the order sent, so a node’s refusal reaches the server after its earlier calls’ answers). A subscription has a connection of its own.',
              }),
          })
          .exactOptional()
          .meta({ description: 'The cache tier as its own component: nodes with a capacity and a round trip, shared by every server. Without it, the tier answers in no time with no limit.' }),
        processEntries: z
          .int()
          .min(1)
          .max(10_000_000)
          .exactOptional()
          .meta({ description: 'damper, with nodes: keys each server’s in-process cache holds (default: every key). At the start each holds the most popular ones.' }),
        originRateQps: z
          .number()
          .gt(0)
          .max(100_000_000)
          .exactOptional()
          .meta({
            description:
              'damper, with nodes: queries a second the servers’ origin budgets add up to, split evenly: each server’s Cache gets a RateLimiter (its queue serves higher priorities first) beside its concurrency limit, and a breaker (default: none, the concurrency limit only); a configuration module’s cache(i) guard replaces it.',
          }),
        naive: z
          .strictObject({
            commandTimeoutMs: z.int().min(1).max(600_000).exactOptional().meta({ description: 'With nodes: how long naive’s cache client waits for a node’s answer, ms; default: for ever (ioredis’s commandTimeout is unset by default). A call that fails or times out is read as a miss.' }),
            breaker: z
              .strictObject({
                failures: z.int().min(1).max(1_000_000).meta({ description: 'Cache calls in a row that fail or time out before it opens.' }),
                openMs: z.int().min(1).max(3_600_000).meta({ description: 'How long it stays open, ms; then one call tries the cache again, and a failure opens it again.' }),
              })
              .exactOptional()
              .meta({
                description:
                  'With nodes: each server’s hand-written breaker in front of the cache, which, open, sends every read to the database and writes nothing back (Discord 2019’s “bug in our circuit breaking code”: it moves the cache’s load onto the database, low priority included). Default: none.',
              }),
            queryRetries: z
              .int()
              .min(0)
              .max(10)
              .default(0)
              .meta({ description: 'A failed query is tried again at once, this many times, within the load timeout, with no budget and no backoff (Discord 2019’s third bug). Default 0.' }),
            deleteOnError: z
              .boolean()
              .default(false)
              .meta({ description: 'Facebook 2010’s automated fixer: an invalid cached value is read again from the database, and a failed query or an invalid value deletes the key (the reader cannot tell a struggling database from a bad value). Default false: a plain look-aside.' }),
          })
          .default({ deleteOnError: false, queryRetries: 0 })
          .meta({ description: 'The naive cache’s switches: which of the common bugs the naive variant replays.' }),
      })
      .exactOptional()
      .meta({ description: 'A cache tier in front of the database (needs database): naive a plain look-aside, damper a Cache (with nodes: one per server, over the nodes as its shared tier).' }),
    keys: z
      .strictObject({
        count: z.int().min(1).max(10_000_000).meta({ description: 'Keys, named key:0 (the most popular) … key:<count − 1>.' }),
        exponent: z.number().min(0).max(5).exactOptional().meta({ description: 'Zipf’s exponent: key of rank r read ∝ 1 ÷ r^exponent (0: uniform; default 1, or what hitRatio needs).' }),
        hitRatio: z
          .number()
          .gt(0)
          .lt(1)
          .exactOptional()
          .meta({ description: 'Instead of exponent: the cache tier’s hit ratio in the steady state, as a dashboard shows it (a plain look-aside’s hits ÷ reads, at the scenario’s own rates and ttl); the lab finds the exponent that gives it (needs cache).' }),
        hot: z
          .array(hotKey)
          .exactOptional()
          .meta({ description: 'Named keys, each with its share of all reads (a configuration value a quarter of requests read); the count Zipf keys share the rest.' }),
      })
      .exactOptional()
      .meta({ description: 'Key popularity, Zipf over count keys (needs database): give the exponent, or the hit ratio you measure.' }),
  },
  serviceFaultSchema,
);

/** Whether `key` is one of the scenario's keys: a hot one by name, key:0 … key:<count − 1>, or a population's own <name>:<rank>. */
function isKey(s: z.output<typeof fields>, key: string): boolean {
  if (s.keys?.hot?.some((h) => h.key === key) === true) return true;
  const rank = /^(.*):(\d+)$/.exec(key);
  if (rank === null) return false;
  const [, set, n] = rank as unknown as [string, string, string];
  const count = set === 'key' ? s.keys?.count : s.clients.find((c) => c.name === set)?.keys?.count;
  return count !== undefined && Number(n) < count;
}

/** The scenario's keys, as a fault's hint lists them. */
function keyNames(s: z.output<typeof fields>): string {
  const sets = [...(s.keys?.hot ?? []).map((h) => h.key), ...(s.keys === undefined ? [] : [`key:0 … key:${s.keys.count - 1}`]), ...s.clients.flatMap((c) => (c.keys === undefined ? [] : [`${c.name}:0 … ${c.name}:${c.keys.count - 1}`]))];
  return sets.join(', ');
}

interface ServerRefs {
  readonly servers?: readonly number[];
  readonly server?: number;
}

/** Faults name servers that exist, and the parts they need. */
function faultRule(s: z.output<typeof fields>, report: Report): void {
  const count = s.servers.count;
  s.faults.forEach((f, i) => {
    const refs = f as ServerRefs;
    refs.servers?.forEach((n, j) => {
      if (n >= count) report(['faults', i, 'servers', j], `must be a server index from 0 to ${count - 1}, got ${n}`);
    });
    if (refs.server !== undefined && refs.server >= count) report(['faults', i, 'server'], `must be a server index from 0 to ${count - 1}, got ${refs.server}`);
    if (f.kind === 'cache-flush' && s.cache === undefined) report(['faults', i, 'kind'], 'a cache-flush needs a cache');
    const onNodes = f.kind === 'degrade-cache' || f.kind === 'hang-cache' || f.kind === 'kill-cache' || f.kind === 'eject-cache' || (f.kind === 'slowdown' && f.target === 'cache');
    if (onNodes && s.cache?.nodes === undefined) report(['faults', i, 'kind'], `${f.kind === 'slowdown' ? 'a cache slowdown' : `a ${f.kind}`} needs cache.nodes`);
    const nodes = s.cache?.nodes?.count ?? 0;
    if (onNodes) {
      ('nodes' in f ? (f.nodes ?? []) : []).forEach((n, j) => {
        if (n >= nodes && nodes > 0) report(['faults', i, 'nodes', j], `must be a cache node index from 0 to ${nodes - 1}, got ${n}`);
      });
    }
    if (f.kind === 'slowdown' && f.target !== 'cache' && f.nodes !== undefined) report(['faults', i, 'nodes'], 'only for a cache slowdown (target: cache)');
    if (f.kind === 'slowdown' && f.target === 'cache' && f.servers !== undefined) report(['faults', i, 'servers'], 'not for a cache slowdown: name its nodes');
    if ((f.kind === 'invalid-value' || (f.kind === 'slowdown' && f.target === 'database')) && s.database === undefined) report(['faults', i, 'kind'], `${f.kind === 'slowdown' ? 'a database slowdown' : 'an invalid-value'} needs a database`);
    if (f.kind === 'invalid-value' && s.database !== undefined && !isKey(s, f.key)) report(['faults', i, 'key'], `must be ${keyNames(s)}, got "${f.key}"`);
    if (f.kind === 'cut-traffic' && f.rampS > s.durationS) report(['faults', i, 'rampS'], `must be ≤ durationS (${s.durationS}), got ${f.rampS}`);
    if (f.kind === 'load-ramp') rampRule(f.profile, f.endS - f.startS, (path, message) => report(['faults', i, 'profile', ...path], message));
  });
}

function rampRule(profile: readonly (readonly [number, number])[], spanS: number, report: Report): void {
  if (profile[0]![0] !== 0) report([0, 0], `the first point must be at 0 s, got ${profile[0]![0]}`);
  profile.forEach(([t], j) => {
    if (j > 0 && t <= profile[j - 1]![0]) report([j, 0], `must be after the point before (${profile[j - 1]![0]} s), got ${t}`);
    if (t > spanS) report([j, 0], `must be ≤ the fault’s span (${spanS} s), got ${t}`);
  });
}

/** A scenario file of the service world; parsed, a `ServiceScenario` (world/service.ts). */
export const serviceSchema = refined(fields, (s, report) => {
  faultRule(s, report);
  if (s.cache !== undefined && s.database === undefined) report(['cache'], 'a cache tier needs a database behind it');
  if (s.cache?.processEntries !== undefined && s.cache.nodes === undefined) report(['cache', 'processEntries'], 'only with cache.nodes (without nodes the cache tier is one in-process cache)');
  if (s.cache?.scope === 'server' && s.cache.nodes !== undefined) report(['cache', 'scope'], 'server is a cache in each server’s memory: not with cache.nodes (use processEntries for the servers’ memory in front of the nodes)');
  if (s.cache?.warm !== undefined && s.cache.scope !== 'server') report(['cache', 'warm'], 'only with scope server (a restart empties only a server’s own cache)');
  if (s.servers.missService !== undefined && s.database === undefined) report(['servers', 'missService'], 'needs a database');
  if (s.servers.missService !== undefined && s.cache !== undefined && s.cache.scope === 'tier' && s.cache.nodes === undefined) report(['servers', 'missService'], 'needs a cache of scope server, or cache.nodes (one in-process Cache standing for the tier has no server to render on)');
  if (s.cache?.originRateQps !== undefined && s.cache.nodes === undefined) report(['cache', 'originRateQps'], 'only with cache.nodes (without nodes one Cache stands for every server)');
  if (s.cache?.naive.commandTimeoutMs !== undefined && s.cache.nodes === undefined) report(['cache', 'naive', 'commandTimeoutMs'], 'only with cache.nodes');
  const ownKeys = s.clients.filter((c) => c.keys !== undefined).length;
  if (s.database !== undefined && s.keys === undefined && ownKeys < s.clients.length) report(['keys'], 'missing (a database needs keys: give keys, or each population keys of its own)');
  if (s.database !== undefined && s.keys !== undefined && ownKeys === s.clients.length) report(['keys'], 'read by no population: each reads keys of its own');
  if (s.database === undefined && s.keys !== undefined) report(['keys'], 'keys mean something only with a database');
  s.clients.forEach((c, i) => {
    if (c.keys !== undefined && s.database === undefined) report(['clients', i, 'keys'], 'keys mean something only with a database');
  });
  const naive = s.cache?.naive;
  if (naive?.breaker !== undefined && s.cache?.nodes === undefined) report(['cache', 'naive', 'breaker'], 'only with cache.nodes (it stands in front of the nodes)');
  if (s.database === undefined && s.servers.databaseConnections !== undefined) report(['servers', 'databaseConnections'], 'needs a database');
  if (s.balancer !== undefined && s.servers.count < 2) report(['balancer'], 'a balancer needs at least two servers');
  keysRule(s, report);
  if (s.tiers?.each !== undefined && s.tiers.each.length !== s.tiers.count) report(['tiers', 'each'], `needs one entry per tier (count ${s.tiers.count}), got ${s.tiers.each.length}`);
  s.clients.forEach((c, i) => {
    if (c.tiers === undefined) return;
    if (s.tiers === undefined) report(['clients', i, 'tiers'], 'only with client tiers (tiers)');
    else if (c.tiers.length !== s.tiers.count) report(['clients', i, 'tiers'], `needs one entry per tier (tiers.count ${s.tiers.count}), got ${c.tiers.length}`);
  });
  if (s.tiers?.each?.[0]?.servers !== undefined) report(['tiers', 'each', 0, 'servers'], 'tier 0 is the users’ own client, on their devices: give servers to a tier it calls (tiers.each[1] on)');
  const names = new Set<string>();
  s.clients.forEach((c, i) => {
    if (names.has(c.name)) report(['clients', i, 'name'], `"${c.name}" is used twice`);
    names.add(c.name);
  });
}).transform(({ cache, keys, ...s }) => {
  const patience = Math.min(...s.clients.map((c) => c.timeoutMs));
  return {
    ...parsed(s),
    ...(cache === undefined ? {} : { cache: { ...cache, loadTimeoutMs: cache.loadTimeoutMs ?? patience } }),
    ...(keys === undefined ? {} : { keys: { ...keys, exponent: keys.exponent ?? (keys.hitRatio === undefined ? 1 : derivedExponent({ ...keys, hitRatio: keys.hitRatio }, cache!.ttlS, s).exponent) } }),
  };
});

type Fields = z.output<typeof fields>;

/** Reads a second the populations that read the scenario's shared keys send at its own load (key-sets.ts). */
function readRate(s: Pick<Fields, 'clients'>): number {
  return s.clients.reduce((sum, c) => (c.keys === undefined ? sum + populationReadRate(c) : sum), 0);
}

/** The exponent a `keys.hitRatio` asks for, `count` keys kept `ttlS` (zipf.ts). */
function derivedExponent(keys: { readonly count: number; readonly hitRatio: number; readonly hot?: readonly { key: string; share: number }[] }, ttlS: number, s: Pick<Fields, 'clients'>): ReturnType<typeof exponentForHitRatio> {
  return exponentForHitRatio(keys.count, readRate(s), ttlS, keys.hitRatio, keys.hot);
}

/** A hit ratio instead of an exponent, not both; it needs a cache's ttl, and must be one the keys can give. */
function keysRule(s: Fields, report: Report): void {
  const keys = s.keys;
  const hot = keys?.hot ?? [];
  const sum = hot.reduce((total, h) => total + h.share, 0);
  if (sum > 1 + 1e-9) report(['keys', 'hot'], `shares add up to ${Number(sum.toFixed(9))}, more than 1`);
  const named = new Set<string>();
  hot.forEach((h, i) => {
    if (named.has(h.key)) report(['keys', 'hot', i, 'key'], `"${h.key}" is named twice`);
    named.add(h.key);
    if (/^key:\d+$/.test(h.key)) report(['keys', 'hot', i, 'key'], `"${h.key}" is a Zipf key’s name (key:<rank>): name it otherwise`);
  });
  if (keys?.hitRatio === undefined) return;
  if (keys.exponent !== undefined) return report(['keys', 'hitRatio'], 'give exponent or hitRatio, not both');
  if (s.cache === undefined) return report(['keys', 'hitRatio'], 'needs a cache (its ttl decides the hit ratio)');
  const { reached, range } = derivedExponent({ ...keys, hitRatio: keys.hitRatio }, s.cache.ttlS, s);
  const pct = (x: number): string => `${(x * 100).toFixed(1)} %`;
  if (!reached) {
    const fix = keys.hitRatio < range[0] ? 'more keys or a shorter ttl' : 'fewer keys or a longer ttl';
    report(['keys', 'hitRatio'], `out of reach: ${keys.count} keys read ${Math.round(readRate(s))} times a second and kept ${s.cache.ttlS} s hit ${pct(range[0])} (uniform) to ${pct(range[1])} (exponent 5), got ${pct(keys.hitRatio)}: give ${fix}`);
  }
}

/**
 * A scenario file of the service world, parsed: the one type, inferred from
 * the schema, so a field's type and its description (the JSON Schema's, the
 * editor's hint) are written once.
 */
export type ServiceScenario = z.output<typeof serviceSchema>;

/** One fault of a service scenario, parsed. */
export type ServiceFault = ServiceScenario['faults'][number];
