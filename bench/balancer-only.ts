/**
 * `tsc -p tsconfig.test.json && node build/bench/balancer-only.js`: only the
 * balancer's pick measurement (bench/balancer.ts). BENCH_ROUNDS and
 * BENCH_MIN_CPU_MS as in `npm run bench`.
 */
import { balancerBench, balancerTable } from './balancer.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 15);
const minCpuTimeMs = Number(process.env.BENCH_MIN_CPU_MS ?? 100);
const result = await balancerBench((line) => console.log(line), { rounds, minCpuTimeMs });
console.log(`\n${balancerTable(result)}\n`);
