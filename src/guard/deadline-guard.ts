import { clockOption, duration, optionsObject } from '../config.js';
import { AbortedError, DeadlineExceededError } from '../errors.js';
import { type Clock } from '../time/clock.js';
import { runAbandonable } from './abandon.js';
import { effectiveDeadline } from './deadline.js';
import { type CallOptions, type Guard, type GuardContext, guarded, notATask } from './guard.js';

/** Options for {@link DeadlineGuard}. */
export interface DeadlineGuardOptions {
  /** Longest a call may take, ms from when it enters the guard. Required. */
  timeout: number;
  clock?: Clock;
}

/**
 * What a {@link DeadlineGuard} has done, from {@link DeadlineGuard.stats},
 * since it was made. An operator reads `expired / calls` as the share of work
 * that could not finish in the time its callers gave it: a dependency slower
 * than the promise made at the edge, answered with a fast failure instead of
 * work nobody waits for.
 */
export interface DeadlineGuardStats {
  /** Calls into `run`. */
  readonly calls: number;
  /** Calls this guard refused (the deadline had passed on arrival) or ended (it passed while they ran) with `DeadlineExceededError`. */
  readonly expired: number;
}

/**
 * Gives every call a deadline of `timeout` from now, or keeps the caller's if
 * it is earlier, and fails the call with {@link DeadlineExceededError} the
 * moment it passes: the task's signal is aborted and the caller is answered at
 * once, even if the task ignores its signal. Put it outermost in a
 * `pipeline`: retries, queues and loaders inside it see the deadline (through
 * the signal, see {@link effectiveDeadline}) and start nothing that cannot
 * finish in time. A caller's abort is answered with {@link AbortedError}.
 */
export class DeadlineGuard implements Guard {
  readonly timeout: number;
  private readonly clock: Clock;
  private calls = 0;
  private expired = 0;

  constructor(guardOptions: DeadlineGuardOptions) {
    const options = optionsObject('DeadlineGuard options', guardOptions);
    this.timeout = duration('timeout', options.timeout, { positive: true, timer: true });
    this.clock = clockOption('clock', options.clock);
  }

  /** Calls seen and expired since the guard was made (see {@link DeadlineGuardStats}). */
  stats(): DeadlineGuardStats {
    return { calls: this.calls, expired: this.expired };
  }

  /** Runs `fn` under the deadline, outside any cache. */
  execute<T>(fn: (signal: AbortSignal) => Promise<T>, options?: CallOptions): Promise<T> {
    return guarded(this, fn, options);
  }

  run<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
    if (typeof task !== 'function') return Promise.reject(notATask('DeadlineGuard', task));
    this.calls++;
    const now = this.clock.now();
    const at = Math.min(now + this.timeout, effectiveDeadline(context) ?? Infinity);
    if (context.signal.aborted) return Promise.reject(new AbortedError(`call for key "${context.key}" aborted`, context.signal.reason));
    if (at <= now) {
      this.expired++;
      return Promise.reject(new DeadlineExceededError(`deadline for key "${context.key}" passed before the call started`, 'admission'));
    }
    const { key } = context;
    return runAbandonable(task, {
      clock: this.clock,
      parent: context.signal,
      at,
      timeout: () => new DeadlineExceededError(`call for key "${key}" passed its deadline`),
      aborted: (reason) => new AbortedError(`call for key "${key}" aborted`, reason),
      onAbandon: (_error, timedOut) => {
        if (timedOut) this.expired++;
      },
    });
  }
}
