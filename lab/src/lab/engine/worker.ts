import { parentPort } from 'node:worker_threads';
import { DamperError } from 'damper';
import { runScenario, runStackJudged, runStackSummary, runSummaries } from '../lab.js';
import type { WorkerTask } from './parallel.js';
import { postedError, type WorkerReply } from './worker-error.js';

// Runs scenarios in a worker thread, one task at a time, and posts each
// result back: the whole run, or (a sweep cell) some variants' summaries
// only, or a peer stack's summary or whole run; a DamperError as data (worker-error.ts). Anything else thrown ends
// the thread with it (the parent rejects the task and starts another
// thread for the next). See parallel.ts for why runs are isolated this way,
// and why a thread is kept for the next task.
parentPort?.on('message', (task: WorkerTask) => {
  // Left unhandled on purpose: an error that is not a DamperError ends the thread, and the parent hears it ('error').
  void run(task).then((message) => parentPort?.postMessage(message));
});

async function run({ scenario, seed, reply }: WorkerTask): Promise<WorkerReply<unknown>> {
  try {
    switch (reply.kind) {
      case 'run':
        return { ok: await runScenario(scenario, seed) };
      case 'summaries':
        return { ok: await runSummaries(scenario, seed, reply.variants) };
      case 'stack':
        return { ok: await runStackSummary(scenario, reply.spec, seed) };
      case 'stack-run':
        return { ok: await runStackJudged(scenario, reply.spec, seed) };
    }
  } catch (error) {
    if (!(error instanceof DamperError)) throw error;
    return { damperError: postedError(error) };
  }
}
