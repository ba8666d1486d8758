import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { type ScenarioRun } from './results.js';
import { type Scenario } from './worlds.js';

/**
 * Runs scenarios in worker threads, a few at a time.
 *
 * Two reasons. A worker's isolate carries no promise hooks of its host: inside
 * `node --test`, whose async context tracking hooks every promise, a lab run
 * was five times slower than on its own. And independent runs (seeds, sweep
 * cells) use every core. A run's result depends on its scenario and seed
 * only, so where it runs changes nothing in it.
 */
export function runIsolated(scenario: Scenario, seed: number): Promise<ScenarioRun> {
  return pool.submit(() => spawn(scenario, seed));
}

function spawn(scenario: Scenario, seed: number): Promise<ScenarioRun> {
  // From the TypeScript sources (tsx), the worker is worker.ts and needs tsx too.
  const fromSource = import.meta.url.endsWith('.ts');
  const worker = new Worker(new URL(fromSource ? './worker.ts' : './worker.js', import.meta.url), {
    workerData: { scenario, seed },
    ...(fromSource ? { execArgv: ['--import', 'tsx'] } : {}),
  });
  return new Promise<ScenarioRun>((resolve, reject) => {
    let result: ScenarioRun | undefined;
    worker.once('message', (run: ScenarioRun) => (result = run));
    worker.once('error', reject);
    worker.once('exit', (code) => {
      if (result !== undefined) resolve(result);
      else reject(new Error(`lab worker for ${scenario.name} (seed ${seed}) exited with code ${code} and no result`));
    });
  });
}

/** At most one worker per core at a time. */
const pool = (() => {
  const limit = Math.max(1, availableParallelism());
  let running = 0;
  const waiting: (() => void)[] = [];
  return {
    async submit<T>(task: () => Promise<T>): Promise<T> {
      if (running >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
      running++;
      try {
        return await task();
      } finally {
        running--;
        waiting.shift()?.();
      }
    },
  };
})();
