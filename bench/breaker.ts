/**
 * Measurement 4: the circuit breaker's success path. Every contender wraps the
 * same always-succeeding `async () => 1` and stays closed; each timed call
 * runs it once through the breaker and awaits the promise. The figure that
 * matters is the ratio to the bare call (target: damper ≤ 1.5×, the full pipeline ≤ 4×; issue 16), taken within
 * each round and reported as the median over rounds, like the hit path.
 *
 * Rows:
 * - "bare async call": `fn()` itself — the floor;
 * - "damper execute": `breaker.execute(fn)` — the measured target;
 * - "damper run (key + signal)": `breaker.run(fn, { key, signal, wait })` with
 *   an abortable signal, the way the cache calls its guard (one closure per
 *   call to tell the caller's abort from a failure), for reference;
 * - "damper full pipeline": throttle + limiter + breaker + retry on their
 *   defaults, composed with `pipeline`, for the cost of the whole stack;
 * - cockatiel 3 `ConsecutiveBreaker(5)` and `SamplingBreaker`, `policy.execute(fn)`;
 * - opossum 9 `new CircuitBreaker(fn, …).fire()`, on its defaults (a 10 s
 *   timeout timer per call) and with `timeout: false`.
 */
import { circuitBreaker, ConsecutiveBreaker, handleAll, SamplingBreaker } from 'cockatiel';
import { measure } from 'mitata';
import { collect } from './gc.js';
import Opossum from 'opossum';
import { CircuitBreaker } from '../src/guard/breaker.js';
import { AdaptiveThrottle, ConcurrencyLimiter, guarded, pipeline, Retry, systemClock } from '../src/index.js';
import { table } from './report.js';

export const BARE = 'bare async call';
export const DAMPER = 'damper execute';

export interface BreakerRow {
  readonly name: string;
  /** How the contender is built and called. */
  readonly setup: string;
  /** Median over rounds of mitata's mean time per awaited call, ns. */
  readonly nsPerOp: number;
  /** Fastest round's mean, ns. */
  readonly minNs: number;
  /** Median over rounds of (this row ÷ bare call) within the round. */
  readonly ratioToBare: number;
  /** Interquartile range of that per-round ratio. */
  readonly ratioToBareIqr: readonly [number, number];
  readonly roundsNs: readonly number[];
}

export interface BreakerResult {
  readonly rounds: number;
  readonly minCpuTimeMs: number;
  readonly target: string;
  readonly rows: readonly BreakerRow[];
}

interface Contender {
  readonly name: string;
  readonly setup: string;
  readonly call: () => Promise<unknown>;
  readonly close: () => void;
  /** True when the breaker is still closed (checked after timing). */
  readonly closed: () => boolean;
}

export async function breakerBench(log: (line: string) => void, options: { rounds?: number; minCpuTimeMs?: number } = {}): Promise<BreakerResult> {
  const rounds = options.rounds ?? 15;
  const minCpuTimeMs = options.minCpuTimeMs ?? 100;
  const contenders = build();
  for (const c of contenders) {
    for (let i = 0; i < 1000; i++) if ((await c.call()) !== 1) throw new Error(`${c.name}: wrong result`);
  }
  const drivers = new Map(contenders.map((c, id) => [c, driver(id, c.call)]));
  // A discarded warm-up round, as in the hit path.
  for (const c of contenders) await measure(drivers.get(c)!, { min_cpu_time: minCpuTimeMs * 1e6, gc: collect });
  const samples: Map<string, number>[] = [];
  for (let round = 0; round < rounds; round++) {
    const thisRound = new Map<string, number>();
    samples.push(thisRound);
    const order = contenders.map((_, i) => contenders[(i + round) % contenders.length]!);
    for (const c of order) {
      const stats = await measure(drivers.get(c)!, { min_cpu_time: minCpuTimeMs * 1e6, gc: collect });
      thisRound.set(c.name, stats.avg);
      log(`  round ${round + 1}/${rounds}  ${c.name.padEnd(34)} ${stats.avg.toFixed(1).padStart(8)} ns/op`);
    }
  }
  for (const c of contenders) {
    if (!c.closed()) throw new Error(`${c.name}: the breaker left the closed state while timing`);
    c.close();
  }
  const at = (r: Map<string, number>, name: string): number => {
    const v = r.get(name);
    if (v === undefined) throw new Error(`no sample for ${name}`);
    return v;
  };
  const rows = contenders.map((c): BreakerRow => {
    const roundsNs = samples.map((r) => at(r, c.name));
    const ratios = samples.map((r) => at(r, c.name) / at(r, BARE));
    return {
      name: c.name,
      setup: c.setup,
      nsPerOp: quantile(roundsNs, 0.5),
      minNs: Math.min(...roundsNs),
      ratioToBare: quantile(ratios, 0.5),
      ratioToBareIqr: [quantile(ratios, 0.25), quantile(ratios, 0.75)],
      roundsNs,
    };
  });
  return { rounds, minCpuTimeMs, target: 'damper execute ≤ 1.5 × bare async call; full pipeline ≤ 4 ×', rows };
}

