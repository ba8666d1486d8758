import { type Clock } from '../time/clock.js';
import { onAbort } from './abort.js';
import { scopedSignal } from './deadline.js';
import { startTask } from './guard.js';

/** How a call run with {@link runAbandonable} is bounded, and what it says when it is left behind. */
export interface AbandonOptions {
  readonly clock: Clock;
  /** The caller's signal: when it aborts, the call is walked away from. */
  readonly parent: AbortSignal;
  /** The instant (on `clock`) the call is walked away from, if it has not settled; none when absent. */
  readonly at: number | undefined;
  /** The error when `at` passes first. Also the reason the task's signal aborts with. */
  readonly timeout: () => unknown;
  /** The error when the caller's signal aborts first, from its reason. */
  readonly aborted: (reason: unknown) => unknown;
  /** What a failure of the task itself becomes (a value that is no `Error`, wrapped); as is when absent. */
  readonly failure?: ((error: unknown) => unknown) | undefined;
  /** The call was walked away from with `error` (`timedOut`: by `at`, else by the caller); runs before the returned promise rejects. */
  readonly onAbandon?: ((error: unknown, timedOut: boolean) => void) | undefined;
  /** A task that was walked away from has settled after all. */
  readonly onLateSettle?: (() => void) | undefined;
}

const NOOP = (): void => {};

/**
 * Runs `task` on a signal that aborts with `parent` or at `at`, and settles
 * with the task, or with the right error the moment that signal aborts,
 * whether or not the task heeds it: the one race, in damper, of a task against
 * its time limit and its caller. Retry's attempts, `DeadlineGuard`, the
 * breaker's half-open probe and the cache's loader all run through it, so each
 * walks away from a task that ignores its signal in the same way: a call
 * nobody waits for must not hold a slot, a probe or a caller (the Missourian
 * 2010 servers kept working for readers who had left; resilience4j #935, a
 * probe that never settled held a breaker half-open).
 *
 * The signal is made by {@link scopedSignal}, so it costs nothing when the
 * parent already stands for an earlier limit; the parent is then watched
 * here. A parent already aborted, or an `at` already past, rejects without
 * calling the task. Settles exactly once; a task that settles after it was
 * walked away from changes nothing but `onLateSettle`.
 *
 * @internal
 */
export function runAbandonable<T>(task: (signal: AbortSignal) => Promise<T>, o: AbandonOptions): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let abandoned = false;
    const walkAway = (): void => {
      if (settled) return;
      settled = true;
      abandoned = true;
      unsubscribe();
      const timedOut = scoped.timedOut;
      const error = timedOut ? scoped.signal.reason : o.aborted(o.parent.reason);
      o.onAbandon?.(error, timedOut);
      reject(error);
    };
    const scoped = scopedSignal(o.clock, o.parent, o.at, o.timeout, walkAway);
    if (scoped.signal.aborted) {
      // Aborted before it began: the parent had, or the limit had passed.
      settled = true;
      reject(scoped.timedOut ? scoped.signal.reason : o.aborted(o.parent.reason));
      return;
    }
    // A parent that stands for the limit is used as is (see scopedSignal), and never calls walkAway: watch it here.
    let unsubscribe = scoped.signal === o.parent ? onAbort(o.parent, walkAway) : NOOP;
    const finish = (): boolean => {
      scoped.dispose();
      if (abandoned) o.onLateSettle?.();
      if (settled) return false;
      settled = true;
      unsubscribe();
      unsubscribe = NOOP;
      return true;
    };
    startTask(task, scoped.signal).then(
      (value) => {
        if (finish()) resolve(value);
      },
      (error: unknown) => {
        if (finish()) reject(o.failure === undefined ? error : o.failure(error));
      },
    );
  });
}
