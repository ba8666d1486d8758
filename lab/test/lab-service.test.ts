import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { runScenario } from '../src/lab/lab.js';
import { runIsolated } from '../src/lab/engine/parallel.js';
import { type ScenarioRun } from '../src/lab/judge/results.js';
import { ScenarioError } from '../src/lab/scenario.js';
import { scenarioJsonSchema } from '../src/lab/schema/index.js';
import { stream } from '../src/lab/engine/streams.js';
import { checkScenario, scaleLoad } from '../src/lab/world/worlds.js';
import { type ServiceFault, type ServiceScenario } from '../src/lab/world/service.js';
import { tickedDelay, tierSettings } from '../src/lab/world/service-tiers.js';
import { serviceBound } from '../src/lab/world/service-best.js';
import { exponentForHitRatio, lookAsideHitRatio, ZipfKeys } from '../src/lab/world/zipf.js';
import { ConnectionPool } from '../src/lab/world/connection-pool.js';
import { Database, QueryError } from '../src/lab/world/database.js';
import { Recorder } from '../src/lab/judge/metrics.js';
import { VirtualClock } from 'damper';
import { type CacheShape, naiveCache, naiveQuery } from '../src/lab/world/service-data.js';
import { KeySets } from '../src/lab/world/key-sets.js';
import { testScenario } from './support/scenario-doc.js';

const ROOT = new URL('../../', import.meta.url);
const fixture = (path: string): Record<string, unknown> => JSON.parse(readFileSync(new URL(path, ROOT), 'utf8')) as Record<string, unknown>;

/**
 * A small service, for the faults' effects: 200 calls/s (no retries, 1 s
 * patience) to one server of 4 workers at 10 ms (400/s), a cache tier in
 * front of a database of 100 queries/s, 200 Zipf keys; 60 s with a fault
 * from 20 s to 40 s.
 */
function small(fault: Record<string, unknown>, change: (d: Record<string, unknown>) => void = () => {}): ServiceScenario {
  return testScenario(
    'small',
    {
      durationS: 60,
      baseline: { fromS: 5, toS: 20 },
      objective: { p99Ms: 500, goodputRatio: 0.95, holdS: 5 },
      clients: [{ name: 'users', rate: 200, timeoutMs: 1000 }],
      servers: { workers: 4, maxQueue: 1000, service: { kind: 'constant', ms: 10 } },
      database: { capacityQps: 100, workers: 2, maxQueue: 1000 },
      cache: { ttlS: 20, staleForS: 60 },
      keys: { count: 200, exponent: 1 },
      faults: [{ startS: 20, endS: 40, label: 'the fault', ...fault }],
    },
    change,
  );
}

/** The mean of `series` over seconds [from, to). */
const mean = (series: readonly number[], from: number, to: number): number => series.slice(from, to).reduce((a, b) => a + b, 0) / (to - from);

// Every simulation starts now, in worker threads (under node --test every promise is hooked), to share the cores.
const FAULTS: Record<string, ServiceScenario> = {
  none: small({ kind: 'load-spike', factor: 1 }),
  'capacity-drop': small({ kind: 'capacity-drop', factor: 0.25 }),
  slowdown: small({ kind: 'slowdown', factor: 4 }),
  'database slowdown': small({ kind: 'slowdown', target: 'database', factor: 10 }, (d) => delete d.cache),
  hang: small({ kind: 'hang', server: 0 }),
  'degrade-servers': small({ kind: 'degrade-servers', servers: [1], factor: 0.1 }, (d) => ((d.servers as Record<string, unknown>).count = 2)),
  'invalid-value': small({ kind: 'invalid-value', key: 'key:0' }),
  'load-spike': small({ kind: 'load-spike', factor: 2 }),
  'load-ramp': small({ kind: 'load-ramp', profile: [[0, 1], [10, 3]] }),
  'cache-flush': small({ kind: 'cache-flush', endS: 21 }),
};
const runs = new Map(Object.entries(FAULTS).map(([kind, s]) => [kind, runIsolated(s, 1)]));
/**
 * `small` with its cache tier on two nodes of 5,000 calls/s (1 ms round
 * trips); damper's server holds the 50 most popular of the 200 keys in
 * memory (about 77 % of reads), so the rest need a node or the database.
 */
const onNodes = (fault: Record<string, unknown>): ServiceScenario =>
  small(fault, (d) => {
    const cache = d.cache as Record<string, unknown>;
    cache.nodes = { count: 2, capacityOps: 5000 };
    cache.processEntries = 50;
  });
const NODE_FAULTS: Record<string, ServiceScenario> = {
  none: onNodes({ kind: 'load-spike', factor: 1 }),
  slowdown: onNodes({ kind: 'slowdown', target: 'cache', factor: 300 }),
  'hang-cache': onNodes({ kind: 'hang-cache' }),
  'kill-cache': onNodes({ kind: 'kill-cache' }),
  'degrade-cache': onNodes({ kind: 'degrade-cache', nodes: [0, 1], factor: 0.001 }),
  'eject-cache': onNodes({ kind: 'eject-cache', nodes: [0] }),
  'cache-flush': onNodes({ kind: 'cache-flush', endS: 21 }),
};
/** 200 calls/s over 5,000 keys kept 20 s, their popularity the one that gives a look-aside 80 % hits; a database that never limits it. */
const hitRatioRun = runIsolated(
  small({ kind: 'load-spike', factor: 1 }, (d) => {
    d.keys = { count: 5000, hitRatio: 0.8 };
    d.database = { capacityQps: 1000, workers: 20, maxQueue: 1000 };
  }),
  1,
);
const nodeRuns = new Map(Object.entries(NODE_FAULTS).map(([kind, s]) => [kind, runIsolated(s, 1)]));
const closed = (users: number) =>
  small({ kind: 'slowdown', factor: 10 }, (d) => {
    d.clients = [{ name: 'users', users, thinkTime: { kind: 'constant', ms: 90 }, timeoutMs: 5000 }];
    (d.servers as Record<string, unknown>).workers = 100;
    for (const part of ['database', 'cache', 'keys']) delete d[part];
  });
