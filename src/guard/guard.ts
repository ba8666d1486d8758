import { boolean, hasMethods, isInstance } from '../config.js';
import { ArgumentError, ConfigError, describe } from '../errors.js';
import { NEVER_ABORTS } from './abort.js';
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

export { NEVER_ABORTS } from './abort.js';

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

/** The context of a call made without options (the default key, a signal that never aborts): one object for all of them. @internal */
export const NO_OPTIONS: GuardContext = Object.freeze(callContext());

/**
 * Runs `fn` through `guard` outside the cache: `guarded(breaker, (signal) => fetch(url, { signal }))`.
 * Bad call options reject (they never throw), as every guard's `execute` does through this.
 */
export function guarded<T>(guard: Guard, fn: (signal: AbortSignal) => Promise<T>, options?: CallOptions): Promise<T> {
  let context: GuardContext;
  try {
    // A call without options shares one context: nothing to check, nothing to allocate.
    context = options === undefined ? NO_OPTIONS : callContext(options);
  } catch (error) {
    return Promise.reject(error);
  }
  return guard.run(fn, context);
}

/**
 * A guard that can admit a call synchronously in the common case (a closed
 * breaker, a limiter with a free slot, a throttle that refused nothing),
 * with no promise of its own: `pipeline` then admits a call through all its
 * leading gates at once and observes the task's promise once for all of
 * them, where nested `run`s cost each guard a closure, a reaction and a
 * promise per call. A gate's `run` is itself `enter`, the task, `leave`, so
 * the two paths are one logic.
 *
 * @internal
 */
export interface Gate extends Guard {
  /** Brands a gate, so a user's guard with methods of these names is never taken for one. */
  readonly [GATE]: true;
  /**
   * Admits the call now and returns its token (≥ 0) for `leave`, or
   * {@link NOT_NOW}, with nothing changed, when it cannot be admitted at once
   * (it may have to wait, be refused, or need more than a token to observe):
   * `run` then decides, exactly as it always would.
   */
  enter(context: GuardContext): number;
  /** An admitted call ended: `ok` with its value, or not with `error`. Never throws. */
  leave(token: number, context: GuardContext, ok: boolean, error: unknown): void;
}

/** How a {@link Reporting} guard tells the final outcome of a call: `ok`, or not with `error`. Never throws. @internal */
export type Report = (ok: boolean, error: unknown) => void;

/**
 * A guard that tells a call's final outcome from inside the reaction that
 * settles its own promise (`Retry`, whose promise is one derived from the
 * attempts anyway): the gates of a `pipeline` in front of it let go through
 * that report, and the call pays for one reaction, not two.
 *
 * @internal
 */
export interface Reporting extends Guard {
  readonly [REPORTS]: true;
  runReporting<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext, report: Report | undefined): Promise<T>;
}

/** The brand of a {@link Reporting} guard. @internal */
export const REPORTS: unique symbol = Symbol('damper.reports');

function isReporting(guard: Guard | undefined): guard is Reporting {
  return guard !== undefined && (guard as Partial<Reporting>)[REPORTS] === true;
}

/** The brand of a {@link Gate}. @internal */
export const GATE: unique symbol = Symbol('damper.gate');
/** What {@link Gate.enter} returns when the call cannot be admitted at once. @internal */
export const NOT_NOW = -1;

/**
 * Enters `gates` in order while each admits the call at once, their tokens
 * put in `tokens`; returns how many entered. The caller runs the rest with
 * {@link runNested} from there, observes the task's promise itself, and lets
 * the entered ones go with {@link leaveGates}: `pipeline` does, and so does
 * `Dependency`'s route, in the one reaction it has anyway.
 *
 * @internal
 */
export function enterGates(gates: readonly Gate[], context: GuardContext, tokens: number[]): number {
  let entered = 0;
  while (entered < gates.length) {
    const token = gates[entered]!.enter(context);
    if (token === NOT_NOW) break;
    tokens[entered++] = token;
  }
  return entered;
}

/** Lets go of the gates a call entered (one token each), innermost first, as nested guards' reactions would run. @internal */
export function leaveGates(gates: readonly Gate[], tokens: readonly number[], entered: number, context: GuardContext, ok: boolean, error: unknown): void {
  for (let i = entered - 1; i >= 0; i--) gates[i]!.leave(tokens[i]!, context, ok, error);
}

/**
 * Runs `guards[from..]` nested around `task`, each inside the one before (the
 * innermost is given `task` itself); with none left, the task alone.
 *
 * @internal
 */
export function runNested<T>(guards: readonly Guard[], from: number, task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
  if (from === guards.length) return startTask(task, context.signal);
  let inner = task;
  for (let i = guards.length - 1; i > from; i--) {
    const guard = guards[i]!;
    const next = inner;
    inner = (signal) => guard.run(next, signal === context.signal ? context : { ...context, signal });
  }
  return guards[from]!.run(inner, context);
}

function isGate(guard: Guard): guard is Gate {
  return (guard as Partial<Gate>)[GATE] === true;
}

/**
 * Composes guards, outermost first: `pipeline(throttle, limiter, breaker, retry)`
 * runs the task inside retry, inside the breaker, inside the limiter, inside the
 * throttle. Like cockatiel's `wrap`: each policy stays one concept, the order is
 * the caller's to state.
 */
export function pipeline(...guards: Guard[]): Guard {
  guards.forEach((g, i) => checkGuard(`pipeline: guard ${i + 1}`, g));
  // The leading gates (see Gate): admitted at once when they can, observed once.
  let leading = 0;
  while (leading < guards.length && isGate(guards[leading]!)) leading++;
  const gates = guards.slice(0, leading) as Gate[];
  return {
    run<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
      if (typeof task !== 'function') return Promise.reject(notATask('pipeline', task));
      if (leading === 0) return runNested(guards, 0, task, context);
      const tokens = new Array<number>(leading);
      const entered = enterGates(gates, context, tokens);
      if (entered === 0) return runNested(guards, 0, task, context);
      const next = guards[entered];
      if (entered === leading && isReporting(next)) {
        // The guard after the gates reports the outcome from its own reaction: the gates let go there.
        const inner = entered + 1 === guards.length ? task : (signal: AbortSignal) => runNested(guards, entered + 1, task, signal === context.signal ? context : { ...context, signal });
        return next.runReporting(inner, context, (ok, error) => leaveGates(gates, tokens, entered, context, ok, error));
      }
      let rest: Promise<T>;
      try {
        rest = runNested(guards, entered, task, context);
      } catch (error) {
        // A guard of the user's that threw instead of rejecting: the gates it passed still let go.
        leaveGates(gates, tokens, entered, context, false, error);
        return Promise.reject(error);
      }
      // Registered before the caller's reaction: the gates have let go when the caller resumes.
      rest.then(
        () => leaveGates(gates, tokens, entered, context, true, undefined),
        (error: unknown) => leaveGates(gates, tokens, entered, context, false, error),
      );
      return rest;
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
