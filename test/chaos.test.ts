import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import pg from 'pg';
import { FaultProxy, type Faults } from './support/fault-proxy.js';
import { emptyHistogram, minus, plus, quantile } from './support/latency-histogram.js';
import { type PostgresServer, startPostgres } from './support/postgres.js';
import { type RedisServer, startRedis } from './support/redis-server.js';

// Chaos on real processes (issue 6): 4 worker processes use damper with one
// redis-server and one PostgreSQL, under a steady read load of ~3,000 gets/s
// over 1,000 keys. Faults are real: Redis SIGSTOPped, then SIGKILLed and
// restarted; PostgreSQL stopped (immediate) and restarted; a row made invalid.
// Then slow, not dead (issue 13, item 8): the workers reach both servers
// through fault proxies, which make Redis slow, then starved of bandwidth,
// then PostgreSQL slow, while every connection stays open.
// The bounds the issues set are asserted; the figures go to
// test-output/chaos.json (and docs/benchmarks.md).

const KEYS = 1_000;
const WORKERS = 4;
const GETS_PER_SECOND = 750; // per worker
const WATCH = [11, 22, 33, 44, 55];
const ITEM_QUERY = 'SELECT id, version, valid FROM items WHERE id = $1';

// Slow, not dead. The store's time limit is the shared tier's default timeout
// as its sweep enforces it (a call gives up between 1× and 1.25× of it); a
// caller's p99 may exceed it only by the margin: event-loop lag on a 2-core
// machine that also runs 4 workers, both servers and both proxies.
const STORE_LIMIT_MS = 250 * 1.25;
const P99_MARGIN_MS = 100;
const P99_BOUND_MS = STORE_LIMIT_MS + P99_MARGIN_MS;
/**
 * ×10 of a loopback round trip (tens of µs) is still far inside the time
 * limit. This added latency is the grey zone the figure misses: 80 %
 * of the store's timeout, so every call answers, slowly, and no breaker opens.
 */
const GREY_ZONE_MS = 200;
/** A second is healthy again when L2 hits (Redis faults) or successful loads (PostgreSQL) are back to this share of the baseline, and p99 is within its bound. */
const HEALTHY_SHARE = 0.5;

interface Stats {
  gets: number;
  errorsHad: number;
  errorsCold: number;
  servedInvalid: number;
  pgCalls: number;
  pgOk: number;
  l2Hits: number;
  storeErrors: number;
  watchLoads: number;
  breakerState: string;
  errorsHadSeen: string[];
}

/** Cumulative latency histograms of one worker's gets (see support/latency-histogram.ts). */
interface Latency {
  had: number[];
  cold: number[];
}

const FIELDS = ['gets', 'errorsHad', 'errorsCold', 'servedInvalid', 'pgCalls', 'pgOk', 'l2Hits', 'storeErrors', 'watchLoads'] as const;

let redis: RedisServer;
let postgres: PostgresServer;
let redisProxy: FaultProxy;
let pgProxy: FaultProxy;
const children: ChildProcess[] = [];

/** Median of `n` sequential round trips of `call`, ms. */
async function medianMs(n: number, call: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    await call();
    times.push(performance.now() - start);
  }
  return times.sort((a, b) => a - b)[n >> 1]!;
}

/** Median round trip, ms, of `n` sequential PINGs (Redis) or item queries (PostgreSQL) through the server's proxy, on a connection of the test's own. */
async function throughProxy(server: 'redis' | 'pg', n: number): Promise<number> {
  if (server === 'redis') {
    const client = new Redis({ host: redisProxy.host, port: redisProxy.port });
    try {
      return await medianMs(n, () => client.ping());
    } finally {
      client.disconnect();
    }
  }
  const client = new pg.Client({ host: pgProxy.host, port: pgProxy.port, user: 'postgres', database: 'postgres' });
  await client.connect();
  try {
    return await medianMs(n, () => client.query(ITEM_QUERY, [1]));
  } finally {
    await client.end();
  }
}

before(async () => {
  [redis, postgres] = await Promise.all([startRedis(), startPostgres()]);
  [redisProxy, pgProxy] = await Promise.all([FaultProxy.start({ port: redis.port }), FaultProxy.start({ port: postgres.port })]);
  const client = new pg.Client({ connectionString: postgres.connectionString });
  await client.connect();
  await client.query('CREATE TABLE items (id int PRIMARY KEY, version int NOT NULL, valid boolean NOT NULL)');
  await client.query(`INSERT INTO items SELECT g, 1, true FROM generate_series(1, ${KEYS}) g`);
  await client.end();
});