const closedRun = runIsolated(closed(10), 1);
/** Users at 50/s retrying twice, through two client tiers (100 ms per innermost attempt) to one server that hangs from 20 s to 40 s, holding all it takes; no database, so the server is the origin. */
const tiered = (each?: readonly Record<string, unknown>[]) =>
  small({ kind: 'hang', server: 0 }, (d) => {
    d.clients = [{ name: 'users', rate: 50, timeoutMs: 5000, retries: 2 }];
    d.tiers = { count: 2, attemptTimeoutMs: 100, ...(each === undefined ? {} : { each }) };
    // A queue that never fills: the hung server holds every attempt, so each one ends at a tier's timeout, never refused at once.
    (d.servers as Record<string, unknown>).maxQueue = 10_000_000;
    for (const part of ['database', 'cache', 'keys']) delete d[part];
  });
/** `tiered`, its 50 calls/s split over two populations with their own retries at each tier: an app (3, then 1) and a web page (none). */
const perPopulation = () => {
  const s = tiered();
  const [users] = s.clients;
  return {
    ...s,
    clients: [
      { ...users!, name: 'app', rate: 25, tiers: [{ retries: 3 }, { retries: 1 }] },
      { ...users!, name: 'web', rate: 25, tiers: [{ retries: 0 }, { retries: 0 }] },
    ],
  };
};
const tieredRuns = {
  perPopulation: runIsolated(perPopulation(), 1),
  population: runIsolated(tiered(), 1),
  own: runIsolated(tiered([{ retries: 3 }, { retries: 1 }]), 1),
  outerTimeout: runIsolated(tiered([{ retries: 3, attemptTimeoutMs: 50 }, { retries: 1 }]), 1),
  ticked: runIsolated(tiered([{ retries: 3, attemptTimeoutMs: 50, timerTickMs: 500 }, { retries: 1 }]), 1),
};

