import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { ConfigError } from 'damper';
import { type JudgedRun, type ScenarioRun, type VariantName, type VariantSummary } from '../judge/results.js';
import { revivedError, type WorkerReply } from './worker-error.js';
import { type Scenario } from '../world/worlds.js';
import { specName, type StackSpec } from '../stacks/stack.js';

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
  return pool.run<ScenarioRun>({ scenario, seed, reply: { kind: 'run' } }, `${scenario.name} (seed ${seed})`);
}

/**
 * Like `runIsolated`, but only these variants run and only their summaries
 * come back (`runSummaries`): a sweep cell needs no per-second series, and a
 * whole run's series would be most of what crosses the thread boundary.
 */
export function runSummariesIsolated(scenario: Scenario, seed: number, variants: readonly VariantName[]): Promise<Partial<Record<VariantName, VariantSummary>>> {
  return pool.run<Partial<Record<VariantName, VariantSummary>>>({ scenario, seed, reply: { kind: 'summaries', variants } }, `${scenario.name} (seed ${seed})`);
}

/** Like `runSummariesIsolated`, for a stack's run (a peer's, issue 31): its summary alone. */
export function runStackSummaryIsolated(scenario: Scenario, spec: StackSpec, seed: number): Promise<VariantSummary> {
  return pool.run<VariantSummary>({ scenario, seed, reply: { kind: 'stack', spec } }, `${scenario.name} under ${specName(spec)} (seed ${seed})`);
}

/** A stack's whole run, judged (series and summary), in a worker: what a test of a peer's run needs, without the promise hooks of the test runner's thread. */
export function runStackIsolated(scenario: Scenario, spec: StackSpec, seed: number): Promise<JudgedRun> {
  return pool.run<JudgedRun>({ scenario, seed, reply: { kind: 'stack-run', spec } }, `${scenario.name} under ${specName(spec)} (seed ${seed})`);
}

/** What a worker is told to run (worker.ts), and what it posts back: the whole run, some variants' summaries, a stack's summary at its verdict, or a stack's whole run. */
export interface WorkerTask {
  readonly scenario: Scenario;
  readonly seed: number;
  readonly reply:
    | { readonly kind: 'run' }
    | { readonly kind: 'summaries'; readonly variants: readonly VariantName[] }
    | { readonly kind: 'stack'; readonly spec: StackSpec }
    | { readonly kind: 'stack-run'; readonly spec: StackSpec };
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

/**
 * A worker thread that runs one task at a time and stays for the next
 * (worker.ts): starting a thread loads the lab, the library and zod again,
 * about 0.4 s of CPU, more than a small run costs, and the suite and a sweep
 * run hundreds. A run starts from its scenario and seed alone (nothing of a
 * run is kept in module state that a later run reads: the caches of
 * answers and failures hold immutable objects), so which worker runs it
 * changes nothing, as "the same seed gives the same run" tests check. An
 * idle worker does not keep the process alive.
 */
class LabWorker {
  private readonly worker: Worker;
  private current: { readonly what: string; resolve(value: unknown): void; reject(error: unknown): void } | undefined;
  /** The thread failed or exited: it takes no more tasks. */
  dead = false;

  constructor() {
    // From the TypeScript sources (tsx), the worker is worker.ts and needs tsx too.
    // On Node 20 `execArgv: ['--import', 'tsx']` does not reach a worker's
    // module loader (ERR_UNKNOWN_FILE_EXTENSION), so a small bootstrap registers
    // tsx's loader in the worker first, then imports worker.ts.
    const fromSource = import.meta.url.endsWith('.ts');
    this.worker = fromSource
      ? new Worker(`import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then(({ register }) => { register(); return import(${JSON.stringify(new URL('./worker.ts', import.meta.url).href)}); })`, { eval: true })
      : new Worker(new URL('./worker.js', import.meta.url));
    this.worker.unref();
    this.worker.on('message', (reply: WorkerReply<unknown>) => {
      const current = this.end();
      if (current === undefined) return;
      if ('ok' in reply) current.resolve(reply.ok);
      else current.reject(revivedError(reply.damperError));
    });
    this.worker.on('error', (error) => {
      this.dead = true;
      this.end()?.reject(error);
    });
    this.worker.on('exit', (code) => {
      this.dead = true;
      const current = this.end();
      current?.reject(new Error(`lab worker for ${current.what} exited with code ${code} and no result`));
    });
  }

  run<T>(task: WorkerTask, what: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.current = { what, resolve: resolve as (value: unknown) => void, reject };
      // Kept alive while it works for someone.
      this.worker.ref();
      this.worker.postMessage(task);
    });
  }

  private end(): LabWorker['current'] {
    const current = this.current;
    this.current = undefined;
    if (!this.dead) this.worker.unref();
    return current;
  }
}

/** At most `labThreads()` tasks at a time (read at the first run), on workers kept for the next. */
const pool = (() => {
  let limit: number | undefined;
  let running = 0;
  const idle: LabWorker[] = [];
  const waiting: (() => void)[] = [];
  return {
    async run<T>(task: WorkerTask, what: string): Promise<T> {
      limit ??= labThreads();
      if (running >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
      running++;
      let worker = idle.pop();
      while (worker?.dead === true) worker = idle.pop();
      worker ??= new LabWorker();
      try {
        return await worker.run<T>(task, what);
      } finally {
        if (!worker.dead) idle.push(worker);
        running--;
        waiting.shift()?.();
      }
    },
  };
})();
