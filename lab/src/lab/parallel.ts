import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { ConfigError } from 'damper';
import { type ScenarioRun, type VariantName, type VariantSummary } from './results.js';
import { revivedError, type WorkerReply } from './worker-error.js';
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
  return pool.submit(() => spawn<ScenarioRun>({ scenario, seed, reply: { kind: 'run' } }, `${scenario.name} (seed ${seed})`));
}

/**
 * Like `runIsolated`, but only these variants run and only their summaries
 * come back (`runSummaries`): a sweep cell needs no per-second series, and a
 * whole run's series would be most of what crosses the thread boundary.
 */
export function runSummariesIsolated(scenario: Scenario, seed: number, variants: readonly VariantName[]): Promise<Partial<Record<VariantName, VariantSummary>>> {
  return pool.submit(() => spawn<Partial<Record<VariantName, VariantSummary>>>({ scenario, seed, reply: { kind: 'summaries', variants } }, `${scenario.name} (seed ${seed})`));
}

/** What a worker is told to run (worker.ts), and what it posts back: the whole run, or some variants' summaries. */
export interface WorkerTask {
  readonly scenario: Scenario;
  readonly seed: number;
  readonly reply: { readonly kind: 'run' } | { readonly kind: 'summaries'; readonly variants: readonly VariantName[] };
}

/**
 * How many workers run at once: one per core, or `DAMPER_LAB_THREADS` when
 * set (a whole number from 1). A machine shared with other work (a CI runner,
 * `npm test`, which runs a real-time test beside a sweep) gives the lab fewer
 * threads than it has cores, so that the lab's computing does not take the
 * cores the others wait on. A bad value is an error, not a silent default.
 */
export function labThreads(): number {
  return workerCount(process.env['DAMPER_LAB_THREADS'], availableParallelism());
}

/** The worker count for a `DAMPER_LAB_THREADS` value (undefined or empty: one per core); anything else is a `ConfigError`. */
export function workerCount(setting: string | undefined, cores: number): number {
  if (setting === undefined || setting === '') return Math.max(1, cores);
  if (!/^[1-9][0-9]{0,3}$/.test(setting)) throw new ConfigError(`DAMPER_LAB_THREADS must be a whole number from 1 to 9999, got ${JSON.stringify(setting)}`);
  return Number(setting);
}

function spawn<T>(task: WorkerTask, what: string): Promise<T> {
  // From the TypeScript sources (tsx), the worker is worker.ts and needs tsx too.
  // On Node 20 `execArgv: ['--import', 'tsx']` does not reach a worker's
  // module loader (ERR_UNKNOWN_FILE_EXTENSION), so a small bootstrap registers
  // tsx's loader in the worker first, then imports worker.ts.
  const fromSource = import.meta.url.endsWith('.ts');
  const worker = fromSource
    ? new Worker(
        `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then(({ register }) => { register(); return import(${JSON.stringify(new URL('./worker.ts', import.meta.url).href)}); })`,
        { eval: true, workerData: task },
      )
    : new Worker(new URL('./worker.js', import.meta.url), { workerData: task });
  return new Promise<T>((resolve, reject) => {
    let reply: WorkerReply<T> | undefined;
    worker.once('message', (message: WorkerReply<T>) => (reply = message));
    worker.once('error', reject);
    worker.once('exit', (code) => {
      if (reply === undefined) reject(new Error(`lab worker for ${what} exited with code ${code} and no result`));
      else if ('ok' in reply) resolve(reply.ok);
      else reject(revivedError(reply.damperError));
    });
  });
}

/** At most `labThreads()` workers at a time (read at the first run). */
const pool = (() => {
  let limit: number | undefined;
  let running = 0;
  const waiting: (() => void)[] = [];
  return {
    async submit<T>(task: () => Promise<T>): Promise<T> {
      limit ??= labThreads();
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
