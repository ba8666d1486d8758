import assert from 'node:assert/strict';
import { type Clock, MAX_TIMER_MS } from '../time/clock.js';
import { clockOption, duration, integer, isInstance, optionalFunction, optionsObject, or, ordered } from '../config.js';
import { AbortedError, ConfigError, DeadlineExceededError, LoadTimeoutError } from '../errors.js';
import { Events, type ListenerErrorOption } from '../events.js';
import { onAbort } from './abort.js';
import { RetryBudget } from './budget.js';
import { isNeverRetried, retryAfterOf } from './classify.js';
import { runAbandonable } from './abandon.js';
import { effectiveDeadline } from './deadline.js';
import { type CallOptions, type GuardContext, guarded, notATask, type Report, REPORTS, type Reporting, startTask } from './guard.js';

/** Options for {@link Retry}. */
export interface RetryOptions extends ListenerErrorOption {
  /** Attempts in all, the first included. Default 3. 1 disables retrying. */
  maxAttempts?: number;
  /** Scale of the backoff: the wait before retry n is drawn from [0, min(maxDelay, baseDelay · 2^(n−1))). Default 100 ms. */
  baseDelay?: number;
  /**
   * Cap on the backoff, ms. Default 10 000. A server's "retry after" longer
   * than this is not waited for: the call fails at once with its error.
   */
  maxDelay?: number;
  /**
   * The budget retries are drawn from. Default: a new {@link RetryBudget} for
   * this guard. Pass one shared instance to every `Retry` in front of the same
   * dependency, so the bound holds over all of its callers.
   */
  budget?: RetryBudget;
  /**
   * Narrows which errors are retried (it cannot widen: the errors listed on
   * {@link Retry} are never retried). Default: every other error. A throw
   * counts as `false`. It is given the call's context too, for a rule that
   * depends on the call rather than on the error (damper/http: a response
   * already handed to its caller cannot be taken back and sent again).
   */
  retryOn?: (error: unknown, context: GuardContext) => boolean;
  /**
   * Longest one attempt may run, ms: its signal is aborted then, and the
   * attempt fails for the caller with `LoadTimeoutError` (a retryable error)
   * at that instant, whether or not the task stops: its later answer is
   * dropped (see {@link Retry}, "abandoned attempts"). Default: none. A retry
   * is only started when a whole `attemptTimeout` fits before the caller's
   * deadline.
   */
  attemptTimeout?: number;
  /**
   * How long an attempt is expected to take, ms: no attempt (the first
   * included) starts unless this much time is left before the caller's
   * deadline. Default 0 for the first attempt; retries use `attemptTimeout`
   * when it is set.
   */
  expectedDuration?: number;
  clock?: Clock;
}

/** Typed events of a {@link Retry}. Listeners run synchronously; what they throw is isolated. */
export interface RetryEvents {
  /** A retry was granted: attempt `attempt` (≥ 2) starts after `delay` ms because of `error`. */
  retry: (event: { key: string; attempt: number; delay: number; error: unknown }) => void;
  /** A retryable failure was not retried because the shared {@link RetryBudget} was spent. */
  budgetExhausted: (event: { key: string; attempt: number; error: unknown }) => void;
  /**
   * Attempt `attempt` ended for the caller (its `attemptTimeout`, the deadline,
   * or an abort of the caller's signal: `reason` says which) while its task
   * was still running: the dependency may still be doing work nobody waits for.
   */
  abandoned: (event: { key: string; attempt: number; reason: unknown }) => void;
}

/**
 * What a {@link Retry} has done, from {@link Retry.stats}, since it was made.
 * An operator reads the retry ratio in it (`retries / calls`: the load the
 * retries add to the dependency, which the budget bounds), `budgetRefusals`
 * climbing (the dependency fails so much that the budget, not the policy, now
 * decides: the storm it was made to stop), and abandoned tasks still running
 * (work the dependency does that nobody waits for).
 */
export interface RetryStats {
  /** Calls into `run`: first attempts (each earns the budget its `ratio` of a retry). */
  readonly calls: number;
  /** Attempts after the first that were started (a retry granted but cut short by an abort or the deadline during its backoff is not). */
  readonly retries: number;
  /** Retryable failures not retried because the {@link RetryBudget} was spent (the `budgetExhausted` event). */
  readonly budgetRefusals: number;
  /** Attempts that ended for the caller while their task was still running, since the guard was made. */
  readonly abandoned: number;
  /**
   * Of those, the ones whose task has not settled yet. A task that honours its
   * signal leaves this moments after its abort; one that ignores it stays
   * until it settles, so a level that stays up names a driver that ignores
   * its signal, and is load on the dependency that no caller waits for.
   */
  readonly abandonedRunning: number;
}


