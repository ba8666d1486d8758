import { AbortedError, BreakerOpenError, DeadlineExceededError, LoadTimeoutError, OverloadedError, ValidationError } from '../errors.js';

/**
 * How the guards read an error they did not raise. They check the class and
 * also the stable `code` (every damper error carries one: docs/design.md,
 * "The base: errors, options, events"), so an error from a second copy of
 * damper in the dependency tree, or a user's own error that sets
 * `code: 'OVERLOADED'`, is classified the same way.
 *
 * @internal
 */

/** The `code` property of an error, when it is a string. */
export function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/** The call was abandoned by its caller: `AbortedError`, or a DOM `AbortError`. */
export function isAbort(error: unknown): boolean {
  if (error instanceof AbortedError || errorCode(error) === 'ABORTED') return true;
  return typeof error === 'object' && error !== null && (error as { name?: unknown }).name === 'AbortError';
}

/** damper's own refusals: an `OverloadedError` or `BreakerOpenError` (by class or by code). */
export function isRefusal(error: unknown): boolean {
  if (error instanceof OverloadedError || error instanceof BreakerOpenError) return true;
  const code = errorCode(error);
  return code === 'OVERLOADED' || code === 'BREAKER_OPEN';
}

/**
 * The dependency, or a guard in front of it, refused the work because it is
 * overloaded or shut: damper's refusals, gRPC-style codes `UNAVAILABLE` and
 * `RESOURCE_EXHAUSTED`, and HTTP 429 / 503 in a numeric `status` or `statusCode`.
 */
export function isOverloadSignal(error: unknown): boolean {
  if (isRefusal(error)) return true;
  const code = errorCode(error);
  if (code === 'UNAVAILABLE' || code === 'RESOURCE_EXHAUSTED') return true;
  if (typeof error !== 'object' || error === null) return false;
  const { status, statusCode } = error as { status?: unknown; statusCode?: unknown };
  return status === 429 || status === 503 || statusCode === 429 || statusCode === 503;
}

/**
 * A load got no answer in its time: a `LoadTimeoutError` of phase `load` (a
 * `Retry`'s `attemptTimeout`, the cache's hard timeout), or code `LOAD_TIMEOUT`
 * from another copy of damper. Phase `wait` is a caller who stopped waiting on
 * a shared load that goes on: not an outcome of the load.
 */
export function isLoadTimeout(error: unknown): boolean {
  if (error instanceof LoadTimeoutError) return error.phase === 'load';
  return errorCode(error) === 'LOAD_TIMEOUT';
}

/**
 * Errors no retry may repeat: overload and breaker refusals (retrying them is
 * the loop itself), invalid values (the same load returns the same value),
 * a passed deadline (the caller has gone) and aborts.
 */
export function isNeverRetried(error: unknown): boolean {
  if (isRefusal(error) || isAbort(error)) return true;
  if (error instanceof ValidationError || error instanceof DeadlineExceededError) return true;
  const code = errorCode(error);
  return code === 'VALIDATION' || code === 'DEADLINE_EXCEEDED';
}

/** A server's "retry after" hint in ms: a finite, non-negative numeric `retryAfterMs` property. */
export function retryAfterOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const v = (error as { retryAfterMs?: unknown }).retryAfterMs;
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;
}
