/**
 * What the outcome of a call to a dependency was, as every guard, the
 * balancer and the cache read it (see {@link classify}).
 *
 * - `success`: the call answered. {@link classify} never returns it (it reads
 *   errors); it is here for callers that record both kinds of outcome in one
 *   field.
 * - `failure`: the dependency failed: any error that is none of the below.
 * - `timeout`: the dependency did not answer in time, and the call was cut
 *   (`LoadTimeoutError` of phase `load`, code `LOAD_TIMEOUT`).
 * - `overloaded`: the dependency itself said it is overloaded or unavailable
 *   (codes `UNAVAILABLE`, `RESOURCE_EXHAUSTED`; a numeric `status` or
 *   `statusCode` of 429 or 503). It answered: this is its verdict on itself.
 * - `shed`: a limit in front of the dependency, in this process, refused the
 *   call (`OverloadedError`, code `OVERLOADED`). It never reached the dependency.
 * - `breaker-open`: a circuit breaker in this process refused the call
 *   (`BreakerOpenError`, code `BREAKER_OPEN`). It never reached the dependency.
 * - `aborted`: the caller abandoned the call (`AbortedError`, code `ABORTED`,
 *   or an error named `AbortError`, the DOM's and Node's).
 * - `invalid`: the dependency answered with a value that failed validation
 *   (`ValidationError`, code `VALIDATION`).
 * - `deadline`: the caller's deadline passed (`DeadlineExceededError`, code
 *   `DEADLINE_EXCEEDED`).
 *
 * `shed` and `breaker-open` are kept apart from `overloaded` because they say
 * opposite things: a local refusal says nothing of the dependency (counting it
 * against the dependency would trip a breaker on our own queue), while the
 * dependency's "too busy" is the very signal an adaptive throttle backs off on.
 */
export type Outcome = 'success' | 'failure' | 'timeout' | 'overloaded' | 'shed' | 'breaker-open' | 'aborted' | 'invalid' | 'deadline';

/** Outcomes named by a stable `code`: damper's own, and the gRPC-style codes of a dependency saying it is overloaded. */
const BY_CODE: ReadonlyMap<string, Outcome> = new Map<string, Outcome>([
  ['LOAD_TIMEOUT', 'timeout'],
  ['OVERLOADED', 'shed'],
  ['BREAKER_OPEN', 'breaker-open'],
  ['ABORTED', 'aborted'],
  ['VALIDATION', 'invalid'],
  ['DEADLINE_EXCEEDED', 'deadline'],
  ['UNAVAILABLE', 'overloaded'],
  ['RESOURCE_EXHAUSTED', 'overloaded'],
]);

/**
 * What a rejected call's outcome is, read from its error: the one judgement
 * every guard, the balancer and the cache ask, so that "does this count
 * against the dependency?" has one answer and an error a user's code raises
 * is retried and counted alike everywhere.
 *
 * Read by the error's stable `code` first (every damper error carries one),
 * so an error from a second copy of damper in the dependency tree, or a
 * user's own error with `code: 'OVERLOADED'`, is judged as damper's own (no
 * `instanceof`: a class is one copy's, a code is the contract). Then by
 * `name` (`AbortError`), then by an HTTP `status` or `statusCode` of 429 or
 * 503 (the dependency's own "too busy"). A `LOAD_TIMEOUT` whose
 * `phase` is `wait` is a caller that stopped waiting on a shared load that
 * goes on, not an outcome of the load: a `failure` of the call that waited.
 * Never throws: a value whose properties cannot be read (a revoked Proxy) is
 * a `failure`.
 *
 * Public so that a user's own guard or metric asks the question the library
 * asks and gets the same answer: a dashboard that counts `classify(error) ===
 * 'shed'` counts exactly the calls damper's breaker and balancer did not hold
 * against the dependency, and a guard of the user's can skip them alike.
 */
export function classify(error: unknown): Outcome {
  try {
    return byFields(error);
  } catch {
    return 'failure';
  }
}

function byCode(error: object, code: string | undefined): Outcome | undefined {
  const outcome = code === undefined ? undefined : BY_CODE.get(code);
  if (outcome === 'timeout' && (error as { phase?: unknown }).phase === 'wait') return 'failure';
  return outcome;
}

