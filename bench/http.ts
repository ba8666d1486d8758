/**
 * Measurement 8: damper/http's undici interceptor against plain undici on
 * loopback (issue 17; target: ≤ 1.1 × the latency). The origin is a
 * `node:http` server in a child process (bench/http-server.ts, so its CPU is
 * not the client's) answering 200 with a 64-byte body, keep-alive.
 *
 * Variants, each on its own `Agent` (its own connections), each requesting
 * its own path so the server's counts tell them apart:
 * - "undici, plain Agent": `request(url, { dispatcher: new Agent() })`, the floor;
 * - "no-op interceptor", for reference: an interceptor that only passes the
 *   request on, `(dispatch) => (options, handler) => dispatch(options,
 *   handler)`: what undici's `compose` costs any interceptor (it wraps the
 *   caller's handler for the new handler API, and `Agent` unwraps it again),
 *   so the rows below it show damper's own part apart;
 * - "undici's retry interceptor": `new Agent().compose(interceptors.retry())`
 *   on its defaults, the peer a user would pick (it retries with no budget);
 * - "damper interceptor": `new Agent().compose(damperInterceptor(new
 *   HttpDependency({ upstreams: [origin] })))` on its defaults: balancer pick,
 *   the upstream's throttle and breaker, `Retry` under its budget;
 * - "… timeout 5000": the same with `timeout: 5000`, so every request
 *   carries a deadline: a timer per attempt, the deadline header sent;
 * - "… 3 upstreams": three origins (one server process on three ports).
 *
 * a. Latency: one request at a time, its body read (`body.text()`), timed
 *    one by one. In each round every variant sends `requests`, in blocks
 *    that take turns (A B C D, then B C D A, …), so the machine's drift
 *    within a round hits every variant alike. Per variant: the median and
 *    p99 over every timed request; the ratio to plain is the median over
 *    rounds of (this variant's median ÷ plain's median) in the round.
 * b. Throughput: `concurrency` requests in flight (32), bursts taking turns
 *    the same way; requests/s and this process's CPU per request, and the
 *    time per request relative to plain (plain req/s ÷ this row's).
 * c. `damperFetch(dependency)` against undici's `fetch` on a plain `Agent`,
 *    one at a time, as in a (secondary).
 *
 * One discarded warm-up round before each part, a full GC before each round.
 * A benchmark, not a test: it checks that each variant was driven as it says
 * (every response 200 with the whole body; the server counted as many
 * requests per path as were sent, the deadline header on every request of
 * the deadline variant and on no other, the three upstreams all served;
 * nothing retried), never that a target was met.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Agent, type Dispatcher, fetch, interceptors, request, type Response } from 'undici';
import { damperFetch, damperInterceptor, HttpDependency, type HttpDependencyOptions } from '../src/http/index.js';
import { collect } from './gc.js';
import type { ServedCounts } from './http-server.js';
import { versionOf } from './peers.js';
import { table } from './report.js';

export const BODY_BYTES = 64;
export const PLAIN = 'undici, plain Agent';
export const NOOP = 'no-op interceptor (undici compose alone)';
export const UNDICI_RETRY = "undici's retry interceptor";
export const DAMPER = 'damper interceptor';
export const PLAIN_FETCH = 'undici fetch, plain Agent';
export const DAMPER_FETCH = 'damperFetch';
export const TARGET = 'damper interceptor ≤ 1.1 × plain undici latency (one request at a time, median)';
const UPSTREAMS = 3;
const READY_TIMEOUT_MS = 10_000;

export interface HttpBenchOptions {
  /** Timed rounds of each part, after one warm-up round. */
  readonly rounds: number;
  /** Sequential requests per variant per round (latency and fetch). */
  readonly requests: number;
  /** Requests per variant per round at `concurrency` in flight. */
  readonly throughputRequests: number;
  readonly concurrency: number;
  /** Blocks a variant's requests in one round are split into, taking turns with the other variants'. */
  readonly blocks: number;
}

