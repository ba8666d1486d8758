/**
 * Measurement 5: the balancer's pick path. `balancer.pick()` over 2, 16 and
 * 256 equal-weight upstreams, on the system clock, nothing in slow start and
 * nothing saturated: the cost `run` adds before it calls the upstream (two
 * weighted random draws and a load comparison). Synchronous: no promise is
 * measured. Target: under 200 ns per pick at 16 upstreams. A fourth row runs
 * 16 upstreams with unequal weights (the alias table's second branch).
 */
import { measure } from 'mitata';
import { collect } from './gc.js';
import { Balancer, systemClock } from '../src/index.js';
import { table } from './report.js';

export interface BalancerRow {
  readonly name: string;
  readonly upstreams: number;
  /** Median over rounds of mitata's mean ns per pick. */
  readonly nsPerPick: number;
  /** Fastest round's mean, ns. */
  readonly minNs: number;
}

export interface BalancerResult {
  readonly rounds: number;
  readonly minCpuTimeMs: number;
  readonly target: string;
  readonly rows: readonly BalancerRow[];
}

export async function balancerBench(log: (line: string) => void, options: { rounds?: number; minCpuTimeMs?: number } = {}): Promise<BalancerResult> {
  const rounds = options.rounds ?? 15;
  const minCpuTimeMs = options.minCpuTimeMs ?? 100;
  const make = (n: number, weighted = false): Balancer<number> =>
    new Balancer<number>({ upstreams: Array.from({ length: n }, (_, i) => ({ id: `u${i}`, target: i, weight: weighted ? 1 + (i % 4) : 1 })), clock: systemClock });
  const weighted = make(16, true);
  const contenders: { name: string; upstreams: number; balancer: Balancer<number> }[] = [
    { name: '2 upstreams', upstreams: 2, balancer: make(2) },
    { name: '16 upstreams', upstreams: 16, balancer: make(16) },
    { name: '256 upstreams', upstreams: 256, balancer: make(256) },
    { name: '16 upstreams, weights 1–4', upstreams: 16, balancer: weighted },
  ];
  const drivers = contenders.map((c, id) => driver(id, c.balancer));
  for (const d of drivers) for (let i = 0; i < 10_000; i++) if (d() === undefined) throw new Error('pick returned nothing');
  for (const d of drivers) await measure(d, { min_cpu_time: minCpuTimeMs * 1e6, gc: collect });
  const samples = contenders.map(() => [] as number[]);
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < contenders.length; k++) {
      const i = (k + round) % contenders.length;
      const stats = await measure(drivers[i]!, { min_cpu_time: minCpuTimeMs * 1e6, gc: collect });
      samples[i]!.push(stats.avg);
      log(`  round ${round + 1}/${rounds}  ${contenders[i]!.name.padEnd(28)} ${stats.avg.toFixed(1).padStart(8)} ns/pick`);
    }
  }
  for (const c of contenders) c.balancer.close();
  return {
    rounds,
    minCpuTimeMs,
    target: 'pick < 200 ns at 16 upstreams',
    rows: contenders.map((c, i) => ({ name: c.name, upstreams: c.upstreams, nsPerPick: median(samples[i]!), minNs: Math.min(...samples[i]!) })),
  };
}

export function balancerTable(result: BalancerResult): string {
  return table(
    ['balancer pick (P2C, idle)', 'ns/pick (median)', 'ns/pick (best round)'],
    result.rows.map((r) => [r.name, r.nsPerPick.toFixed(0), r.minNs.toFixed(0)]),
    [false, true, true],
  );
}

/** A timed function per contender, from its own source text (see hit-path.ts's `driver`). */
function driver(id: number, balancer: Balancer<number>): () => unknown {
  const make = new Function('b', `/* balancer driver #${id} */ return function op() { return b.pick(); };`) as (b: Balancer<number>) => () => unknown;
  return make(balancer);
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = (s.length - 1) / 2;
  return (s[Math.floor(m)]! + s[Math.ceil(m)]!) / 2;
}
