import { type LoadTimeoutError } from '../errors.js';
import { classify } from '../guard/classify.js';
import { type FlightKind } from './flight.js';

/**
 * The one decision behind "a refusal by the origin budget is not the key's
 * fault". A load the cache's own guard refused (`classify` says `shed`:
 * an `OverloadedError`, or code `OVERLOADED` from a second copy of damper;
 * the budget was full, the call was shed) says nothing about the key or its
 * origin: the budget is a queue for loads, not an outage. So the cache never
 * treats it as the key failing. What each place does with that:
 *
 * - a warm-up's refusal is not recorded at all (the warm-up takes only spare
 *   capacity and tries the key again at a later slot: `warm.ts`);
 * - a refused refresh of a key that has a value retries within
 *   `REFUSED_RETRY_MAX_MS`, not on the key's growing backoff (`local-tier.ts`);
 * - a lease holder refused by its own budget leaves no failure marker in the
 *   shared tier: the lease goes back for another process (`cluster-flight.ts`).
 */
export function refusedByBudget(error: unknown): boolean {
  return classify(error) === 'shed' || deadlineBeforeLoad(error) || (typeof error === 'object' && error !== null && unreached.has(error));
}

/** Errors of loads whose time ran out before the guard let them reach the origin (`unreachedRefusal`). */
const unreached = new WeakSet<object>();

/**
 * What a load the guard rejected before calling the loader fails with, and
 * whether it is the budget's refusal. A load whose time ran out while it
 * waited in the guard's queue (the cache's load timeout, `expired`, or a
 * deadline the guard applied, `deadlineBeforeLoad`) never reached the
 * origin: it is refused by the budget, as an `OverloadedError` from the same
 * queue is, and its error (the load timeout's, as before) is marked so. Any
 * other rejection (an open breaker, the guard's own error) is as it was.
 */
export function unreachedRefusal(error: unknown, expired: LoadTimeoutError | undefined): unknown {
  if (expired === undefined && !deadlineBeforeLoad(error)) return error;
  const refusal = expired ?? (error as object);
  unreached.add(refusal);
  return refusal;
}

/**
 * A deadline that passed before the guard let the load start (it waited in
 * the budget's queue for its whole load timeout: a `RateLimiter` whose
 * `queueTimeout` is longer than the cache's `loadTimeout`). The load never
 * reached the origin: the budget refused it as surely as an
 * `OverloadedError` from the same queue. Held against the key, it backed the
 * key off for up to 30 s (the lab's discord-2019 served stale settings
 * 94–141 s past the nodes' recovery). Read by code and `phase`, as
 * `classify` reads errors, so a second copy of damper's error counts alike.
 */
function deadlineBeforeLoad(error: unknown): boolean {
  try {
    const e = error as { code?: unknown; phase?: unknown } | null;
    return typeof e === 'object' && e !== null && e.code === 'DEADLINE_EXCEEDED' && e.phase === 'admission';
  } catch {
    return false;
  }
}

/** Whether a failed flight's error is recorded against its key: all are, but a warm-up's refusal. */
export function countsAgainstKey(kind: FlightKind, error: unknown): boolean {
  return !(kind === 'warm' && refusedByBudget(error));
}