/** The sizes, from BENCH_HTTP_ROUNDS, BENCH_HTTP_REQUESTS, BENCH_HTTP_THROUGHPUT and BENCH_HTTP_CONCURRENCY. */
export function httpOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): HttpBenchOptions {
  const positive = (name: string, fallback: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, got ${raw}`);
    return n;
  };
  return {
    rounds: positive('BENCH_HTTP_ROUNDS', 8),
    requests: positive('BENCH_HTTP_REQUESTS', 1_000),
    throughputRequests: positive('BENCH_HTTP_THROUGHPUT', 2_000),
    concurrency: positive('BENCH_HTTP_CONCURRENCY', 32),
    blocks: 4,
  };
}

/** A row's ratio to the baseline (plain undici): taken within each round, the median over rounds and their spread. */
export interface Spread {
  readonly ratio: number;
  /** Interquartile range of the per-round ratios. */
  readonly ratioIqr: readonly [number, number];
  /** Lowest and highest per-round ratio. */
  readonly ratioRange: readonly [number, number];
}

/** `ratio` is (this row's median ÷ the baseline's) within each round. */
export interface LatencyRow extends Spread {
  readonly name: string;
  readonly setup: string;
  /** Median of every timed request, µs. */
  readonly medianUs: number;
  readonly p99Us: number;
  /** Median over rounds of (this row's median − the baseline's), µs: the overhead per request. */
  readonly overheadUs: number;
  /** p99 ÷ the baseline's p99, over every timed request. */
  readonly p99Ratio: number;
  /** Median over rounds of this process's CPU time (user + system) per request, µs. */
  readonly cpuUsPerRequest: number;
  readonly roundsMedianUs: readonly number[];
}

/** `ratio` is (plain req/s ÷ this row's req/s) within each round: time per request relative to plain. */
export interface ThroughputRow extends Spread {
  readonly name: string;
  /** Median over rounds of requests/s. */
  readonly requestsPerSec: number;
  /** Median over rounds of this process's CPU time (user + system) per request, µs. */
  readonly cpuUsPerRequest: number;
  /** Median over rounds of (this row's CPU per request ÷ plain's). */
  readonly cpuRatio: number;
  readonly roundsRequestsPerSec: readonly number[];
}

export interface HttpResult extends HttpBenchOptions {
  readonly bodyBytes: number;
  readonly undici: string;
  readonly target: string;
  readonly latency: readonly LatencyRow[];
  readonly throughput: readonly ThroughputRow[];
  readonly fetch: readonly LatencyRow[];
  /** What the server counted per path (requests, with the deadline header, per port). */
  readonly served: Readonly<Record<string, ServedCounts>>;
}

/** One way of sending a request. `send` checks the answer and throws on anything but 200 with the whole body. */
interface Variant {
  readonly name: string;
  readonly setup: string;
  readonly path: string;
  readonly send: () => Promise<void>;
  readonly dependency: HttpDependency | undefined;
  /** Requests sent, counted by `send`. */
  sent: number;
}

export async function httpBench(log: (line: string) => void, options: HttpBenchOptions): Promise<HttpResult> {
  const server = await startServer(UPSTREAMS);
  const closers: (() => Promise<unknown> | void)[] = [];
  try {
    log(`  node:http server in a child process (pid ${server.pid}) on ${server.origins.join(', ')}, ${BODY_BYTES}-byte body; undici ${versionOf('undici')}`);
    const { requests, fetches } = variantsOf(server.origins, closers);
    log(`  a. latency: one request at a time, ${options.rounds} rounds × ${options.requests} requests per variant, in ${options.blocks} blocks taking turns`);
    const latency = await latencyPart(log, requests, options);
    log(`  b. throughput: ${options.concurrency} in flight, ${options.rounds} rounds × ${options.throughputRequests} requests per variant`);
    const throughput = await throughputPart(log, requests, options);
    log(`  c. fetch: one request at a time, ${options.rounds} rounds × ${options.requests} requests per variant`);
    const fetchRows = await latencyPart(log, fetches, options);
    const served = await server.counts();
    verify([...requests, ...fetches], served);
    return { ...options, bodyBytes: BODY_BYTES, undici: versionOf('undici'), target: TARGET, latency, throughput, fetch: fetchRows, served };
  } finally {
    for (const close of closers.reverse()) await Promise.resolve(close()).catch(() => {});
    await server.stop();
  }
}

/** The variants sent with `request()`, plain first, and the two `fetch`es; what they open is closed by `closers`. */
function variantsOf(origins: readonly string[], closers: (() => Promise<unknown> | void)[]): { requests: Variant[]; fetches: Variant[] } {
  const [origin, ...others] = origins as [string, ...string[]];
  const agent = (): Agent => {
    const a = new Agent();
    closers.push(() => a.close());
    return a;
  };
  const dependency = (o: HttpDependencyOptions): HttpDependency => {
    const d = new HttpDependency(o);
    closers.push(() => d.close());
    return d;
  };
  const viaRequest = (name: string, setup: string, path: string, dep: HttpDependency | undefined, dispatcher: Dispatcher): Variant =>
    variant(name, setup, `${origin}${path}`, dep, async (url) => {
      const { statusCode, body } = await request(url, { dispatcher });
      return { status: statusCode, text: await body.text() };
    });
  const viaInterceptor = (name: string, setup: string, path: string, o: HttpDependencyOptions): Variant => {
    const dep = dependency(o);
    return viaRequest(name, setup, path, dep, agent().compose(damperInterceptor(dep)));
  };
  const viaFetch = (name: string, setup: string, path: string, dep: HttpDependency | undefined, call: (url: string) => Promise<Response>): Variant =>
    variant(name, setup, `${origin}${path}`, dep, async (url) => {
      const response = await call(url);
      return { status: response.status, text: await response.text() };
    });
  const requests = [
    viaRequest(PLAIN, 'request(url, { dispatcher: new Agent() })', '/plain', undefined, agent()),
    viaRequest(NOOP, 'new Agent().compose((dispatch) => (options, handler) => dispatch(options, handler)), for reference', '/noop', undefined, agent().compose(noop)),
    // The peer a user would pick: undici's own retry, on its defaults (5 retries of idempotent methods, exponential backoff, no budget).
    viaRequest(UNDICI_RETRY, 'new Agent().compose(interceptors.retry()), undici\'s own retry on its defaults', '/undici-retry', undefined, agent().compose(interceptors.retry())),
    viaInterceptor(DAMPER, 'new Agent().compose(damperInterceptor(new HttpDependency({ upstreams: [origin] })))', '/damper', { upstreams: [origin] }),
    viaInterceptor(`${DAMPER}, timeout 5000`, 'the same with { timeout: 5000 }: a deadline on every request', '/deadline', { upstreams: [origin], timeout: 5_000 }),
    viaInterceptor(`${DAMPER}, ${UPSTREAMS} upstreams`, `the same with { upstreams: [${UPSTREAMS} origins] } (one server, ${UPSTREAMS} ports)`, '/three', { upstreams: [origin, ...others] }),
  ];
  const fetchDep = dependency({ upstreams: [origin] });
  const damperFetcher = damperFetch(fetchDep);
  closers.push(() => damperFetcher.close());
  const plainFetchAgent = agent();
  const fetches = [
    viaFetch(PLAIN_FETCH, "fetch(url, { dispatcher: new Agent() }) from 'undici'", '/fetch-plain', undefined, (url) => fetch(url, { dispatcher: plainFetchAgent })),
    viaFetch(DAMPER_FETCH, 'damperFetch(new HttpDependency({ upstreams: [origin] }))', '/fetch-damper', fetchDep, (url) => damperFetcher(url)),
  ];
  return { requests, fetches };
}

/** A variant that sends to `url` with `exchange`, and throws unless the answer is 200 with the whole body. */
function variant(name: string, setup: string, url: string, dependency: HttpDependency | undefined, exchange: (url: string) => Promise<{ status: number; text: string }>): Variant {
  const v: Variant = {
    name,
    setup,
    path: new URL(url).pathname,
    dependency,
    sent: 0,
    send: async () => {
      v.sent++;
      const { status, text } = await exchange(url);
      if (status !== 200 || text.length !== BODY_BYTES) throw new Error(`${name}: got ${status} with ${text.length} bytes, want 200 with ${BODY_BYTES}`);
    },
  };
  return v;
}

const noop: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (options, handler) => dispatch(options, handler);

/** Every request sent reached the server as the variant says, and nothing was retried. */
function verify(variants: readonly Variant[], served: Readonly<Record<string, ServedCounts>>): void {
  for (const v of variants) {
    const s = served[v.path];
    if (s === undefined || s.requests !== v.sent) throw new Error(`${v.name}: sent ${v.sent} requests, the server answered ${s?.requests ?? 0} on ${v.path}`);
    const deadlines = v.path === '/deadline' ? v.sent : 0;
    if (s.withDeadline !== deadlines) throw new Error(`${v.name}: ${s.withDeadline} requests carried the deadline header, want ${deadlines}`);
    if (v.path === '/three' ? s.byPort.some((n) => n === 0) : s.byPort[0] !== v.sent) throw new Error(`${v.name}: requests per port ${s.byPort.join('/')}`);
    if (v.dependency !== undefined) {
      const { retry } = v.dependency.stats();
      if (retry.calls !== v.sent || retry.retries !== 0) throw new Error(`${v.name}: the dependency saw ${retry.calls} calls and ${retry.retries} retries for ${v.sent} requests`);
    }
  }
}

/** The variants in turn, rotated by `turn`: A B C, then B C A, … */
const rotated = <T>(xs: readonly T[], turn: number): T[] => xs.map((_, i) => xs[(i + turn) % xs.length]!);

async function latencyPart(log: (line: string) => void, variants: readonly Variant[], o: HttpBenchOptions): Promise<LatencyRow[]> {
  const perBlock = Math.ceil(o.requests / o.blocks);
  /** Per round, per variant: every request's ns, and this process's CPU µs over them. */
  const samples: Map<Variant, { ns: Float64Array; cpuUs: number }>[] = [];
  for (let round = 0; round <= o.rounds; round++) {
    const thisRound = new Map(variants.map((v) => [v, { ns: new Float64Array(perBlock * o.blocks), cpuUs: 0 }]));
    collect();
    for (let b = 0; b < o.blocks; b++) {
      for (const v of rotated(variants, round + b)) {
        const s = thisRound.get(v)!;
        const cpu = process.cpuUsage();
        for (let i = b * perBlock; i < (b + 1) * perBlock; i++) {
          const t = process.hrtime.bigint();
          await v.send();
          s.ns[i] = Number(process.hrtime.bigint() - t);
        }
        s.cpuUs += cpuSince(cpu);
      }
    }
    for (const s of thisRound.values()) s.ns.sort();
    // Round 0 warms up (the JIT, the connections) and is discarded.
    if (round === 0) continue;
    samples.push(thisRound);
    log(`  round ${round}/${o.rounds}  ${variants.map((v) => `${v.name} ${(quantile(thisRound.get(v)!.ns, 0.5) / 1000).toFixed(1)} µs`).join(', ')}`);
  }
  const base = variants[0]!;
  const pooled = (v: Variant): Float64Array => {
    const all = new Float64Array(samples.length * perBlock * o.blocks);
    for (const [i, r] of samples.entries()) all.set(r.get(v)!.ns, i * perBlock * o.blocks);
    return all.sort();
  };
  const baseP99 = quantile(pooled(base), 0.99);
  const baseMedians = samples.map((r) => quantile(r.get(base)!.ns, 0.5));
  return variants.map((v): LatencyRow => {
    const all = pooled(v);
    const medians = samples.map((r) => quantile(r.get(v)!.ns, 0.5));
    const p99 = quantile(all, 0.99);
    return {
      name: v.name,
      setup: v.setup,
      medianUs: quantile(all, 0.5) / 1000,
      p99Us: p99 / 1000,
      ...spread(medians.map((m, i) => m / baseMedians[i]!)),
      overheadUs: quantile(
        medians.map((m, i) => m - baseMedians[i]!),
        0.5,
      ) / 1000,
      p99Ratio: p99 / baseP99,
      cpuUsPerRequest: quantile(
        samples.map((r) => r.get(v)!.cpuUs / r.get(v)!.ns.length),
        0.5,
      ),
      roundsMedianUs: medians.map((m) => m / 1000),
    };
  });
}

/** This process's CPU time (user + system) since `from`, µs. */
function cpuSince(from: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(from);
  return used.user + used.system;
}

async function throughputPart(log: (line: string) => void, variants: readonly Variant[], o: HttpBenchOptions): Promise<ThroughputRow[]> {
  const perBlock = Math.ceil(o.throughputRequests / o.blocks);
  const samples: Map<Variant, { ns: number; cpuUs: number; requests: number }>[] = [];
  for (let round = 0; round <= o.rounds; round++) {
    const thisRound = new Map(variants.map((v) => [v, { ns: 0, cpuUs: 0, requests: 0 }]));
    collect();
    for (let b = 0; b < o.blocks; b++) {
      for (const v of rotated(variants, round + b)) {
        const s = thisRound.get(v)!;
        const cpu = process.cpuUsage();
        const t = process.hrtime.bigint();
        await burst(v.send, perBlock, o.concurrency);
        s.ns += Number(process.hrtime.bigint() - t);
        s.cpuUs += cpuSince(cpu);
        s.requests += perBlock;
      }
    }
    if (round === 0) continue;
    samples.push(thisRound);
    log(`  round ${round}/${o.rounds}  ${variants.map((v) => `${v.name} ${perSec(thisRound.get(v)!).toFixed(0)} req/s`).join(', ')}`);
  }
  const base = variants[0]!;
  return variants.map((v): ThroughputRow => {
    const rps = samples.map((r) => perSec(r.get(v)!));
    const cpu = samples.map((r) => r.get(v)!.cpuUs / r.get(v)!.requests);
    const baseCpu = samples.map((r) => r.get(base)!.cpuUs / r.get(base)!.requests);
    return {
      name: v.name,
      requestsPerSec: quantile(rps, 0.5),
      cpuUsPerRequest: quantile(cpu, 0.5),
      ...spread(samples.map((r, i) => perSec(r.get(base)!) / rps[i]!)),
      cpuRatio: quantile(
        cpu.map((c, i) => c / baseCpu[i]!),
        0.5,
      ),
      roundsRequestsPerSec: rps,
    };
  });
}

const perSec = (s: { ns: number; requests: number }): number => (s.requests * 1e9) / s.ns;

/** `n` requests with `concurrency` in flight. */
async function burst(send: () => Promise<void>, n: number, concurrency: number): Promise<void> {
  let left = n;
  const worker = async (): Promise<void> => {
    while (left > 0) {
      left--;
      await send();
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
}

function spread(ratios: readonly number[]): Spread {
  return { ratio: quantile(ratios, 0.5), ratioIqr: [quantile(ratios, 0.25), quantile(ratios, 0.75)], ratioRange: [Math.min(...ratios), Math.max(...ratios)] };
}

/** The `q` quantile, interpolated. A Float64Array is taken as sorted already (the per-request samples are, once per round). */
function quantile(xs: ArrayLike<number>, q: number): number {
  const sorted = xs instanceof Float64Array ? xs : Float64Array.from(xs).sort();
  const at = (sorted.length - 1) * q;
  const lo = sorted[Math.floor(at)] ?? 0;
  const hi = sorted[Math.ceil(at)] ?? 0;
  return lo + (hi - lo) * (at - Math.floor(at));
}

interface ServerChild {
  readonly pid: number;
  readonly origins: readonly string[];
  counts(): Promise<Record<string, ServedCounts>>;
  stop(): Promise<void>;
}

/** The origin, forked: resolves once it listens on `ports` loopback ports. Killed if it does not. */
async function startServer(ports: number): Promise<ServerChild> {
  const script = fileURLToPath(new URL('./http-server.js', import.meta.url));
  // No execArgv: the client's own flags (--cpu-prof, --input-type) are not the server's.
  const child = fork(script, [String(ports), String(BODY_BYTES)], { execArgv: [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  };
  try {
    const { ports: listening } = await reply<{ ports: number[] }>(child, (m) => 'ports' in m);
    return {
      pid: child.pid ?? -1,
      origins: listening.map((p) => `http://127.0.0.1:${p}`),
      counts: async () => {
        const answer = reply<{ counts: Record<string, ServedCounts> }>(child, (m) => 'counts' in m);
        child.send('counts');
        return (await answer).counts;
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The child's next message that `matches`; rejects if it exits first or stays silent for READY_TIMEOUT_MS. */
function reply<T>(child: ChildProcess, matches: (m: object) => boolean): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const done = (): void => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    const onMessage = (m: unknown): void => {
      if (typeof m !== 'object' || m === null || !matches(m)) return;
      done();
      resolve(m as T);
    };
    const onExit = (code: number | null, signal: string | null): void => {
      done();
      reject(new Error(`the http bench server exited (${signal ?? `code ${code}`}) before answering`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`the http bench server did not answer within ${READY_TIMEOUT_MS} ms`));
    }, READY_TIMEOUT_MS);
    child.on('message', onMessage);
    child.on('exit', onExit);
  });
}