function byFields(error: unknown): Outcome {
  if (typeof error !== 'object' || error === null) return 'failure';
  const known = byCode(error, errorCode(error));
  if (known !== undefined) return known;
  if ((error as { name?: unknown }).name === 'AbortError') return 'aborted';
  const { status, statusCode } = error as { status?: unknown; statusCode?: unknown };
  return status === 429 || status === 503 || statusCode === 429 || statusCode === 503 ? 'overloaded' : 'failure';
}

/**
 * The outcome of a call that rejected with `error` while its signal was
 * `signal`. Once the signal has fired, what fired it is the cause, whatever
 * the task made of it: a load timeout (the cache's hard timeout, a `Retry`'s
 * `attemptTimeout`) is the dependency not answering in time and counts, or a
 * hanging database would never trip a breaker inside a cache; anything else
 * (the caller's abort, its deadline) is the caller leaving.
 *
 * @internal
 */
export function classifyCall(error: unknown, signal: AbortSignal): Outcome {
  if (!signal.aborted) return classify(error);
  return classify(signal.reason) === 'timeout' ? 'timeout' : 'aborted';
}

/**
 * Whether a call that rejected with `error` under `signal` reached the
 * dependency, so that its outcome may count for or against it: not when its
 * caller left, nor when a guard in this process refused it (a breaker, a
 * limiter, a balancer inside the one asking).
 *
 * @internal
 */
export function reachedDependency(error: unknown, signal: AbortSignal): boolean {
  const outcome = classifyCall(error, signal);
  return outcome !== 'aborted' && !isLocalRefusal(outcome);
}

/**
 * The error a call is judged by: once its signal fired, the reason it fired
 * (a `LoadTimeoutError`, say); what the task then rejected with is only the
 * echo of that abort.
 *
 * @internal
 */
export function causeOf(error: unknown, signal: AbortSignal): unknown {
  return signal.aborted ? signal.reason : error;
}

/** The `code` property of an error, when it is a string. @internal */
export function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/** The call was abandoned by its caller: `AbortedError`, or a DOM `AbortError`. @internal */
export function isAbort(error: unknown): boolean {
  return classify(error) === 'aborted';
}

/** A refusal by a guard in this process (shed or breaker open): it never reached the dependency. @internal */
export function isRefusal(error: unknown): boolean {
  return isLocalRefusal(classify(error));
}

/** Whether `outcome` is a guard in this process refusing the call. @internal */
export function isLocalRefusal(outcome: Outcome): boolean {
  return outcome === 'shed' || outcome === 'breaker-open';
}

/**
 * The work was refused because the dependency, or a guard in front of it, is
 * overloaded or shut: a local refusal, or the dependency's own `overloaded`.
 *
 * @internal
 */
export function isOverloadSignal(error: unknown): boolean {
  const outcome = classify(error);
  return outcome === 'overloaded' || isLocalRefusal(outcome);
}

/**
 * A load got no answer in its time: a `LoadTimeoutError` of phase `load` (a
 * `Retry`'s `attemptTimeout`, the cache's hard timeout), or code `LOAD_TIMEOUT`
 * from another copy of damper. Phase `wait` is a caller who stopped waiting on
 * a shared load that goes on: not an outcome of the load.
 *
 * @internal
 */
export function isLoadTimeout(error: unknown): boolean {
  return classify(error) === 'timeout';
}

/** Outcomes no retry may repeat (see {@link isNeverRetried}). */
const NEVER_RETRIED: ReadonlySet<Outcome> = new Set<Outcome>(['shed', 'breaker-open', 'aborted', 'invalid', 'deadline']);

/**
 * Errors no retry may repeat: overload and breaker refusals (retrying them is
 * the loop itself), invalid values (the same load returns the same value),
 * a passed deadline (the caller has gone) and aborts.
 *
 * @internal
 */
export function isNeverRetried(error: unknown): boolean {
  return NEVER_RETRIED.has(classify(error));
}

/** A server's "retry after" hint in ms: a finite, non-negative numeric `retryAfterMs` property. @internal */
export function retryAfterOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const v = (error as { retryAfterMs?: unknown }).retryAfterMs;
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;
}