/**
 * Retries a failed call with capped exponential backoff and full jitter, under
 * a {@link RetryBudget}, never past the caller's deadline.
 *
 * Why each rule (docs/design.md, principle 3: no loop whose rate grows with failure):
 * - **A budget.** "Retry 3 times" triples the load on a dependency that fails
 *   every call: the loop that held the Facebook 2010 database cluster down and
 *   let Discord 2019's herd reach MongoDB. Retries beyond the budget fail at once.
 * - **Never retried:** `BreakerOpenError` and `OverloadedError` (a guard or the
 *   server refused for overload; retrying is the storm itself, principle 4:
 *   fail fast), `ValidationError` (the same load gives the same bad value),
 *   `DeadlineExceededError` (nobody waits for the answer) and aborts (the
 *   caller's signal fired, or `AbortedError`): classified by class or by
 *   `code`. `retryOn` narrows further.
 * - **Full jitter**: the wait before retry n is uniform in
 *   `[0, min(maxDelay, baseDelay · 2^(n−1)))`. Clients that failed together
 *   (a whole fleet behind one dependency) spread their retries over the whole
 *   interval rather than coming back together in a band. This differs from
 *   {@link Backoff}, whose bounded jitter keeps a lower bound on each delay: a
 *   cache key's error backoff needs that bound to promise few loads per key,
 *   whereas here the budget bounds the count and the spread is what matters.
 *   It is computed here rather than added to `Backoff` so that class keeps one meaning.
 * - **Deadlines**: no attempt starts that cannot finish before the caller's
 *   deadline (`context.deadline`, or one carried by the signal from a
 *   `DeadlineGuard`): if the retry would start after it, or a whole
 *   `attemptTimeout` (or `expectedDuration`) would cross it, the call fails
 *   with its last error. Each attempt's signal aborts at the deadline.
 * - **Retry after**: an error with a numeric `retryAfterMs` (a server's
 *   `Retry-After`, a breaker's next probe) is waited for at least that long,
 *   still never past the deadline.
 * - The backoff wait ends at once, with `AbortedError`, when the caller aborts,
 *   and leaves no timer behind.
 *
 * **Abandoned attempts.** An attempt ends for the caller at its
 * `attemptTimeout` or the deadline (or when the caller's signal aborts), at
 * that instant, whatever the task does: its signal is aborted, and a task
 * that ignores it (many drivers do) can no longer hold the caller past the
 * limit the caller set (issue 11: a 2.8 s `attemptTimeout` answered at
 * 3.0–3.1 s). The task's later answer or failure is swallowed, never returned,
 * not even to a later attempt of the same call. Such an attempt is counted
 * (`abandoned` event, {@link stats}) until its task settles.
 * A retry that follows it may run beside it at the dependency; it is drawn
 * from the budget like every retry, no exemption and no extra charge. Why: the
 * budget bounds the attempts a dependency receives (at most `(1 + ratio) ×
 * requests + floor` per window) and that bound holds whether or not they
 * overlap; refusing to retry until the abandoned task settles would hand the
 * call's fate to the task's driver (the wait this rule removes), and charging
 * more would make the bound depend on which drivers honour their signal.
 * What overlaps is bounded too: one call has at most `maxAttempts` tasks
 * running. A task that honours its signal settles moments after its abort, so
 * with such tasks attempts do not overlap.
 *
 * Without `attemptTimeout` and without a deadline, the attempt is the task
 * itself, on the caller's own signal: the success path costs no timer and no
 * allocation, and a caller who must not wait on a task that ignores an abort
 * gives the call a deadline.
 */
export class Retry implements Reporting {
  /** @internal */
  readonly [REPORTS] = true as const;
  readonly maxAttempts: number;
  readonly baseDelay: number;
  readonly maxDelay: number;
  readonly attemptTimeout: number | undefined;
  readonly expectedDuration: number | undefined;
  readonly budget: RetryBudget;
  private readonly retryOn: ((error: unknown, context: GuardContext) => boolean) | undefined;
  private readonly clock: Clock;
  private readonly events: Events<RetryEvents>;
  private calls = 0;
  private retries = 0;
  private budgetRefusals = 0;
  private abandonedTotal = 0;
  private abandonedRunning = 0;