describe('a service scenario file: every problem names its field', () => {
  const bad = (change: (d: Record<string, unknown>) => void, where: RegExp): void => {
    const d = fixture('examples/checkout.json');
    change(d);
    assert.throws(
      () => checkScenario(d, 'co.json'),
      (e) => e instanceof ScenarioError && where.test(e.message),
      where.source,
    );
  };

  test('fields, tags and ranges', () => {
    bad((d) => ((d.servers as Record<string, unknown>).workers = 0), /co\.json: servers\.workers: must be ≥ 1, got 0/);
    bad((d) => ((d.servers as Record<string, unknown>).servise = {}), /co\.json: servers\.servise: unknown field \(did you mean service\?\)/);
    bad((d) => ((d.faults as Record<string, unknown>[])[0]!.kind = 'meteor'), /faults\[0\]\.kind: unknown fault kind "meteor" \(known: capacity-drop, slowdown, hang, degrade-servers, invalid-value, load-spike, load-ramp, degrade-cache, hang-cache, kill-cache, eject-cache, cut-traffic, restart, cache-flush\)/);
    bad((d) => ((d.keys as Record<string, unknown>).exponent = -1), /co\.json: keys\.exponent: must be ≥ 0, got -1/);
  });

  test('populations: open (rate) or closed (users, thinkTime), not both', () => {
    bad((d) => ((d.clients as Record<string, unknown>[])[0]!.users = 5), /co\.json: clients\[0\]\.users: give rate \(open loop\) or users \(closed loop\), not both/);
    bad((d) => delete (d.clients as Record<string, unknown>[])[0]!.rate, /co\.json: clients\[0\]\.rate: missing \(or give users/);
    bad((d) => ((d.clients as Record<string, unknown>[])[0]!.thinkTime = { kind: 'constant', ms: 5 }), /clients\[0\]\.thinkTime: only for a closed-loop population/);
    bad((d) => ((d.clients as Record<string, unknown>[])[1]!.arrivals = 'fixed'), /co\.json: clients\[1\]\.arrivals: only for an open-loop population/);
    bad((d) => ((d.clients as Record<string, unknown>[])[0]!.arrivals = 'steady'), /co\.json: clients\[0\]\.arrivals: /);
  });

  test('rules across fields', () => {
    bad((d) => delete d.database, /co\.json: cache: a cache tier needs a database behind it/);
    bad((d) => ((d.faults as Record<string, unknown>[])[0] = { kind: 'hang', server: 3, startS: 120, endS: 150, label: 'x' }), /co\.json: faults\[0\]\.server: must be a server index from 0 to 2, got 3/);
    bad((d) => ((d.faults as Record<string, unknown>[])[0] = { kind: 'invalid-value', key: 'key:5000', startS: 120, endS: 150, label: 'x' }), /faults\[0\]\.key: must be key:0 … key:4999/);
    bad((d) => ((d.faults as Record<string, unknown>[])[0] = { kind: 'load-ramp', profile: [[1, 2]], startS: 120, endS: 150, label: 'x' }), /faults\[0\]\.profile\[0\]\[0\]: the first point must be at 0 s, got 1/);
    bad((d) => ((d.faults as Record<string, unknown>[])[0] = { kind: 'load-ramp', profile: [[0, 1], [40, 2]], startS: 120, endS: 150, label: 'x' }), /faults\[0\]\.profile\[1\]\[0\]: must be ≤ the fault’s span \(30 s\), got 40/);
    bad((d) => ((d.faults as Record<string, unknown>[])[0]!.trigger = false), /co\.json: faults: needs a trigger/);
    bad((d) => (d.tiers = { count: 2, attemptTimeoutMs: 400, each: [{ retries: 1 }] }), /co\.json: tiers\.each: needs one entry per tier \(count 2\), got 1/);
    bad((d) => (d.tiers = { count: 2, attemptTimeoutMs: 400, each: [{ retries: 1 }, { retry: 1 }] }), /co\.json: tiers\.each\[1\]\.retry: unknown field \(known: retries, backoff, attemptTimeoutMs, timerTickMs, hedgeAfterMs, servers\)/);
  });

  test('named hot keys beside the Zipf tail', () => {
    const keys = (hot: unknown) => (d: Record<string, unknown>) => ((d.keys as Record<string, unknown>).hot = hot);
    bad(keys([{ key: 'sitevars', share: 0.7 }, { key: 'flags', share: 0.4 }]), /co\.json: keys\.hot: shares add up to 1\.1, more than 1/);
    bad(keys([{ key: 'key:3', share: 0.1 }]), /co\.json: keys\.hot\[0\]\.key: "key:3" is a Zipf key’s name/);
    bad(keys([{ key: 'a', share: 0.1 }, { key: 'a', share: 0.1 }]), /co\.json: keys\.hot\[1\]\.key: "a" is named twice/);
    bad((d) => (keys([{ key: 'sitevars', share: 0.25 }])(d), ((d.faults as Record<string, unknown>[])[0] = { kind: 'invalid-value', key: 'sitevar', startS: 120, endS: 150, label: 'x' })), /faults\[0\]\.key: must be sitevars, key:0 … key:4999, got "sitevar"/);
    // A hot key takes its share of reads; the tail shares the rest by Zipf's law.
    const zipf = new ZipfKeys(4, 0, [{ key: 'hot', share: 0.5 }]);
    const random = stream(1, 7);
    const counts = new Map<string, number>();
    for (let i = 0; i < 40_000; i++) {
      const k = zipf.pick(random);
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    assert.ok(Math.abs(counts.get('hot')! / 40_000 - 0.5) < 0.01);
    for (let i = 0; i < 4; i++) assert.ok(Math.abs(counts.get(`key:${i}`)! / 40_000 - 0.125) < 0.01, `key:${i}`);
    assert.equal(zipf.shareOfTop(1), 0.5);
    assert.equal(zipf.shareOfTop(3), 0.75);
  });

  test('the cache tier’s nodes, and the faults that need them', () => {
    const cache = (d: Record<string, unknown>): Record<string, unknown> => d.cache as Record<string, unknown>;
    const withNodes = (d: Record<string, unknown>): void => void (cache(d).nodes = { count: 3, capacityOps: 1000 });
    const fault = (f: Record<string, unknown>) => (d: Record<string, unknown>) => ((d.faults as Record<string, unknown>[])[0] = { startS: 120, endS: 150, label: 'x', ...f });
    bad(fault({ kind: 'hang-cache' }), /co\.json: faults\[0\]\.kind: a hang-cache needs cache\.nodes/);
    bad(fault({ kind: 'slowdown', target: 'cache', factor: 5 }), /co\.json: faults\[0\]\.kind: a cache slowdown needs cache\.nodes/);
    bad((d) => (withNodes(d), fault({ kind: 'kill-cache', nodes: [0, 3] })(d)), /co\.json: faults\[0\]\.nodes\[1\]: must be a cache node index from 0 to 2, got 3/);
    bad((d) => (withNodes(d), fault({ kind: 'slowdown', target: 'cache', servers: [0], factor: 5 })(d)), /co\.json: faults\[0\]\.servers: not for a cache slowdown: name its nodes/);
    bad((d) => (withNodes(d), fault({ kind: 'slowdown', nodes: [0], factor: 5 })(d)), /co\.json: faults\[0\]\.nodes: only for a cache slowdown \(target: cache\)/);
    bad((d) => (withNodes(d), fault({ kind: 'eject-cache' })(d)), /co\.json: faults\[0\]\.nodes: missing/);
    bad((d) => (cache(d).processEntries = 100), /co\.json: cache\.processEntries: only with cache\.nodes/);
    bad((d) => (cache(d).naive = { commandTimeoutMs: 100 }), /co\.json: cache\.naive\.commandTimeoutMs: only with cache\.nodes/);
    bad((d) => (cache(d).nodes = { count: 3 }), /co\.json: cache\.nodes\.capacityOps: missing/);
    bad((d) => (cache(d).naive = { deleteOnError: 'yes' }), /co\.json: cache\.naive\.deleteOnError: /);
    bad((d) => (cache(d).nodes = { capacityOps: 1000, latency: { kind: 'constant', ms: -1 } }), /co\.json: cache\.nodes\.latency\.ms: must be ≥ 0, got -1/);
  });

  test('damper lab schema service: the JSON Schema of the world', () => {
    const schema = JSON.stringify(scenarioJsonSchema('service'));
    for (const field of ['thinkTime', 'slowdownPerInFlight', 'cache-flush', 'load-ramp', 'exponent', 'capacityOps', 'processEntries', 'commandTimeoutMs', 'kill-cache']) assert.ok(schema.includes(field), field);
  });
});

describe('each fault kind has its effect', () => {
  const during = async (kind: string, variant: 'naive' | 'damper' = 'naive') => (await runs.get(kind)!).variants[variant];
  const goodput = async (kind: string): Promise<number> => mean((await during(kind)).series.goodput, 25, 40);

  test('capacity drop, slowdown, hang and node degradation cut goodput; a database slowdown too', async () => {
    const healthy = await goodput('none');
    assert.ok(healthy > 190, `healthy ${healthy}`);
    for (const kind of ['capacity-drop', 'slowdown', 'hang', 'database slowdown']) {
      const g = await goodput(kind);
      assert.ok(g < healthy * 0.7, `${kind}: goodput ${g} of ${healthy}`);
    }
    // One of two servers keeps a tenth: round robin sends it half the calls, which queue past their timeout.
    assert.ok((await goodput('degrade-servers')) < healthy * 0.9);
  });

  test('an invalid value reaches naive clients and not damper\'s', async () => {
    assert.ok((await during('invalid-value')).summary.invalidServed > 0);
    assert.equal((await during('invalid-value', 'damper')).summary.invalidServed, 0);
  });

  test('a load spike doubles the arrivals; a ramp climbs to its last point and holds it', async () => {
    const base = mean((await during('none')).series.offered, 25, 40);
    assert.ok(Math.abs(mean((await during('load-spike')).series.offered, 25, 40) / base - 2) < 0.1);
    const ramp = (await during('load-ramp')).series.offered;
    assert.ok(Math.abs(mean(ramp, 30, 40) / base - 3) < 0.15, `held ${mean(ramp, 30, 40) / base}`);
    // 4–6 s into a ramp from ×1 to ×3 over 10 s: ×2.
    assert.ok(Math.abs(mean(ramp, 24, 26) / base - 2) < 0.25, `halfway ${mean(ramp, 24, 26) / base}`);
  });

  test('a cache flush sends the reads to the database', async () => {
    const origin = (await during('cache-flush')).series.originQps;
    assert.ok(origin[20]! > 3 * mean(origin, 5, 20), `flush second ${origin[20]} against ${mean(origin, 5, 20)}`);
  });
});

describe('the cache tier as a component: nodes that a fault slows, degrades, stops, kills or ejects', () => {
  const run = async (kind: string, variant: 'naive' | 'damper') => (await nodeRuns.get(kind)!).variants[variant];
  const during = async (kind: string, variant: 'naive' | 'damper', series: 'goodput' | 'originQps'): Promise<number> => mean((await run(kind, variant)).series[series], 25, 40);

  test('healthy, both variants answer everything; the nodes cost naive nothing it notices', async () => {
    for (const variant of ['naive', 'damper'] as const) assert.ok((await during('none', variant, 'goodput')) > 190, variant);
  });

  test('naive waits on a slow, stopped or starved node for ever (no command timeout): its server’s workers go, and with them every answer', async () => {
    const healthy = await during('none', 'naive', 'goodput');
    for (const kind of ['slowdown', 'hang-cache', 'degrade-cache']) {
      const g = await during(kind, 'naive', 'goodput');
      assert.ok(g < healthy * 0.3, `${kind}: naive goodput ${g} of ${healthy}`);
    }
  });

  test('a killed node refuses at once: naive reads every key from the database, which cannot carry them', async () => {
    const before = mean((await run('kill-cache', 'naive')).series.originQps, 5, 20);
    const origin = await during('kill-cache', 'naive', 'originQps');
    assert.ok(origin > 5 * before, `origin ${origin} against ${before} before`);
    assert.ok((await during('kill-cache', 'naive', 'goodput')) < 100);
  });

  test('an ejection and a flush send the moved or lost keys to the database, once each', async () => {
    for (const kind of ['eject-cache', 'cache-flush']) {
      const origin = (await run(kind, 'naive')).series.originQps;
      assert.ok(origin[20]! > 3 * mean(origin, 5, 20), `${kind}: ${origin[20]} against ${mean(origin, 5, 20)}`);
    }
  });

  test('damper serves from memory what its servers hold, and past its store’s timeout and breaker the rest from the database', async () => {
    for (const kind of ['slowdown', 'hang-cache', 'kill-cache']) {
      const { summary } = await run(kind, 'damper');
      assert.ok(summary.trigger.efficiency > 0.85, `${kind}: damper at ${summary.trigger.efficiency} of the best possible`);
    }
  });

  test('the best possible reads the nodes: what memory holds, the nodes left, then the database', async () => {
    // Killed nodes: 77 % of 200/s from memory, 46/s from a database of 100: all of it.
    const kill = (await run('kill-cache', 'naive')).series.bestGoodput;
    assert.ok(mean(kill, 25, 40) > 195, `kill: ${mean(kill, 25, 40)}`);
    // A flush empties the nodes, not the server's memory: it and the database carry everything still.
    const { bestGoodput: flush, offered } = (await run('cache-flush', 'naive')).series;
    assert.equal(flush[20], offered[20]);
    // Memory for the most popular key alone (1 ÷ H(200) ≈ 17 % of reads): a stopped tier leaves the database for the rest, 100 of the other 166/s.
    const one = small({ kind: 'hang-cache' }, (d) => ((d.cache as Record<string, unknown>).nodes = { count: 2, capacityOps: 5000 }));
    const bound = serviceBound({ ...one, cache: { ...one.cache!, processEntries: 1 } });
    const share = new ZipfKeys(200, 1).shareOfTop(1);
    assert.ok(Math.abs(bound(30, 200) - (200 * share + 100)) < 1e-9, `hung: ${bound(30, 200)}`);
    assert.equal(bound(10, 200), 200, 'healthy nodes carry every read memory does not');
  });
});

describe('client tiers: each its own retries and attempt timeout, or the population’s', () => {
  // Every attempt at the hung server fails, so a naive call reaches it (1 + r₀) × (1 + r₁) times.
  const atServer = async (run: Promise<ScenarioRun>): Promise<number> => mean((await run).variants.naive.series.originQps, 25, 38);
  test('naive: the attempts at the bottom are the product of each tier’s own attempts', async () => {
    const population = await atServer(tieredRuns.population);
    const own = await atServer(tieredRuns.own);
    assert.ok(Math.abs(population / (9 * 50) - 1) < 0.1, `3 × 3 attempts per call: ${population}/s at 50 calls/s`);
    assert.ok(Math.abs(own / (8 * 50) - 1) < 0.1, `4 × 2 attempts per call: ${own}/s at 50 calls/s`);
  });

  test('naive: each population its own retries at each tier (clients[i].tiers): 4 × 2 attempts for the app’s calls, 1 for the web page’s', async () => {
    const attempts = await atServer(tieredRuns.perPopulation);
    assert.ok(Math.abs(attempts / (25 * 8 + 25 * 1) - 1) < 0.1, `${attempts}/s at 25 + 25 calls/s`);
    const tiers = { count: 2, attemptTimeoutMs: 100, each: [{ retries: 2 }, {}] };
    const app = { retries: 5, backoff: { kind: 'none' } as const, tiers: [{}, { backoff: { kind: 'fixed', delayMs: 7 } as const }] };
    assert.equal(tierSettings(tiers, 0, app).retries, 2, 'a field the population leaves out: the tier’s own');
    assert.equal(tierSettings(tiers, 1, app).retries, 5, 'neither gives it: the population’s');
    assert.deepEqual(tierSettings(tiers, 1, app).backoff, { kind: 'fixed', delayMs: 7 }, 'the population’s for this tier first');
    assert.throws(
      () => checkScenario({ ...perPopulation(), clients: [{ ...perPopulation().clients[0]!, tiers: [{ retries: 1 }] }] } as unknown as Record<string, unknown>, 'pp.json'),
      /pp\.json: clients\[0\]\.tiers: needs one entry per tier \(tiers\.count 2\), got 1/,
    );
  });

  test('naive: an outer tier that times its attempts out fails the call sooner, and leaves the tier below at work', async () => {
    const p99 = async (run: Promise<ScenarioRun>): Promise<number> => mean((await run).variants.naive.series.p99Ms.map((v) => v ?? 0), 25, 38);
    // Four outer attempts of 50 ms each against four of 2 × 100 ms.
    assert.ok((await p99(tieredRuns.outerTimeout)) < 300, `${await p99(tieredRuns.outerTimeout)} ms`);
    assert.ok((await p99(tieredRuns.own)) > 700, `${await p99(tieredRuns.own)} ms`);
    // Nobody tells the tier below: its retry still goes out after the outer tier has given up.
    assert.ok(Math.abs((await atServer(tieredRuns.outerTimeout)) / (8 * 50) - 1) < 0.1);
  });

  test('naive: a client that checks its timeouts on a 500 ms tick (undici) gives up on a 50 ms attempt after 0.05–0.55 s, not at 50 ms', async () => {
    const p99 = async (run: Promise<ScenarioRun>): Promise<number> => mean((await run).variants.naive.series.p99Ms.map((v) => v ?? 0), 25, 38);
    // Four outer attempts, each now ending on a tick: the inner tier's two of 100 ms run out first, most of the time.
    assert.ok((await p99(tieredRuns.ticked)) > 700, `${await p99(tieredRuns.ticked)} ms`);
    assert.equal(tickedDelay(0, 500, 500), 500);
    assert.equal(tickedDelay(1, 500, 500), 999);
    assert.equal(tickedDelay(499, 50, 500), 501);
    assert.equal(tickedDelay(1, 500, undefined), 500);
  });

  test('tierSettings: a tier’s own, else the population’s; a timeout for the innermost only by default', () => {
    const population = { retries: 2, backoff: { kind: 'none' } as const };
    const tiers = { count: 3, attemptTimeoutMs: 100, each: [{ retries: 3, attemptTimeoutMs: 900 }, {}, { backoff: { kind: 'fixed', delayMs: 5 } as const }] };
    assert.deepEqual(tierSettings(tiers, 0, population), { retries: 3, backoff: { kind: 'none' }, attemptTimeoutMs: 900, timerTickMs: undefined, hedgeAfterMs: undefined });
    assert.deepEqual(tierSettings(tiers, 1, population), { retries: 2, backoff: { kind: 'none' }, attemptTimeoutMs: undefined, timerTickMs: undefined, hedgeAfterMs: undefined });
    assert.deepEqual(tierSettings(tiers, 2, population), { retries: 2, backoff: { kind: 'fixed', delayMs: 5 }, attemptTimeoutMs: 100, timerTickMs: undefined, hedgeAfterMs: undefined });
    assert.deepEqual(tierSettings({ count: 2, attemptTimeoutMs: 100 }, 0, population), { retries: 2, backoff: { kind: 'none' }, attemptTimeoutMs: undefined, timerTickMs: undefined, hedgeAfterMs: undefined });
  });
});

/**
 * Users at 50 calls/s → their own client (tier 0) → an API (tier 1) on one
 * server of its own → the profile service (the scenario's servers: 100
 * workers, 100 ms a call). No retries, 2 s patience, 30 s. `api` is the
 * API's server.
 */
const withApi = (api: Record<string, unknown>) =>
  small({ kind: 'load-spike', factor: 1 }, (d) => {
    d.durationS = 30;
    d.baseline = { fromS: 5, toS: 10 };
    d.faults = [{ kind: 'load-spike', factor: 1, startS: 10, endS: 20, label: 'none' }];
    d.clients = [{ name: 'users', rate: 50, timeoutMs: 2000 }];
    d.tiers = { count: 2, attemptTimeoutMs: 2000, each: [{ retries: 0 }, { retries: 0, servers: api }] };
    d.servers = { workers: 100, maxQueue: 1000, service: { kind: 'constant', ms: 100 } };
    for (const part of ['database', 'cache', 'keys']) delete d[part];
  });
const apiRuns = {
  // A thread per call: each holds its worker for its 1 ms and the profile service's 100 ms, so 4 workers carry about 40 calls/s.
  threads: runIsolated(withApi({ workers: 4, maxQueue: 1000, service: { kind: 'constant', ms: 1 } }), 1),
  // A Node server: one core, any number of calls in flight; waiting on the profile service costs the core nothing.
  node: runIsolated(withApi({ workers: 10_000, maxQueue: 1000, cores: 1, service: { kind: 'constant', ms: 1 } }), 1),
};

describe('a client tier on servers of its own (tiers.each[t].servers): the API in front of the profile service', () => {
  const served = async (run: Promise<ScenarioRun>, v: 'naive' | 'damper'): Promise<number> => {
    const { series } = (await run).variants[v];
    return mean(series.goodput, 5, 25) / mean(series.offered, 5, 25);
  };

  test('a worker is held while its tier calls below: 4 threads carry about 40 of 50 calls/s; a Node server on one core carries them all', async () => {
    const naiveThreads = await served(apiRuns.threads, 'naive');
    assert.ok(naiveThreads < 0.5, `naive: the API's queue grows until the users give up: ${naiveThreads}`);
    const damperThreads = await served(apiRuns.threads, 'damper');
    assert.ok(damperThreads > 0.7 && damperThreads < 0.85, `damper: the API's admission sheds what its threads cannot carry, and serves the rest in time: ${damperThreads}`);
    for (const v of ['naive', 'damper'] as const) assert.ok((await served(apiRuns.node, v)) > 0.99, `${v}: the Node API serves everything`);
  });

  test('damper: the API server’s limiter is instrumented beside the servers’ (tier=1, server=0)', async () => {
    const shed = (await apiRuns.threads).variants.damper.characteristics['damper.limiter.shed_ratio'] ?? {};
    assert.ok(Object.keys(shed).some((name) => name.includes('tier=1') && name.includes('server=0')), Object.keys(shed).join(', '));
  });

  test('the best possible counts the API’s own capacity; tier 0 is the users’ client and takes no servers', async () => {
    const threads = serviceBound(withApi({ workers: 4, maxQueue: 1000, service: { kind: 'constant', ms: 1 } }));
    assert.equal(Math.round(threads(15, 50) * 10) / 10, 39.6, 'four threads, each held 1 ms + the 100 ms it waits on the profile service');
    const node = serviceBound(withApi({ workers: 10_000, maxQueue: 1000, cores: 1, service: { kind: 'constant', ms: 1 } }));
    assert.equal(node(15, 50), 1000, 'one core at 1 ms a call: waiting holds no core');
    const { damper } = (await apiRuns.threads).variants;
    assert.ok(damper.summary.trigger.bestGoodputRatio < 0.8 && damper.summary.trigger.efficiency > 0.85, JSON.stringify(damper.summary.trigger));
    assert.throws(
      () => small({ kind: 'load-spike', factor: 1 }, (d) => (d.tiers = { count: 2, attemptTimeoutMs: 100, each: [{ servers: { workers: 1, maxQueue: 1, service: { kind: 'constant', ms: 1 } } }, {}] })),
      (e: unknown) => e instanceof ScenarioError && /tiers\.each\[0\]\.servers: tier 0 is the users’ own client/.test(e.message),
    );
  });
});

/**
 * Users at 50 calls/s through one client tier to two servers of 8 workers
 * at 10 ms; from 10 s to 30 s server 1 is 20 times slower (200 ms). No
 * retries; `hedgeAfterMs` on the tier, or none.
 */
const hedging = (hedgeAfterMs?: number) =>
  small({ kind: 'slowdown', factor: 20, servers: [1] }, (d) => {
    d.durationS = 40;
    d.baseline = { fromS: 5, toS: 10 };
    (d.faults as Record<string, unknown>[])[0] = { kind: 'slowdown', factor: 20, servers: [1], startS: 10, endS: 30, label: 'server 1 slow' };
    d.clients = [{ name: 'users', rate: 50, timeoutMs: 2000 }];
    d.tiers = { count: 1, attemptTimeoutMs: 1000, each: [{ retries: 0, ...(hedgeAfterMs === undefined ? {} : { hedgeAfterMs }) }] };
    d.servers = { count: 2, workers: 8, maxQueue: 1000, service: { kind: 'constant', ms: 10 } };
    for (const part of ['database', 'cache', 'keys']) delete d[part];
  });
const hedgeRuns = { none: runIsolated(hedging(), 1), after30: runIsolated(hedging(30), 1) };

describe('a tier that hedges (tiers.each[t].hedgeAfterMs): one more attempt when the first is slow', () => {
  /** Attempts at the servers per call, and the mean of each second's p99, while server 1 is slow. */
  const during = async (run: Promise<ScenarioRun>, v: 'naive' | 'damper') => {
    const { series } = (await run).variants[v];
    return { attempts: mean(series.originQps, 12, 28) / mean(series.offered, 12, 28), p99: mean(series.p99Ms.map((x) => x ?? 0), 12, 28) };
  };

  test('naive hedges every slow attempt with no budget, onto whichever server is next: more load on the slow one, and a worse tail', async () => {
    const none = await during(hedgeRuns.none, 'naive');
    const hedged = await during(hedgeRuns.after30, 'naive');
    assert.ok(Math.abs(none.attempts - 1) < 0.05, `no hedging: one attempt per call (${none.attempts})`);
    assert.ok(hedged.attempts > 1.4 && hedged.attempts < 1.7, `about every call that met the slow server hedged once: ${hedged.attempts} attempts per call`);
    assert.ok(hedged.p99 > none.p99, `round robin sends half the hedges to the slow server too: p99 ${hedged.p99} ms against ${none.p99} ms`);
  });

  test('damper hedges from its retry budget, to the other server only: the tail falls, the extra load is bounded', async () => {
    const none = await during(hedgeRuns.none, 'damper');
    const hedged = await during(hedgeRuns.after30, 'damper');
    assert.ok(hedged.p99 < none.p99 / 2, `p99 ${hedged.p99} ms against ${none.p99} ms`);
    assert.ok(hedged.attempts < (await during(hedgeRuns.after30, 'naive')).attempts, `fewer extra attempts than naive's: ${hedged.attempts} per call`);
  });
});

/** `small` with two servers, each its own page cache (scope server), restarted by the operators at 20 s (`when`, if given). */
const restarted = (when?: string) =>
  small({ kind: 'load-spike', factor: 1 }, (d) => {
    d.faults = [
      { kind: 'restart', servers: [0], startS: 20, endS: 21, label: 'web0 restarted', ...(when === undefined ? {} : { when }) },
      { kind: 'load-spike', factor: 1, startS: 40, endS: 45, label: 'nothing' },
    ];
    (d.servers as Record<string, unknown>).count = 2;
    (d.cache as Record<string, unknown>).scope = 'server';
  });
const restartRuns = { always: runIsolated(restarted(), 1), ifUnhealthy: runIsolated(restarted('unhealthy'), 1) };

describe('an operator restarts a server (restart)', () => {
  test('a new process: its own page cache is empty, so its reads go to the database until it is warm again; the other server is untouched', async () => {
    const { series } = (await restartRuns.always).variants.naive;
    const before = mean(series.originQps, 10, 20);
    assert.ok(series.originQps[20]! > 2 * before, `the restarted server's misses reach the database at once: ${series.originQps[20]}/s against ${before}/s before`);
    assert.equal((await restartRuns.always).variants.naive.skippedFaults.length, 0);
  });

  test('with when: "unhealthy" the operators leave a healthy service alone', async () => {
    const { naive, damper } = (await restartRuns.ifUnhealthy).variants;
    assert.deepEqual([naive.skippedFaults, damper.skippedFaults], [[0], [0]]);
    assert.ok(naive.series.originQps[20]! < 1.5 * mean(naive.series.originQps, 10, 20), 'no restart, no burst of misses');
  });
});

/** `small` on two nodes 20 times slower from 20 s to 40 s (20 ms round trips), each server's client with a pool of `connections` to them, or none. */
const pooledNodes = (connections?: number, workers = 4) =>
  small({ kind: 'slowdown', target: 'cache', factor: 20 }, (d) => {
    (d.servers as Record<string, unknown>).workers = workers;
    const cache = d.cache as Record<string, unknown>;
    cache.nodes = { count: 2, capacityOps: 5000, ...(connections === undefined ? {} : { connections }) };
    cache.processEntries = 50;
  });
const poolRuns = { none: runIsolated(pooledNodes(), 1), one: runIsolated(pooledNodes(1), 1) };

describe('a server’s pool of connections to the cache nodes (cache.nodes.connections)', () => {
  test('commands queue for a connection, so a slow node costs more than its round trip: both variants serve less during the slowdown than with no pool', async () => {
    const none = await poolRuns.none;
    const one = await poolRuns.one;
    for (const v of ['naive', 'damper'] as const) {
      const [without, within] = [none.variants[v].summary.trigger.goodputRatio, one.variants[v].summary.trigger.goodputRatio];
      assert.ok(within < without, `${v}: ${within} with a pool of one, ${without} without`);
    }
    assert.ok(one.variants.damper.summary.trigger.goodputRatio > one.variants.naive.summary.trigger.goodputRatio);
  });

  test('the best possible reads the pools: servers × connections × 1000 ÷ the round trip', () => {
    // Servers of 100 workers (10,000 calls/s), so the nodes and the database are what bound.
    const slow = serviceBound(pooledNodes(1, 100));
    const fast = serviceBound(pooledNodes(undefined, 100));
    // 77 % of reads are in the server's memory; the rest need a node: 46/s of 200, under one connection's 50 a second at 20 ms.
    assert.equal(slow(30, 200), fast(30, 200));
    // At 1,000 calls/s, about 230 need a node: one connection carries 50, the database 100 more.
    assert.ok(slow(30, 1000) < fast(30, 1000) - 50, `${slow(30, 1000)} against ${fast(30, 1000)}`);
  });
});

describe('a server’s pool of connections to the database (servers.databaseConnections)', () => {
  test('a query waits for a connection; one whose caller gave up holds its connection until the database answers', async () => {
    const clock = new VirtualClock({ seed: 1 });
    // 1 worker at 10 queries/s: 100 ms a query.
    const db = new Database(clock, new Recorder(60), { capacityQps: 10, workers: 1, maxQueue: 100 });
    const pool = new ConnectionPool(clock, 1, db);
    const ended: string[] = [];
    const ask = (name: string, timeoutMs?: number) =>
      void pool.query('k', timeoutMs === undefined ? {} : { timeoutMs }).then((outcome) => ended.push(`${name}@${clock.now()}:${outcome instanceof QueryError ? 'gave up' : 'row'}`));
    ask('a', 50); // gives up at 50 ms; its query holds the connection to 100 ms
    ask('b'); // waits for the connection, then 100 ms more
    ask('c', 150); // gives up while waiting: never sent
    await clock.advance(400);
    assert.deepEqual(ended, ['a@50:gave up', 'c@150:gave up', 'b@200:row']);
    assert.equal(pool.queued, 0);
  });

  test('it needs a database', () => {
    assert.throws(
      () => small({ kind: 'load-spike', factor: 1 }, (d) => {
        (d.servers as Record<string, unknown>).databaseConnections = 4;
        for (const part of ['database', 'cache', 'keys']) delete d[part];
      }),
      /small\.json: servers\.databaseConnections: needs a database/,
    );
  });
});

describe('closed loop: users wait for their answers', () => {
  test('a slow server gets fewer calls, and a sweep scales the users', async () => {
    const offered = (await closedRun).variants.naive.series.offered;
    // 10 users, 10 ms of service and 90 ms of thought: 100 calls/s; ten times slower, 100 ms more per call: about 53/s.
    assert.ok(Math.abs(mean(offered, 5, 20) - 100) < 5, `healthy ${mean(offered, 5, 20)}`);
    assert.ok(Math.abs(mean(offered, 25, 40) - 52.6) < 5, `slowed ${mean(offered, 25, 40)}`);
    const scaled = scaleLoad(closed(10), 1.5);
    assert.equal(scaled.clients[0]!.closed!.users, 15);
  });
});

describe('the damper variant is built from every configuration role the world has', () => {
  test('dependency(t) per tier, admission(i) per server, cache(0)', async () => {
    const s = small({ kind: 'slowdown', factor: 2 }, (d) => {
      d.durationS = 15;
      d.baseline = { fromS: 1, toS: 5 };
      d.faults = [{ kind: 'slowdown', factor: 2, startS: 5, endS: 10, label: 'slower' }];
      d.tiers = { count: 2, attemptTimeoutMs: 300 };
      d.servers = { ...(d.servers as Record<string, unknown>), count: 2 };
      d.balancer = { intervalS: 5, timeoutMs: 500, fall: 2, rise: 2 };
      d.damper = { config: new URL('test/fixtures/service/roles.config.mjs', ROOT).pathname };
    });
    // In this thread: the module's record is read here.
    const run = await runScenario(s, 1);
    assert.ok(run.variants.damper.summary.goodputRatio > 0.9);
    const asked = (globalThis as { serviceRolesAsked?: { dependency: number[] } }).serviceRolesAsked!;
    // The tiers are built from the servers up: the order they are asked in is not the point.
    assert.deepEqual({ ...asked, dependency: [...asked.dependency].sort() }, { dependency: [0, 1], admission: [0, 1], cache: [0] });
  });
});

describe('the hit ratio as an input (keys.hitRatio): the lab finds the Zipf exponent that gives it', () => {
  test('the exponent found gives that hit ratio in a run: the database sees the misses', async () => {
    const { naive } = (await hitRatioRun).variants;
    const misses = mean(naive.series.originQps, 5, 60) / mean(naive.series.offered, 5, 60);
    assert.ok(Math.abs(1 - misses - 0.8) < 0.02, `hit ratio ${1 - misses}`);
  });

  test('a look-aside’s steady hit ratio, λT ÷ (1 + λT) per key: uniform keys, and the binned tail against the exact sum', () => {
    // 100 keys read 100 times a second in all, kept 10 s: each read once a second, 10 hits per load.
    assert.ok(Math.abs(lookAsideHitRatio(100, 0, 100, 10) - 10 / 11) < 1e-12);
    const exact = (count: number, s: number, rate: number, ttl: number): number => {
      let total = 0;
      for (let r = 1; r <= count; r++) total += 1 / r ** s;
      let hit = 0;
      for (let r = 1; r <= count; r++) {
        const p = 1 / r ** s / total;
        hit += (p * rate * p * ttl) / (1 + rate * p * ttl);
      }
      return hit;
    };
    for (const s of [0, 0.6, 1, 1.5]) assert.ok(Math.abs(lookAsideHitRatio(300_000, s, 2000, 60) - exact(300_000, s, 2000, 60)) < 1e-4, `exponent ${s}`);
  });

  test('found by bisection; out of reach, the range it could give', () => {
    const found = exponentForHitRatio(20_000, 400, 300, 0.9);
    assert.ok(found.reached && Math.abs(lookAsideHitRatio(20_000, found.exponent, 400, 300) - 0.9) < 1e-3);
    assert.equal(exponentForHitRatio(10, 400, 300, 0.5).reached, false);
  });

  test('a hit ratio the keys cannot give, or given with an exponent, or without a cache: each names its field', () => {
    const bad = (keys: Record<string, unknown>, change: (d: Record<string, unknown>) => void, where: RegExp) =>
      assert.throws(
        () => small({ kind: 'load-spike', factor: 1 }, (d) => ((d.keys = keys), change(d))),
        (e) => e instanceof ScenarioError && where.test(e.message),
        where.source,
      );
    bad({ count: 10, hitRatio: 0.5 }, () => {}, /small\.json: keys\.hitRatio: out of reach: 10 keys read 200 times a second and kept 20 s hit 99\.8 % \(uniform\) to 99\.9 % \(exponent 5\), got 50\.0 %: give more keys or a shorter ttl/);
    bad({ count: 200, hitRatio: 0.8, exponent: 1 }, () => {}, /small\.json: keys\.hitRatio: give exponent or hitRatio, not both/);
    bad({ count: 200, hitRatio: 0.8 }, (d) => delete d.cache, /small\.json: keys\.hitRatio: needs a cache/);
  });
});

describe('Zipf keys', () => {
  test('the key of rank r is read ∝ 1 ÷ r^s; exponent 0 is uniform', () => {
    const zipf = new ZipfKeys(100, 1);
    const random = stream(1, 0x1234);
    const counts = new Map<string, number>();
    for (let i = 0; i < 200_000; i++) {
      const k = zipf.pick(random);
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    const h100 = Array.from({ length: 100 }, (_, r) => 1 / (r + 1)).reduce((a, b) => a + b, 0);
    for (const r of [1, 2, 10]) {
      const share = (counts.get(`key:${r - 1}`) ?? 0) / 200_000;
      assert.ok(Math.abs(share - 1 / r / h100) < 0.01, `rank ${r}: ${share}`);
    }
    assert.ok(Math.abs(zipf.shareOfTop(1) - 1 / h100) < 1e-9);
    assert.equal(new ZipfKeys(4, 0).shareOfTop(2), 0.5);
  });
});

/** Keeps the fault type in the test's vocabulary (a compile-time check that every kind above is one). */
export type Kinds = ServiceFault['kind'];

describe('naive parts for the incidents that moved into the service world (issue 28)', () => {
  const row = { version: 1, valid: true };
  const shape = (over: Record<string, unknown> = {}) => ({ ttlS: 30, staleForS: 0, loadTimeoutMs: 1000, scope: 'server' as const, naive: { queryRetries: 0 }, ...over }) as CacheShape;
  const counts = () => ({ cache: { requests: 0, loads: 0, stale: 0 }, retry: { firstAttempts: 0, retries: 0 } });

  test('queryRetries: a failed query is tried again at once, within the load timeout, each attempt counted', async () => {
    const clock = new VirtualClock();
    let calls = 0;
    const way = { query: async () => (++calls < 3 ? new QueryError('down') : row) };
    const seen: unknown[] = [];
    const c = counts();
    naiveQuery(clock, way, 'k', 1000, 1, c, (outcome) => seen.push(outcome));
    await clock.advance(1);
    assert.ok(seen[0] instanceof QueryError, 'one retry, and it failed too: the failure is what the caller hears');
    assert.deepEqual([calls, c.cache.loads, c.retry.firstAttempts, c.retry.retries], [2, 2, 1, 1]);
    naiveQuery(clock, way, 'k', 1000, 1, c, (outcome) => seen.push(outcome));
    await clock.advance(1);
    assert.deepEqual(seen[1], row);
  });

  test('scope server: each server its own page cache, and a restart empties only that server’s', async () => {
    const clock = new VirtualClock();
    let queries = 0;
    const way = { query: async () => (queries++, row) };
    const db = { server: () => way, tier: way };
    const tier = naiveCache(clock, db, shape(), 2, () => counts());
    const keys = new KeySets([{ name: 'web', rate: 1 }], { count: 2, exponent: 0 });
    await tier.prewarm(keys, () => row, () => 10_000, 1);
    const read = (server: number): Promise<string> => new Promise((done) => tier.reader(server)('key:0', 'normal', (_, source) => done(source)));
    assert.deepEqual([await read(0), await read(1), queries], ['cache', 'cache', 0]);
    tier.restart!(0);
    assert.deepEqual([await read(1), await read(0), queries], ['cache', 'origin', 1], 'server 0 restarted empty; server 1 kept its pages');
    assert.equal(await read(0), 'cache', 'the render is cached again');
  });
});
