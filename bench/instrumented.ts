/**
 * What attaching `damper/otel` costs the two hot paths — a cache hit and the
 * breaker's success path — measured against the same path with nothing
 * attached, in one process, alternating rounds (the machine drifts between
 * rounds). The instrumented twins are attached to the real SDK's
 * `MeterProvider`. A collection's own cost (the batch callbacks reading
 * `stats()`, the SDK aggregating) is paid once per export, not per call, so
 * it is timed apart: the median of 50 collections of both targets.
 */
import { AggregationTemporality, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { Cache, CircuitBreaker } from '../src/index.js';
import { instrument } from '../src/otel/index.js';

const ROUNDS = 8;
const CALLS = 500_000;
const COLLECTIONS = 50;

/** A reader collected by a timer of this benchmark's own. */
class Reader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

export interface InstrumentedRow {
  readonly path: 'cache hit' | 'breaker success';
  readonly plainNs: number;
  readonly instrumentedNs: number;
  /** Median over rounds of instrumented ÷ plain within each round. */
  readonly ratio: number;
}

export interface InstrumentedResult {
  readonly rounds: number;
  readonly callsPerRound: number;
  readonly target: string;
  readonly rows: readonly InstrumentedRow[];
  /** Median µs of one collection of both instrumented targets (paid per export, not per call). */
  readonly collectionUs: number;
}

async function timed(call: () => Promise<unknown>, n: number): Promise<number> {
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await call();
  return Number(process.hrtime.bigint() - t) / n;
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

async function hotPaths(meterProvider: MeterProvider | undefined): Promise<Record<InstrumentedRow['path'], () => Promise<unknown>>> {
  const cache = new Cache<number>({ ttl: 3_600_000, maxEntries: 2000 });
  const keys = Array.from({ length: 1000 }, (_, i) => `k${i}`);
  for (const [i, k] of keys.entries()) await cache.set(k, i);
  const breaker = new CircuitBreaker({});
  if (meterProvider !== undefined) {
    instrument(cache, { meterProvider, attributes: { 'damper.name': 'bench' } });
    instrument(breaker, { meterProvider, attributes: { 'damper.name': 'bench' } });
  }
  const noLoad = (): never => {
    throw new Error('a hit never loads');
  };
  const ok = (): Promise<number> => Promise.resolve(1);
  let i = 0;
  return { 'cache hit': () => cache.get(keys[i++ % keys.length]!, noLoad), 'breaker success': () => breaker.execute(ok) };
}

export async function instrumentedBench(log: (line: string) => void): Promise<InstrumentedResult> {
  const reader = new Reader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const plain = await hotPaths(undefined);
  const instrumented = await hotPaths(meterProvider);
  const rows: InstrumentedRow[] = [];
  try {
    for (const path of ['cache hit', 'breaker success'] as const) {
      const ns = { plain: [] as number[], instrumented: [] as number[], ratio: [] as number[] };
      await timed(plain[path], CALLS / 2);
      await timed(instrumented[path], CALLS / 2);
      for (let r = 0; r < ROUNDS; r++) {
        const order = r % 2 === 0 ? (['plain', 'instrumented'] as const) : (['instrumented', 'plain'] as const);
        const round: Record<string, number> = {};
        for (const which of order) round[which] = await timed(which === 'plain' ? plain[path] : instrumented[path], CALLS);
        ns.plain.push(round.plain!);
        ns.instrumented.push(round.instrumented!);
        ns.ratio.push(round.instrumented! / round.plain!);
      }
      const row = { path, plainNs: median(ns.plain), instrumentedNs: median(ns.instrumented), ratio: median(ns.ratio) };
      log(`  ${path}: plain ${row.plainNs.toFixed(1)} ns, instrumented ${row.instrumentedNs.toFixed(1)} ns, ratio ${row.ratio.toFixed(3)}`);
      rows.push(row);
    }
    const us: number[] = [];
    for (let c = 0; c < COLLECTIONS; c++) {
      const t = process.hrtime.bigint();
      const { errors } = await reader.collect();
      us.push(Number(process.hrtime.bigint() - t) / 1000);
      if (errors.length > 0) throw new Error(`collection failed: ${String(errors[0])}`);
    }
    const collectionUs = median(us);
    log(`  one collection of both targets: ${collectionUs.toFixed(0)} µs (median of ${COLLECTIONS})`);
    return { rounds: ROUNDS, callsPerRound: CALLS, target: 'instrumented ≤ 1.1 × plain', rows, collectionUs };
  } finally {
    await meterProvider.shutdown();
  }
}

export function instrumentedTable(r: InstrumentedResult): string {
  const lines = ['| path | plain, ns/call | with damper/otel attached, ns/call | ratio (median of rounds) |', '|---|---:|---:|---:|'];
  for (const row of r.rows) lines.push(`| ${row.path} | ${row.plainNs.toFixed(1)} | ${row.instrumentedNs.toFixed(1)} | ${row.ratio.toFixed(2)}× |`);
  return lines.join('\n');
}
