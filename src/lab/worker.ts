import { parentPort, workerData } from 'node:worker_threads';
import { runScenario } from './lab.js';
import { type Scenario } from './worlds.js';

// Runs one scenario, both variants, in a worker thread and posts the result
// back. See parallel.ts for why runs are isolated this way.
const { scenario, seed } = workerData as { scenario: Scenario; seed: number };
parentPort?.postMessage(await runScenario(scenario, seed));