export function breakerTable(result: BreakerResult): string {
  const x = (v: number): string => `${v.toFixed(2)}×`;
  return table(
    ['breaker (closed, always succeeding)', 'ns/op (median)', 'ns/op (best round)', '× bare call', 'middle half of rounds'],
    result.rows.map((r) => [r.name, r.nsPerOp.toFixed(0), r.minNs.toFixed(0), x(r.ratioToBare), `${x(r.ratioToBareIqr[0])}–${x(r.ratioToBareIqr[1])}`]),
    [false, true, true, true, true],
  );
}

function build(): Contender[] {
  // Each contender gets its own function literal, so no call site is shared.
  const bareFn = async (): Promise<number> => 1;
  const damperFn = async (): Promise<number> => 1;
  const damperSignalFn = async (): Promise<number> => 1;
  const cockConsFn = async (): Promise<number> => 1;
  const cockSampFn = async (): Promise<number> => 1;
  const opossumFn = async (): Promise<number> => 1;
  const opossumNoTimeoutFn = async (): Promise<number> => 1;
  const fullFn = async (): Promise<number> => 1;

  const damper = new CircuitBreaker({ clock: systemClock });
  const damperSignal = new CircuitBreaker({ clock: systemClock });
  const controller = new AbortController();
  const context = { key: 'k', signal: controller.signal, wait: true };
  const cockCons = circuitBreaker(handleAll, { halfOpenAfter: 5_000, breaker: new ConsecutiveBreaker(5) });
  const cockSamp = circuitBreaker(handleAll, { halfOpenAfter: 5_000, breaker: new SamplingBreaker({ threshold: 0.5, duration: 10_000, minimumRps: 2 }) });
  const opossum = new Opossum(opossumFn, { resetTimeout: 5_000, errorThresholdPercentage: 50, rollingCountTimeout: 10_000, volumeThreshold: 20 });
  const opossumNoTimeout = new Opossum(opossumNoTimeoutFn, { timeout: false, resetTimeout: 5_000, errorThresholdPercentage: 50, rollingCountTimeout: 10_000, volumeThreshold: 20 });
  const fullBreaker = new CircuitBreaker({ clock: systemClock });
  const full = pipeline(new AdaptiveThrottle({ clock: systemClock }), new ConcurrencyLimiter({ clock: systemClock }), fullBreaker, new Retry({ clock: systemClock }));
  const none = (): void => {};
  return [
    { name: BARE, setup: 'fn()', call: () => bareFn(), close: none, closed: () => true },
    { name: DAMPER, setup: 'new CircuitBreaker() (defaults); breaker.execute(fn)', call: () => damper.execute(damperFn), close: none, closed: () => damper.state === 'closed' },
    {
      name: 'damper run (key + signal)',
      setup: "breaker.run(fn, { key: 'k', signal, wait: true }) — the cache's path, for reference",
      call: () => damperSignal.run(damperSignalFn, context),
      close: none,
      closed: () => damperSignal.state === 'closed',
    },
    {
      name: 'damper full pipeline',
      setup: 'pipeline(new AdaptiveThrottle(), new ConcurrencyLimiter(), new CircuitBreaker(), new Retry()), defaults; guarded(full, fn)',
      call: () => guarded(full, fullFn),
      close: none,
      closed: () => fullBreaker.state === 'closed',
    },
    {
      name: 'cockatiel ConsecutiveBreaker',
      setup: 'circuitBreaker(handleAll, { halfOpenAfter: 5000, breaker: new ConsecutiveBreaker(5) }); policy.execute(fn)',
      call: () => cockCons.execute(cockConsFn),
      close: none,
      closed: () => cockCons.state === 0,
    },
    {
      name: 'cockatiel SamplingBreaker',
      setup: 'circuitBreaker(handleAll, { halfOpenAfter: 5000, breaker: new SamplingBreaker({ threshold: 0.5, duration: 10000, minimumRps: 2 }) }); policy.execute(fn)',
      call: () => cockSamp.execute(cockSampFn),
      close: none,
      closed: () => cockSamp.state === 0,
    },
    {
      name: 'opossum (defaults: 10 s timeout)',
      setup: 'new CircuitBreaker(fn, { resetTimeout: 5000, errorThresholdPercentage: 50, rollingCountTimeout: 10000, volumeThreshold: 20 }); breaker.fire()',
      call: () => opossum.fire(),
      close: () => opossum.shutdown(),
      closed: () => opossum.closed,
    },
    {
      name: 'opossum (timeout: false)',
      setup: 'the same with timeout: false; breaker.fire()',
      call: () => opossumNoTimeout.fire(),
      close: () => opossumNoTimeout.shutdown(),
      closed: () => opossumNoTimeout.closed,
    },
  ];
}

/** A timed function per contender, from its own source text (see hit-path.ts's `driver`). */
function driver(id: number, call: () => Promise<unknown>): () => Promise<unknown> {
  const make = new Function('call', `/* breaker driver #${id} */ return function op() { return call(); };`) as (call: () => Promise<unknown>) => () => Promise<unknown>;
  return make(call);
}

function quantile(xs: readonly number[], q: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const at = (sorted.length - 1) * q;
  const lo = sorted[Math.floor(at)] ?? 0;
  const hi = sorted[Math.ceil(at)] ?? 0;
  return lo + (hi - lo) * (at - Math.floor(at));
}