  constructor(retryOptions?: RetryOptions) {
    const options = optionsObject('Retry options', retryOptions);
    this.events = new Events<RetryEvents>(optionalFunction('onListenerError', options.onListenerError));
    this.maxAttempts = integer('maxAttempts', or(options.maxAttempts, 3), 1);
    this.baseDelay = duration('baseDelay', or(options.baseDelay, 100), { timer: true });
    this.maxDelay = duration('maxDelay', or(options.maxDelay, 10_000), { timer: true });
    ordered('baseDelay', this.baseDelay, 'maxDelay', this.maxDelay);
    this.attemptTimeout = options.attemptTimeout === undefined ? undefined : duration('attemptTimeout', options.attemptTimeout, { positive: true, timer: true });
    this.expectedDuration = options.expectedDuration === undefined ? undefined : duration('expectedDuration', options.expectedDuration);
    optionalFunction('retryOn', options.retryOn);
    if (options.budget !== undefined && !isInstance(options.budget, RetryBudget)) throw new ConfigError('budget must be a RetryBudget');
    this.retryOn = options.retryOn;
    this.clock = clockOption('clock', options.clock);
    this.budget = options.budget ?? new RetryBudget({ clock: this.clock });
  }

  /** Subscribes to an event; returns a function that unsubscribes. */
  on<K extends keyof RetryEvents>(event: K, listener: RetryEvents[K]): () => void {
    return this.events.on(event, listener);
  }

  off<K extends keyof RetryEvents>(event: K, listener: RetryEvents[K]): void {
    this.events.off(event, listener);
  }

  /** Calls, retries, budget refusals and abandoned attempts so far, and how many of those tasks still run (see {@link RetryStats}). */
  stats(): RetryStats {
    return { calls: this.calls, retries: this.retries, budgetRefusals: this.budgetRefusals, abandoned: this.abandonedTotal, abandonedRunning: this.abandonedRunning };
  }

  /** Runs `fn` with retries, outside any cache. */
  execute<T>(fn: (signal: AbortSignal) => Promise<T>, options?: CallOptions): Promise<T> {
    return guarded(this, fn, options);
  }

  /** The wait before retry `n` (n ≥ 1 failures so far), full jitter: uniform in [0, min(maxDelay, baseDelay · 2^(n−1))). */
  delay(failures: number): number {
    const ceiling = Math.min(this.maxDelay, this.baseDelay * 2 ** Math.min(failures - 1, 1024));
    return this.clock.random() * ceiling;
  }

