/**
 * `tsc -p tsconfig.test.json && node build/bench/breaker-only.js`: only the circuit-breaker
 * measurement (bench/breaker.ts), for iterating on it without the whole
 * `npm run bench`. BENCH_ROUNDS and BENCH_MIN_CPU_MS as there.
 */
import { breakerBench, breakerTable } from './breaker.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 15);
const minCpuTimeMs = Number(process.env.BENCH_MIN_CPU_MS ?? 100);
const result = await breakerBench((line) => console.log(line), { rounds, minCpuTimeMs });
console.log(`\n${breakerTable(result)}\n`);
