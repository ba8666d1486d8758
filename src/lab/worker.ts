import { parentPort, workerData } from 'node:worker_threads';
import { runScenario } from './lab.js';
import type { WorkerTask } from './parallel.js';

// Runs one scenario, both variants, in a worker thread and posts the result
// back: the whole run, or (a sweep cell) the two variants' summaries only.
// See parallel.ts for why runs are isolated this way.
const { scenario, seed, summaries } = workerData as WorkerTask;
const run = await runScenario(scenario, seed);
parentPort?.postMessage(summaries ? { naive: run.variants.naive.summary, damper: run.variants.damper.summary } : run);
