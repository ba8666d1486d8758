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
  return classify(error) === 'shed';
}

/** Whether a failed flight's error is recorded against its key: all are, but a warm-up's refusal. */
export function countsAgainstKey(kind: FlightKind, error: unknown): boolean {
  return !(kind === 'warm' && refusedByBudget(error));
}