const us = (v: number): string => v.toFixed(1);
const x = (v: number): string => `${v.toFixed(2)}×`;

export function httpLatencyTable(rows: readonly LatencyRow[], what = 'one request at a time'): string {
  return table(
    [`variant (${what})`, 'median µs', 'p99 µs', '× plain (median of rounds)', 'middle half of rounds', 'all rounds', '+µs per request', 'p99 × plain', 'client CPU µs/req'],
    rows.map((r) => [r.name, us(r.medianUs), us(r.p99Us), x(r.ratio), `${x(r.ratioIqr[0])}–${x(r.ratioIqr[1])}`, `${x(r.ratioRange[0])}–${x(r.ratioRange[1])}`, us(r.overheadUs), x(r.p99Ratio), us(r.cpuUsPerRequest)]),
    [false, true, true, true, true, true, true, true, true],
  );
}

export function httpThroughputTable(result: HttpResult): string {
  return table(
    [`variant (${result.concurrency} in flight)`, 'req/s (median)', 'client CPU µs/req', 'time/req × plain', 'middle half of rounds', 'all rounds', 'CPU/req × plain'],
    result.throughput.map((r) => [r.name, r.requestsPerSec.toFixed(0), us(r.cpuUsPerRequest), x(r.ratio), `${x(r.ratioIqr[0])}–${x(r.ratioIqr[1])}`, `${x(r.ratioRange[0])}–${x(r.ratioRange[1])}`, x(r.cpuRatio)]),
    [false, true, true, true, true, true, true],
  );
}

/** All three tables, and the verdict against the target, as printed. */
export function httpReport(result: HttpResult): string {
  const row = result.latency.find((r) => r.name === DAMPER);
  const verdict = row === undefined ? '' : `\n\ndamper interceptor: ${row.ratio.toFixed(2)}× plain undici latency, rounds ${x(row.ratioRange[0])}–${x(row.ratioRange[1])} (target ≤ 1.10×: ${row.ratio <= 1.1 ? 'meets' : `misses by ${((row.ratio / 1.1 - 1) * 100).toFixed(0)} %`})`;
  return `${httpLatencyTable(result.latency)}\n\n${httpThroughputTable(result)}\n\n${httpLatencyTable(result.fetch, 'fetch, one at a time')}${verdict}`;
}
