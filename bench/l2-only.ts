/**
 * `tsc -p tsconfig.test.json && node build/bench/l2-only.js`: only the shared
 * tier's measurement (bench/l2.ts), for iterating on it without the whole
 * `npm run bench`. Starts (and stops) its own redis-server on a free port.
 * BENCH_ROUNDS and BENCH_MIN_CPU_MS as there; BENCH_L2_ROUNDS (default 10) for
 * the throughput rounds.
 */
import { l2Bench, l2LatencyTable, l2ThroughputTable } from './l2.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 15);
const minCpuTimeMs = Number(process.env.BENCH_MIN_CPU_MS ?? 100);
const throughputRounds = Number(process.env.BENCH_L2_ROUNDS ?? 10);
const started = performance.now();
const result = await l2Bench((line) => console.log(line), { rounds, minCpuTimeMs, throughputRounds });
console.log(`\n${l2LatencyTable(result)}\n\n${l2ThroughputTable(result)}\n`);
const damper = result.latency.find((r) => r.name.startsWith('damper'));
if (damper !== undefined) console.log(`damper L2 hit: ${damper.ratioToRaw.toFixed(2)}× the raw client (target ≤ 1.20×)`);
console.log(`done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
