/**
 * `tsc -p tsconfig.test.json && node build/bench/http-only.js`: only the
 * damper/http measurement (bench/http.ts), for iterating on it without the
 * whole `npm run bench`. BENCH_HTTP_ROUNDS, BENCH_HTTP_REQUESTS,
 * BENCH_HTTP_THROUGHPUT and BENCH_HTTP_CONCURRENCY as there.
 */
import { httpBench, httpOptionsFromEnv, httpReport } from './http.js';

const result = await httpBench((line) => console.log(line), httpOptionsFromEnv());
console.log(`\n${httpReport(result)}\n`);
