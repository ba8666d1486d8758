import { boolean, hasMethods, isInstance } from '../config.js';
import { ArgumentError, ConfigError, describe } from '../errors.js';
import { checkPriority, type Priority } from './priority.js';

/**
 * What a guard knows about one call it is asked to run.
 */
export interface GuardContext {
  /** What is being called, e.g. the cache key. Keyed guards (per shard, per upstream) partition on it. */
  readonly key: string;
  /** Aborts when the call is abandoned (caller's abort, deadline, hard timeout). A guard must honour it. */
  readonly signal: AbortSignal;
  /**
   * False when a caller already has a value to serve (a background refresh):
   * the guard should refuse at once rather than queue, because waiting buys
   * nothing and holds a slot that a caller with nothing to serve needs.
   */
  readonly wait: boolean;
  /** How important the call is; `normal` when absent. */
  readonly priority?: Priority | undefined;
  /** Absolute instant on the guard's clock after which the call is worthless; none when absent. */
  readonly deadline?: number | undefined;
}

/**
 * The seam between a caller and the protection of a dependency. Every load the
 * cache makes goes through one `Guard`, so a single bound holds across all
 * keys: per-key coalescing alone does not protect a database from a cold cache
 * over many keys. Guards compose with {@link pipeline}: throttle, limiter,
 * breaker, retry, each one concept in its own file.
 *
 * A guard refuses work by rejecting with a `DamperError` (`OverloadedError`,
 * `BreakerOpenError`, …); the cache treats that as a failed load: stale is
 * served, the key backs off, nothing is evicted.
 */
export interface Guard {
  run<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T>;
}

/**
 * Starts `task` on `signal`, a synchronous throw turned into a rejection, so
 * a guard that answers its caller from the task's settlement has one path for
 * both and a throwing task cannot leave the caller's promise unsettled.
 *
 * @internal
 */
export function startTask<T>(task: (signal: AbortSignal) => Promise<T>, signal: AbortSignal): Promise<T> {
  try {
    const p = task(signal);
    // A task that returns a plain value (or another library's thenable) is answered as a promise of it.
    return p instanceof Promise ? p : Promise.resolve(p);
  } catch (error) {
    return Promise.reject(error);
  }
}

/** Options for calling a guard around any async function (see {@link guarded}). */
export interface CallOptions {
  key?: string;
  signal?: AbortSignal;
  priority?: Priority;
  deadline?: number;
  wait?: boolean;
}

/**
 * The signal of a call that cannot be abandoned (a call made without one).
 * Guards test for it by identity to take their cheapest path: an outcome
 * handler shared by all such calls, since there is no abort to tell apart.
 *
 * @internal
 */
export const NEVER_ABORTS: AbortSignal = new AbortController().signal;

/**
 * Builds a full context from the options of a standalone call, checked: a
 * `deadline: "soon"` or a `signal: {}` is the caller's slip, refused with a
 * {@link ConfigError} (as every option is) before any guard counts the call.
 */
export function callContext(options: CallOptions = {}): GuardContext {
  if (typeof options !== 'object' || options === null) throw new ConfigError(`call options must be an object, got ${describe(options)}`);
  let read: { readonly [K in keyof CallOptions]: unknown };
  try {
    read = { key: options.key, signal: options.signal, wait: options.wait, priority: options.priority, deadline: options.deadline };
  } catch (error) {
    throw new ConfigError(`call options cannot be read: ${describe(error)}`);
  }
  const { key = '', signal = NEVER_ABORTS, wait = true, priority, deadline } = read;
  if (typeof key !== 'string') throw new ConfigError(`key must be a string, got ${typeof key}`);
  if (!isInstance(signal, AbortSignal)) throw new ConfigError('signal must be an AbortSignal');
  if (deadline !== undefined && (typeof deadline !== 'number' || Number.isNaN(deadline))) throw new ConfigError(`deadline must be an instant (a number of ms on the guard's clock), got ${describe(deadline)}`);
  return { key, signal, wait: boolean('wait', wait), priority: checkPriority('priority', priority as Priority | undefined), deadline };
}

/**
 * Runs `fn` through `guard` outside the cache: `guarded(breaker, (signal) => fetch(url, { signal }))`.
 * Bad call options reject (they never throw), as every guard's `execute` does through this.
 */
export function guarded<T>(guard: Guard, fn: (signal: AbortSignal) => Promise<T>, options?: CallOptions): Promise<T> {
  let context: GuardContext;
  try {
    context = callContext(options);
  } catch (error) {
    return Promise.reject(error);
  }
  return guard.run(fn, context);
}

/**
 * Composes guards, outermost first: `pipeline(throttle, limiter, breaker, retry)`
 * runs the task inside retry, inside the breaker, inside the limiter, inside the
 * throttle. Like cockatiel's `wrap`: each policy stays one concept, the order is
 * the caller's to state.
 */
export function pipeline(...guards: Guard[]): Guard {
  guards.forEach((g, i) => checkGuard(`pipeline: guard ${i + 1}`, g));
  return {
    run<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
      if (typeof task !== 'function') return Promise.reject(notATask('pipeline', task));
      let inner = task;
      for (let i = guards.length - 1; i >= 0; i--) {
        const guard = guards[i]!;
        const next = inner;
        inner = (signal) => guard.run(next, signal === context.signal ? context : { ...context, signal });
      }
      return inner(context.signal);
    },
  };
}

/**
 * Checks that `value` is a {@link Guard} (an object with a `run` function),
 * where one is given: a `guard: 42` found only at the first load would be
 * counted as the dependency failing.
 */
export function checkGuard(name: string, value: unknown): Guard {
  if (!hasMethods(value, ['run'])) throw new ConfigError(`${name} must be a Guard (an object with a run(task, context) function)`);
  return value as Guard;
}

/**
 * The error for a task that is not a function (`breaker.execute(42)`): a
 * programming error, not a failure of the dependency. Every guard checks
 * before it counts anything, so such a call trips no breaker, spends no
 * retry budget, takes no token and ejects no upstream: it is refused with
 * this, and no state changes.
 */
export function notATask(guard: string, task: unknown): ArgumentError {
  return new ArgumentError(`${guard}: the task must be a function (signal) => Promise, got ${task === null ? 'null' : typeof task}`);
}
