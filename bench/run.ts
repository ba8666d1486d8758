/**
 * `npm run bench`: the cache benchmark, in one process. Runs the three
 * measurements (hit path, cold stampede, failing key — the last also in its
 * supplementary `stale` variant), prints Markdown tables, and writes
 * bench/results.json. This is a benchmark, not a test: it asserts only that
 * each library was driven correctly (warm keys stay warm while timing), never
 * that a target was met.
 *
 * Environment: BENCH_ROUNDS (default 15) and BENCH_MIN_CPU_MS (default 100,
 * mitata's minimum time per library per round) trade precision for time;
 * BENCH_HTTP_ROUNDS, BENCH_HTTP_REQUESTS, BENCH_HTTP_THROUGHPUT and
 * BENCH_HTTP_CONCURRENCY size the damper/http section (bench/http.ts).
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { balancerBench, balancerTable } from './balancer.js';
import { breakerBench, breakerTable } from './breaker.js';
import { failingKey } from './failing-key.js';
import { hitPath } from './hit-path.js';
import { httpBench, httpOptionsFromEnv, httpReport } from './http.js';
import { instrumentedBench, instrumentedTable } from './instrumented.js';
import { l2Bench, l2LatencyTable, type L2Result, l2ThroughputTable } from './l2.js';
import { tagsBench, tagsTable } from './tags.js';
import { damper, type Peer, peers, versionOf } from './peers.js';
import { describe, failingTable, hitTable, machine, stampedeTable } from './report.js';
import { stampede } from './stampede.js';

const rounds = positive('BENCH_ROUNDS', 15);
const minCpuTimeMs = positive('BENCH_MIN_CPU_MS', 100);
const log = (line: string): void => console.log(line);
const started = performance.now();

const host = machine();
log(`damper cache benchmark — node ${host.node}, ${host.nproc} cores (${host.cpuModel}), ${host.platform} ${host.arch}`);
log(`damper imported from ../src/index.js, compiled by tsc to build/\n`);

log(`1. hit path: ${rounds} rounds × ${minCpuTimeMs} ms per library`);
const hit = await hitPath({ rounds, minCpuTimeMs, log });
log(`\n${hitTable(hit)}\n`);
const damperRow = hit.rows.find((r) => r.name === damper.name);
if (damperRow !== undefined) {
  const verdict = damperRow.ratioToLruFetch <= 1.5 ? 'meets' : `misses by ${((damperRow.ratioToLruFetch / 1.5 - 1) * 100).toFixed(0)} %`;
  const [p25, p75] = damperRow.ratioToLruFetchIqr;
  log(`damper hit path: ${damperRow.ratioToLruFetch.toFixed(2)}× lru-cache fetch, middle half of rounds ${p25.toFixed(2)}–${p75.toFixed(2)}× (target ≤ 1.50×: ${verdict})\n`);
}

log('2. cold stampede');
const storm = await stampede(log);
log(`\n${stampedeTable(storm)}\n`);

log('3. failing key (cold: never had a value)');
const cold = await failingKey('cold', log);
log(`\n${failingTable(cold)}\n`);

log('3b. failing key (stale: had a value, ttl passed, then the origin fails) — supplementary');
const stale = await failingKey('stale', log);
log(`\n${failingTable(stale)}\n`);

log('4. circuit breaker success path (closed, always succeeding)');
const breaker = await breakerBench(log, { rounds, minCpuTimeMs });
log(`\n${breakerTable(breaker)}\n`);

log('5. balancer pick path (P2C, idle upstreams)');
const balancer = await balancerBench(log, { rounds, minCpuTimeMs });
log(`\n${balancerTable(balancer)}\n`);

log('6. shared tier (L2): Cache over RedisStore, L1 miss and Redis hit, against ioredis get + JSON.parse');
let l2: L2Result | { skipped: string };
try {
  const r = await l2Bench(log, { rounds, minCpuTimeMs });
  log(`\n${l2LatencyTable(r)}\n\n${l2ThroughputTable(r)}\n`);
  const row = r.latency.find((x) => x.name.startsWith('damper'));
  if (row !== undefined) {
    const verdict = row.ratioToRaw <= 1.2 ? 'meets' : `misses by ${((row.ratioToRaw / 1.2 - 1) * 100).toFixed(0)} %`;
    log(`damper L2 hit: ${row.ratioToRaw.toFixed(2)}× ioredis get + JSON.parse (target ≤ 1.20×: ${verdict})\n`);
  }
  l2 = r;
} catch (error) {
  // No redis-server on this machine: the other sections still count.
  l2 = { skipped: describe(error) };
  log(`  skipped: ${l2.skipped}\n`);
}

log('7. damper/otel attached: the hit path and the breaker success path, instrumented ÷ plain');
const instrumented = await instrumentedBench(log);
log(`\n${instrumentedTable(instrumented)}\n`);
for (const row of instrumented.rows) log(`${row.path} with damper/otel: ${row.ratio.toFixed(2)}× without (target ≤ 1.10×: ${row.ratio <= 1.1 ? 'meets' : 'misses'})`);
log('');

log('8. damper/http: the undici interceptor against plain undici, on loopback (node:http server in a child process)');
const http = await httpBench(log, httpOptionsFromEnv());
log(`\n${httpReport(http)}\n`);

log('9. tags: a tagged read against an untagged one, from memory and from the shared tier');
const tags = await tagsBench(log, { rounds, minCpuTimeMs });
log(`\n${tagsTable(tags)}\n`);

const results = {
  generatedAt: new Date().toISOString(),
  command: 'npm run bench',
  durationSeconds: Math.round((performance.now() - started) / 100) / 10,
  machine: host,
  damperImport: '../src/index.js, compiled by tsc (tsconfig.test.json) and run from build/',
  damperRevision: revision(),
  libraries: Object.fromEntries(peers.map((p) => [p.name, describePeer(p)])),
  scenarios: {
    hitPath: {
      keys: hit.keys,
      ttlMs: hit.ttlMs,
      rounds: hit.rounds,
      minCpuTimeMsPerRound: hit.minCpuTimeMs,
      target: 'damper ≤ 1.5 × lru-cache fetch',
      note: 'nsPerOp: median over rounds of mitata’s mean time per awaited call; ratios: median over rounds of the ratio within each round (the machine drifts between rounds); p50Ns: median over rounds of mitata’s p50 of batch means',
      libraries: Object.fromEntries(hit.rows.map(({ name, ...row }) => [name, row])),
    },
    coldStampede: {
      callers: storm.callers,
      loaderDelayMs: storm.loaderDelayMs,
      target: storm.target,
      libraries: Object.fromEntries(storm.rows.map(({ name, ...row }) => [name, row])),
    },
    failingKey: failing(cold),
    failingKeyStale: { ...failing(stale), supplementary: true },
    balancerPick: { rounds: balancer.rounds, minCpuTimeMsPerRound: balancer.minCpuTimeMs, target: balancer.target, rows: balancer.rows },
    sharedTierL2: 'skipped' in l2 ? l2 : {
      keys: l2.keys,
      valueBytes: l2.valueBytes,
      batch: l2.batch,
      redisServer: l2.redis,
      ioredis: l2.ioredis,
      rounds: l2.rounds,
      minCpuTimeMsPerRound: l2.minCpuTimeMs,
      throughputRounds: l2.throughputRounds,
      target: l2.target,
      note: 'latency: one awaited get at a time, every call an L1 miss and a fresh Redis hit; nsPerOp median over rounds, ratioToRaw median of within-round ratios. throughput: 20,000 gets in batches of 1,000 concurrent on auto-pipelined clients; ratioToRaw = raw ops/s ÷ row ops/s (time per op relative to the raw client)',
      latency: Object.fromEntries(l2.latency.map(({ name, ...row }) => [name, row])),
      throughput: Object.fromEntries(l2.throughput.map(({ name, ...row }) => [name, row])),
    },
    instrumented,
    breakerSuccessPath: { rounds: breaker.rounds, minCpuTimeMsPerRound: breaker.minCpuTimeMs, target: breaker.target, libraries: Object.fromEntries(breaker.rows.map(({ name, ...row }) => [name, row])) },
    httpInterceptor: {
      rounds: http.rounds,
      requestsPerRound: http.requests,
      throughputRequestsPerRound: http.throughputRequests,
      concurrency: http.concurrency,
      blocksPerRound: http.blocks,
      bodyBytes: http.bodyBytes,
      undici: http.undici,
      target: http.target,
      note: 'latency and fetch: one request at a time, body read; medianUs and p99Us over every timed request; ratio: median over rounds of (row median ÷ plain median) within the round; overheadUs: median over rounds of (row median − plain median). throughput: requests/s at `concurrency` in flight, ratio = plain req/s ÷ row req/s (time per request relative to plain); cpuUsPerRequest: this process’s user + system CPU per request (the server is a child process). Variants take turns in blocks within each round.',
      latency: Object.fromEntries(http.latency.map(({ name, ...row }) => [name, row])),
      throughput: Object.fromEntries(http.throughput.map(({ name, ...row }) => [name, row])),
      fetch: Object.fromEntries(http.fetch.map(({ name, ...row }) => [name, row])),
      served: http.served,
    },
    tags: {
      rounds: tags.rounds,
      note: 'nsPerOp: median over rounds of mitata’s mean per awaited get; ratioToUntagged: median of the within-round ratio to the untagged row of the same tier (L1: two tags; L2: one tag, every call an L1 miss and a fresh Redis hit)',
      l1: Object.fromEntries(tags.l1.map(({ name, ...row }) => [name, row])),
      l2: 'skipped' in tags.l2 ? tags.l2 : Object.fromEntries(tags.l2.map(({ name, ...row }) => [name, row])),
    },
  },
};
// Compiled to build/bench/ (no tsx: its keepNames wrapping slows every closure),
// so the results are written beside the sources, from the package root npm runs in.
const out = resolve('bench/results.json');
// Three decimals are far below this machine's noise.
const rounded = (_key: string, v: unknown): unknown => (typeof v === 'number' && !Number.isInteger(v) ? Math.round(v * 1000) / 1000 : v);
writeFileSync(out, `${JSON.stringify(results, rounded, 2)}\n`);
log(`wrote bench/results.json in ${results.durationSeconds} s`);

function failing(f: typeof cold): object {
  return {
    requests: f.requests,
    intervalMs: f.intervalMs,
    ttlMs: f.ttlMs,
    target: f.target,
    libraries: Object.fromEntries(f.rows.map(({ name, ...row }) => [name, row])),
  };
}

function describePeer(p: Peer): object {
  return {
    package: p.pkg,
    version: versionOf(p.pkg),
    hitPathAndStampede: p.settings({ ttlMs: 60_000, protective: false }),
    failingKey: p.settings({ ttlMs: 60_000, protective: true }),
    failingKeyStale: p.settings({ ttlMs: 1_000, protective: true }),
  };
}

/** The commit measured, and whether src/ differed from it (another change in progress). */
function revision(): { commit: string; srcModified: boolean } | null {
  try {
    const git = (...args: string[]): string => execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return { commit: git('rev-parse', '--short', 'HEAD'), srcModified: git('status', '--porcelain', '--', 'src') !== '' };
  } catch {
    return null;
  }
}

function positive(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${raw}`);
  return n;
}