  run<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
    return this.runReporting(task, context, undefined);
  }

  /**
   * `run`, telling `report` the call's final outcome (after every retry) from
   * inside the reaction that settles the returned promise: `pipeline`'s gates
   * let go through it, with no reaction of their own (see `Reporting`).
   *
   * @internal
   */
  runReporting<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext, report: Report | undefined): Promise<T> {
    if (typeof task !== 'function') return refused(report, notATask('Retry', task));
    const { signal, key } = context;
    const deadline = effectiveDeadline(context);
    this.calls++;
    this.budget.recordRequest();
    if (signal.aborted) return refused(report, new AbortedError(`call for key "${key}" aborted`, signal.reason));
    if (this.tooLate(deadline, this.expectedDuration ?? 0)) return refused(report, new DeadlineExceededError(`no time left before the deadline of key "${key}" for an attempt`));
    // The first attempt starts without an async frame, and a success goes
    // straight back: the loop below is paid for only by a call that failed.
    const first = this.attempt(task, context, deadline, 1);
    if (report === undefined) return first.then(undefined, (error: unknown) => this.retryAfter(task, context, deadline, error));
    const succeeded = (value: T): T => {
      report(true, undefined);
      return value;
    };
    return first.then(succeeded, (error: unknown) =>
      this.retryAfter(task, context, deadline, error).then(succeeded, (last: unknown) => {
        report(false, last);
        throw last;
      }),
    );
  }

  /** True when an attempt that needs `need` ms cannot finish before `deadline`. */
  private tooLate(deadline: number | undefined, need: number): boolean {
    if (deadline === undefined) return false;
    const now = this.clock.now();
    return now >= deadline || now + need > deadline;
  }

  /** Attempt 1 failed with `error`: retry while the rules, the deadline and the budget allow; else reject with the last error. */
  private async retryAfter<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext, deadline: number | undefined, error: unknown): Promise<T> {
    const { signal, key } = context;
    let lastError = error;
    for (let attempt = 1; ; attempt++) {
      // Attempt `attempt` failed with lastError.
      if (signal.aborted || !this.retryable(lastError, context) || attempt >= this.maxAttempts) throw lastError;
      const retryAfter = retryAfterOf(lastError);
      if (retryAfter !== undefined && retryAfter > this.maxDelay) throw lastError;
      const delay = Math.max(this.delay(attempt), retryAfter ?? 0);
      const nextNeed = this.expectedDuration ?? this.attemptTimeout ?? 0;
      const start = this.clock.now() + delay;
      if (deadline !== undefined && (start >= deadline || start + nextNeed > deadline)) throw lastError;
      // Also when the attempt that failed was abandoned and its task still runs:
      // the budget bounds the attempts the dependency gets, overlapping or not.
      if (!this.budget.tryRetry()) {
        this.budgetRefusals++;
        if (this.events.has('budgetExhausted')) this.events.emit('budgetExhausted', { key, attempt, error: lastError });
        throw lastError;
      }
      if (this.events.has('retry')) this.events.emit('retry', { key, attempt: attempt + 1, delay, error: lastError });
      if (delay > 0) {
        await this.sleep(delay, context);
      }
      if (signal.aborted) throw new AbortedError(`call for key "${key}" aborted`, signal.reason);
      if (this.tooLate(deadline, nextNeed)) throw lastError;
      this.retries++;
      try {
        return await this.attempt(task, context, deadline, attempt + 1);
      } catch (e) {
        lastError = e;
      }
    }
  }

  /**
   * Waits `ms`, or rejects with `AbortedError` the moment the caller aborts,
   * cancelling the timer. (Like `sleep` from the clock module, but through
   * {@link onAbort}, so thousands of calls backing off on one shared signal do
   * not pile listeners onto it.)
   */
  private sleep(ms: number, context: GuardContext): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const { signal } = context;
      // A `retry` listener may have aborted it.
      if (signal.aborted) {
        reject(new AbortedError(`retry of key "${context.key}" aborted during backoff`, signal.reason));
        return;
      }
      const unsubscribe = onAbort(signal, () => {
        timer.cancel();
        reject(new AbortedError(`retry of key "${context.key}" aborted during backoff`, signal.reason));
      });
      const timer = this.clock.setTimer(() => {
        unsubscribe();
        resolve();
      }, Math.min(ms, MAX_TIMER_MS));
    });
  }

  private retryable(error: unknown, context: GuardContext): boolean {
    if (isNeverRetried(error)) return false;
    if (this.retryOn === undefined) return true;
    try {
      return this.retryOn(error, context) === true;
    } catch {
      return false;
    }
  }

  /**
   * One attempt, its signal aborted at the earlier of the deadline and
   * `attemptTimeout`; it ends for the caller then (or when the caller's signal
   * aborts), whether or not the task has settled. Settles exactly once: by the
   * task, or by {@link abandon} when the signal aborts first.
   */
  private attempt<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext, deadline: number | undefined, n: number): Promise<T> {
    if (this.attemptTimeout === undefined && deadline === undefined) return startTask(task, context.signal);
    const timeoutAt = this.attemptTimeout === undefined ? Infinity : this.clock.now() + this.attemptTimeout;
    const byDeadline = deadline !== undefined && deadline <= timeoutAt;
    const { key } = context;
    return runAbandonable(task, {
      clock: this.clock,
      parent: context.signal,
      at: Math.min(timeoutAt, deadline ?? Infinity),
      timeout: () => (byDeadline ? new DeadlineExceededError(`attempt for key "${key}" passed the deadline`) : new LoadTimeoutError(key, this.attemptTimeout ?? 0, 'load')),
      // The caller's abort (a hard timeout, a deadline signal, a user who left).
      aborted: (reason) => new AbortedError(`attempt for key "${key}" aborted`, reason),
      onAbandon: (reason) => this.abandon(key, n, reason),
      onLateSettle: this.abandonedSettled,
    });
  }

  private readonly abandonedSettled = (): void => {
    this.abandonedRunning--;
    assert(this.abandonedRunning >= 0, 'an abandoned task settles once');
  };

  private abandon(key: string, attempt: number, reason: unknown): void {
    this.abandonedTotal++;
    this.abandonedRunning++;
    if (this.events.has('abandoned')) this.events.emit('abandoned', { key, attempt, reason });
  }
}

/** A call refused before its first attempt: reported, then rejected. */
function refused(report: Report | undefined, error: unknown): Promise<never> {
  report?.(false, error);
  return Promise.reject(error);
}
