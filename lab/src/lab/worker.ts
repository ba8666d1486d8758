import { parentPort, workerData } from 'node:worker_threads';
import { DamperError } from 'damper';
import { runScenario, runSummaries } from './lab.js';
import type { WorkerTask } from './parallel.js';
import { postedError, type WorkerReply } from './worker-error.js';

// Runs one scenario in a worker thread and posts the result back: the whole
// run, or (a sweep cell) some variants' summaries only; a DamperError as data
// (worker-error.ts), anything else thrown as it is. See parallel.ts for why
// runs are isolated this way.
const { scenario, seed, reply } = workerData as WorkerTask;
let message: WorkerReply<unknown>;
try {
  message = { ok: reply.kind === 'run' ? await runScenario(scenario, seed) : await runSummaries(scenario, seed, reply.variants) };
} catch (error) {
  if (!(error instanceof DamperError)) throw error;
  message = { damperError: postedError(error) };
}
parentPort?.postMessage(message);