after(async () => {
  for (const c of children) c.kill('SIGKILL');
  await Promise.all([redisProxy?.close(), pgProxy?.close()]);
  await Promise.all([redis?.stop(), postgres?.stop()]);
});

test('a degraded Redis or PostgreSQL never turns into a herd; an invalid row never replaces the last known good', { timeout: 240_000 }, async () => {
  const worker = fileURLToPath(new URL('./support/cache-worker.js', import.meta.url));
  const latest: Stats[] = [];
  const latencies: Latency[] = [];
  const ready: Promise<void>[] = [];
  for (let i = 0; i < WORKERS; i++) {
    const child = fork(worker, ['steady'], {
      env: {
        ...process.env,
        // The workers go through the proxies; the test's own clients go direct.
        REDIS_PORT: String(redisProxy.port),
        PG_URL: `postgres://postgres@${pgProxy.host}:${pgProxy.port}/postgres`,
        KEYS: String(KEYS),
        GETS_PER_SECOND: String(GETS_PER_SECOND),
        WATCH_IDS: WATCH.join(','),
        WORKER: String(i),
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    children.push(child);
    ready.push(
      new Promise((resolve, reject) => {
        child.on('message', (m: { ready?: boolean; stats?: Stats; latency?: Latency }) => {
          if (m.ready === true) resolve();
          if (m.stats !== undefined) latest[i] = m.stats;
          if (m.latency !== undefined) latencies[i] = m.latency;
        });
        child.once('exit', (code) => reject(new Error(`worker ${i} exited with ${code}`)));
      }),
    );
  }
  await Promise.all(ready);

  // One sample per second of the cluster-wide counters (summed over workers).
  const t0 = performance.now();
  const samples: Sample[] = [];
  const sample = (): void => {
    const total = Object.fromEntries(FIELDS.map((f) => [f, latest.reduce((n, s) => n + (s?.[f] ?? 0), 0)])) as Record<(typeof FIELDS)[number], number>;
    const latency = latencies.reduce((sum, l) => ({ had: plus(sum.had, l.had), cold: plus(sum.cold, l.cold) }), { had: emptyHistogram(), cold: emptyHistogram() });
    samples.push({ t: Math.round((performance.now() - t0) / 1_000), total, breakers: latest.map((s) => s?.breakerState ?? '?'), latency });
  };
  const sampler = setInterval(sample, 1_000);
  const at = async (second: number): Promise<void> => {
    const ms = t0 + second * 1_000 - performance.now();
    if (ms > 0) await new Promise((r) => setTimeout(r, ms));
  };
  const marks: Record<string, number> = {};
  // What the Redis proxy has delivered to the workers at each mark: its throughput is read between marks, not between samples.
  const replyBytes: Record<string, number> = {};
  const mark = (name: string): void => {
    marks[name] = (performance.now() - t0) / 1_000;
    replyBytes[name] = redisProxy.stats().bytes.replies;
  };
  const replyRate = (from: string, to: string): number => (replyBytes[to]! - replyBytes[from]!) / (marks[to]! - marks[from]!);

  // Timeline (seconds from the start of the load). Each fault's after-window is the 5 s its recovery bound names plus
  // one, each slow phase 8 s (issue 25: 150 s → 129 s; the pause, PostgreSQL's stop and the invalid rows keep theirs,
  // which are about what a longer fault lets build up).
  await at(15); // warm-up: every key loaded once, refreshes spread over the ttl
  mark('baselineFrom');
  // Round trips through the proxies under the load, for the "×10" and "×20" of the slow phases.
  const redisRttMs = await throughProxy('redis', 200);
  const pgRttMs = await throughProxy('pg', 200);
  await at(25);
  mark('baselineTo');
  redis.pause();
  mark('redisPaused');
  await at(35);
  redis.resume();
  mark('redisResumed');
  await at(41);
  await redis.kill();
  mark('redisKilled');
  await at(43);
  await redis.restart();
  mark('redisRestarted');
  await at(49);
  await postgres.kill();
  mark('pgStopped');
  await at(59);
  await postgres.restart();
  mark('pgRestarted');
  await at(65);
  const client = new pg.Client({ connectionString: postgres.connectionString });
  await client.connect();
  await client.query(`UPDATE items SET valid = false, version = 2 WHERE id = ANY($1)`, [WATCH]);
  mark('rowsInvalid');
  await at(85);
  await client.query(`UPDATE items SET valid = true WHERE id = ANY($1)`, [WATCH]);
  await client.end();
  mark('rowsValid');
  // Slow, not dead: each fault is a proxy setting, applied to the connections already open.
  const baselineReplyBytesPerSecond = replyRate('baselineFrom', 'baselineTo');
  const slow = {
    redisRttMs,
    redisLatencyMs: 9 * redisRttMs, // added to replies: a round trip of 10× the measured one
    greyZoneMs: GREY_ZONE_MS,
    baselineReplyBytesPerSecond,
    redisBytesPerSecond: Math.max(1, Math.round(baselineReplyBytesPerSecond / 100)),
    pgRttMs,
    pgLatencyMs: 19 * pgRttMs, // a query round trip of 20× the measured one
  };
  // The same probes, once a fault is on, show that it is: else every bound below would hold vacuously.
  const probed: Record<string, number> = {};
  const fault = async (name: string, server: 'redis' | 'pg', faults: Faults, until: number, probes: number): Promise<void> => {
    const proxy = server === 'redis' ? redisProxy : pgProxy;
    proxy.set('replies', faults);
    mark(`${name}From`);
    if (probes > 0) probed[`${name}RttMs`] = await throughProxy(server, probes);
    await at(until);
    mark(`${name}To`); // before the reset, which lets out at once what the fault held
    proxy.reset();
  };
  await fault('redisSlow', 'redis', { latencyMs: slow.redisLatencyMs }, 93, 20);
  await fault('redisGrey', 'redis', { latencyMs: GREY_ZONE_MS }, 98, 3);
  await at(103);
  await fault('redisThin', 'redis', { bytesPerSecond: slow.redisBytesPerSecond }, 111, 0);
  await at(116);
  await fault('pgSlow', 'pg', { latencyMs: slow.pgLatencyMs }, 124, 20);
  await at(129);
  mark('end');
  clearInterval(sampler);
  sample();
  for (const c of children) c.send('stop');
  await Promise.all(children.map((c) => new Promise((resolve) => (c.exitCode !== null ? resolve(undefined) : c.once('exit', resolve)))));

  const { rate, window } = perSecond(samples);
  const baselinePgQps = window('pgCalls', marks['baselineFrom']!, marks['baselineTo']!) / (marks['baselineTo']! - marks['baselineFrom']!);
  const redisPhasePg = rate('pgCalls', marks['redisPaused']!, marks['pgStopped']!);
  const l2AfterResume = rate('l2Hits', marks['redisResumed']!, marks['redisResumed']! + 5);
  const l2AfterRestart = rate('l2Hits', marks['redisRestarted']!, marks['redisRestarted']! + 5);
  const pgDownCalls = rate('pgCalls', marks['pgStopped']! + 1, marks['pgRestarted']!);
  const okAfterPg = rate('pgOk', marks['pgRestarted']!, marks['pgRestarted']! + 5);
  const watchLoads = window('watchLoads', marks['rowsInvalid']!, marks['rowsValid']!);
  const last = samples.at(-1)!.total;
  const slowNotDead = { ...slow, probed, thinReplyShare: replyRate('redisThinFrom', 'redisThinTo') / baselineReplyBytesPerSecond, ...slowPhases(samples, marks, baselinePgQps) };
  const figures = {
    marks,
    gets: last.gets,
    getsPerSecond: last.gets / marks['end']!,
    baselinePgQps,
    redisPhasePgPeakQps: Math.max(...redisPhasePg),
    redisPhasePgPeakRatio: Math.max(...redisPhasePg) / baselinePgQps,
    l2HitsPerSecondAfterResume: l2AfterResume,
    l2HitsPerSecondAfterRestart: l2AfterRestart,
    pgCallsPerSecondWhileDown: pgDownCalls,
    pgOkPerSecondAfterRestart: okAfterPg,
    watchKeyLoadsDuringInvalid: watchLoads,
    errorsForKeysWithValue: last.errorsHad,
    errorsForKeysWithValueSeen: latest.flatMap((s) => s.errorsHadSeen),
    errorsForColdKeys: last.errorsCold,
    servedInvalid: last.servedInvalid,
    slowNotDead,
    // Per second: the counters, and the p99 of that second's gets of keys with a value (the histograms stay out: they are long).
    samples: samples.map(({ latency, ...s }, i) => ({ ...s, p99HadMs: quantile(minus(latency.had, samples[i - 1]?.latency.had ?? emptyHistogram()), 0.99) })),
  };
  mkdirSync('test-output', { recursive: true });
  writeFileSync('test-output/chaos.json', JSON.stringify(figures, null, 2));
  const brief = { ...figures, samples: undefined };
  const context = JSON.stringify(brief);

  assert.ok(last.gets > 0.8 * WORKERS * GETS_PER_SECOND * marks['end']!, `the load ran: ${context}`);
  assert.ok(baselinePgQps > 20, `a healthy baseline was measured: ${context}`);
  // Every bound below is against this baseline, so it must be healthy: the shared tier answering. On a host running at
  // half speed, beside another real-time file, the workers' Redis calls timed out through the whole baseline (~800 store
  // errors a second, no L2 hits) and the test failed later, misleadingly, on PostgreSQL's ratio to that baseline.
  const baselineStoreErrors = window('storeErrors', marks['baselineFrom']!, marks['baselineTo']!);
  const baselineGets = window('gets', marks['baselineFrom']!, marks['baselineTo']!);
  assert.ok(baselineStoreErrors <= 0.01 * baselineGets && window('l2Hits', marks['baselineFrom']!, marks['baselineTo']!) > 0, `the baseline is healthy (${baselineStoreErrors} store errors for ${baselineGets} gets): this machine could not carry the load, and no bound below would mean anything: ${context}`);
  // Redis paused, then killed: callers see no errors for keys that had a value…
  assert.equal(last.errorsHad, 0, `no errors for keys with a value: ${context}`);
  // … and PostgreSQL stays within 1.5× its healthy rate, every second.
  assert.ok(Math.max(...redisPhasePg) <= 1.5 * baselinePgQps, `PostgreSQL ≤ 1.5× baseline while Redis is degraded: ${context}`);
  // L2 hits come back within 5 s of Redis coming back.
  assert.ok(l2AfterResume.some((n) => n > 0), `L2 hits within 5 s of the resume: ${context}`);
  assert.ok(l2AfterRestart.some((n) => n > 0), `L2 hits within 5 s of the restart: ${context}`);
  // PostgreSQL down: only a few probes a second reach it; recovery within 5 s of its restart.
  assert.ok(Math.max(...pgDownCalls) <= 10, `at most a few calls per second reach a stopped PostgreSQL: ${context}`);
  assert.ok(okAfterPg.some((n) => n > 0), `loads succeed within 5 s of PostgreSQL's restart: ${context}`);
  // Invalid rows: the last known good everywhere, at most one load per key per backoff step in the cluster.
  assert.equal(last.servedInvalid, 0, `no invalid value served: ${context}`);
  // Backoff 100 ms doubling, ±20 %: at most 9 steps fit in 20 s; 5 keys.
  assert.ok(watchLoads <= WATCH.length * 9, `loads of the invalid keys in 20 s: ${context}`);
  // Slow, not dead: the errors bound above covers these phases too.
  const { phases } = slowNotDead;
  assert.ok(probed['redisSlowRttMs']! >= slow.redisLatencyMs && probed['redisGreyRttMs']! >= GREY_ZONE_MS && probed['pgSlowRttMs']! >= slow.pgLatencyMs, `the slow faults were on: ${context}`);
  assert.ok(slowNotDead.thinReplyShare < 0.02 && !phases.redisThin.healthyThroughout, `the bandwidth cap starved Redis's replies: ${context}`);
  assert.ok(slowNotDead.redisPgPeakRatio <= 1.5, `PostgreSQL ≤ 1.5× baseline every second while Redis is slow or starved: ${context}`);
  for (const [name, phase] of Object.entries(phases)) {
    assert.ok(phase.getsHad > 0 && phase.p99HadMs !== undefined && phase.p99HadMs <= P99_BOUND_MS, `${name}: callers' p99 (keys with a value) ≤ ${P99_BOUND_MS} ms: ${context}`);
  }
  // ×10 runs straight into the grey zone, so its own recovery cannot be seen: it must not need one.
  assert.ok(phases.redisSlow.healthyThroughout, `Redis at ×10 latency: every second healthy: ${context}`);
  for (const name of ['redisGrey', 'redisThin', 'pgSlow'] as const) {
    const r = phases[name].recoverySeconds;
    assert.ok(r !== null && r <= 5, `${name}: healthy again within 5 s of the fault's end: ${context}`);
  }
});

type Field = (typeof FIELDS)[number];

/** The cluster's cumulative counters at one second of the run (summed over workers). */
interface Sample {
  t: number;
  total: Record<Field, number>;
  breakers: string[];
  latency: Latency;
}

/** Per-second views of cumulative samples; a window (from, to] holds the seconds that end inside it. */
function perSecond(samples: readonly Sample[]) {
  const inside = (from: number, to: number): number[] => samples.flatMap((s, i) => (i > 0 && s.t > from && s.t <= to ? [i] : []));
  const rate = (field: Field, from: number, to: number): number[] => inside(from, to).map((i) => samples[i]!.total[field] - samples[i - 1]!.total[field]);
  const window = (field: Field, from: number, to: number): number => rate(field, from, to).reduce((a, b) => a + b, 0);
  /** The latency histogram of the gets asked in seconds `(from, to]`. */
  const latency = (which: keyof Latency, from: number, to: number): number[] =>
    inside(from, to).reduce((sum, i) => plus(sum, minus(samples[i]!.latency[which], samples[i - 1]!.latency[which])), emptyHistogram());
  /** Per second: `[t, p99 of keys with a value]`. */
  const p99s = (from: number, to: number): [number, number | undefined][] => inside(from, to).map((i) => [samples[i]!.t, quantile(minus(samples[i]!.latency.had, samples[i - 1]!.latency.had), 0.99)]);
  return { rate, window, latency, p99s };
}

/**
 * The slow-not-dead phases' figures: per phase, callers' p99, PostgreSQL's
 * peak over its baseline (the fault and the 5 s after it), errors, and how
 * long after the fault's end the cluster was healthy again: L2 hits (Redis
 * faults) or successful loads (PostgreSQL) back to {@link HEALTHY_SHARE} of
 * the baseline, in a second whose p99 is within its bound.
 */
function slowPhases(samples: readonly Sample[], marks: Record<string, number>, baselinePgQps: number) {
  const { rate, window, latency, p99s } = perSecond(samples);
  const m = (name: string): number => marks[name]!;
  // The L2 hit rate the slow phases are judged against: the 10 s before the first of them, with both servers healthy. Not the
  // 15-25 s baseline: there the first refreshes of every key (all loaded in the first seconds) still come in bursts, at about
  // twice the steady rate and falling, so half of it was the steady rate itself and "healthy" a coin toss (issue 25: it failed
  // "Redis at ×10 latency: every second healthy" by 0.3 hits/s, then by 50, on a busy machine).
  const steadyFrom = m('redisSlowFrom') - 10;
  const baselineL2 = window('l2Hits', steadyFrom, m('redisSlowFrom')) / (m('redisSlowFrom') - steadyFrom);
  // Marks fall a few ms either side of the whole second the timeline aimed at; a phase is the whole seconds between them.
  const phase = (fromMark: number, toMark: number, health: 'l2Hits' | 'pgOk') => {
    const [from, to] = [Math.round(fromMark), Math.round(toMark)];
    const healthyFloor = HEALTHY_SHARE * (health === 'l2Hits' ? baselineL2 : baselinePgQps);
    const healthy = (a: number, b: number): boolean[] => {
      const counts = rate(health, a, b);
      return p99s(a, b).map(([, p99], k) => counts[k]! >= healthyFloor && p99 !== undefined && p99 <= P99_BOUND_MS);
    };
    const after = p99s(to, m('end'));
    const firstHealthy = healthy(to, m('end')).indexOf(true);
    const had = latency('had', from, to);
    const pg = rate('pgCalls', from, to + 5);
    return {
      from,
      to,
      getsHad: had.reduce((a, b) => a + b, 0),
      p99HadMs: quantile(had, 0.99),
      p99ColdMs: quantile(latency('cold', from, to), 0.99),
      pgPeakRatio: Math.max(...pg) / baselinePgQps,
      errorsHad: window('errorsHad', from, to + 5),
      storeErrors: window('storeErrors', from, to),
      health,
      healthPerSecond: rate(health, from, to + 5),
      healthyThroughout: healthy(from, to).every(Boolean),
      // 1 means the first whole second after the fault was healthy.
      recoverySeconds: firstHealthy < 0 ? null : after[firstHealthy]![0] - to,
    };
  };
  const redisPg = rate('pgCalls', Math.round(m('redisSlowFrom')), Math.round(m('pgSlowFrom')));
  return {
    baselineL2HitsPerSecond: baselineL2,
    redisPgPeakRatio: Math.max(...redisPg) / baselinePgQps,
    phases: {
      redisSlow: phase(m('redisSlowFrom'), m('redisSlowTo'), 'l2Hits'),
      redisGrey: phase(m('redisGreyFrom'), m('redisGreyTo'), 'l2Hits'),
      redisThin: phase(m('redisThinFrom'), m('redisThinTo'), 'l2Hits'),
      pgSlow: phase(m('pgSlowFrom'), m('pgSlowTo'), 'pgOk'),
    },
  };
}
