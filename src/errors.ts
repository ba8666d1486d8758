/**
 * Every error damper raises extends {@link DamperError} and carries a stable
 * `code`, so callers branch on `err.code` (or `instanceof`) rather than on
 * message text, which may be reworded between versions.
 */
export class DamperError extends Error {
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** An option or constructor argument is out of range or of the wrong type. Thrown at construction, before anything is stored. */
export class ConfigError extends DamperError {
  constructor(message: string) {
    super('CONFIG', message);
  }
}

/** A call received a bad argument (empty key, loader that is not a function, …). Nothing stored was touched. */
export class ArgumentError extends DamperError {
  constructor(message: string) {
    super('INVALID_ARGUMENT', message);
  }
}

/**
 * A loaded or `set` value failed the cache's `validate`. It was not stored and
 * did not replace the last known good value (the Facebook 2010 trigger).
 */
export class ValidationError extends DamperError {
  readonly key: string;
  readonly reason: string;
  /** Standard Schema issues when the validator provided them. */
  readonly issues: readonly unknown[] | undefined;

  constructor(key: string, reason: string, issues?: readonly unknown[]) {
    super('VALIDATION', `invalid value for key "${key}": ${reason}`);
    this.key = key;
    this.reason = reason;
    this.issues = issues;
  }
}

/**
 * A time limit passed. `phase: 'load'` means the loader was aborted and the
 * attempt counts as a failure; `phase: 'wait'` means only this caller stopped
 * waiting, the shared load goes on for the others.
 */
export class LoadTimeoutError extends DamperError {
  readonly key: string;
  readonly ms: number;
  readonly phase: 'load' | 'wait';

  constructor(key: string, ms: number, phase: 'load' | 'wait') {
    super(
      'LOAD_TIMEOUT',
      phase === 'load'
        ? `loading key "${key}" took more than ${ms} ms and was aborted`
        : `gave up waiting ${ms} ms for key "${key}" (the shared load continues)`,
    );
    this.key = key;
    this.ms = ms;
    this.phase = phase;
  }
}

/**
 * Work was refused because a limit on the dependency was reached (principle 3:
 * load on a dependency never exceeds a bound you can state). Retrying it at
 * once is exactly the loop damper exists to prevent.
 */
export class OverloadedError extends DamperError {
  constructor(message: string) {
    super('OVERLOADED', message);
  }
}

/**
 * A circuit breaker is open (or half-open with its probes taken): the call was
 * refused without reaching the dependency. Serving stale or failing fast is
 * the answer; retrying now is not (principle 4).
 */
export class BreakerOpenError extends DamperError {
  /** When the breaker will next admit a probe, ms from now, if known. */
  readonly retryAfterMs: number | undefined;

  constructor(message: string, retryAfterMs?: number) {
    super('BREAKER_OPEN', message);
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * The caller's deadline passed, or no attempt could finish before it.
 *
 * `phase` says where: `admission` when it passed before a guard let the call
 * through (while it waited in a limiter's or a rate limiter's queue, or on
 * arrival): the call never reached the dependency, so it says nothing about
 * it, and a cache does not hold it against the key (a refusal by its origin
 * budget, like an `OverloadedError`); `call` when it passed during the call.
 */
export class DeadlineExceededError extends DamperError {
  readonly phase: 'admission' | 'call';

  constructor(message: string, phase: 'admission' | 'call' = 'call') {
    super('DEADLINE_EXCEEDED', message);
    this.phase = phase;
  }
}

/**
 * The shared tier (Redis) could not be asked: a call timed out, failed, or its
 * breaker is open. Reads never surface it (damper serves from memory or loads
 * locally within the origin budget); `set` and `delete` reject with it after
 * changing this process's memory, because other processes were not told.
 */
export class SharedTierError extends DamperError {
  readonly operation: string;

  constructor(operation: string, cause: unknown) {
    super('SHARED_TIER', `shared tier ${operation} failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.operation = operation;
  }
}

/**
 * Another process's load of this key failed, and the key backs off across the
 * whole cluster until `retryAfterMs` passes: no process may load it before
 * then (principle 3). Raised only to callers that have no value to serve.
 */
export class LeaseBackoffError extends DamperError {
  readonly key: string;
  readonly retryAfterMs: number;
  readonly failures: number;

  constructor(key: string, retryAfterMs: number, failures: number) {
    super('LEASE_BACKOFF', `key "${key}" backs off for ${Math.ceil(retryAfterMs)} ms after ${failures} failed load(s) in the cluster`);
    this.key = key;
    this.retryAfterMs = retryAfterMs;
    this.failures = failures;
  }
}

/** The caller's own AbortSignal fired. Never counted against a dependency's health. */
export class AbortedError extends DamperError {
  constructor(message: string, reason: unknown) {
    super('ABORTED', message, { cause: reason });
  }
}

/**
 * A loader failed with something that is not an `Error` (a string, `null`, …),
 * or threw synchronously with one. The original value is kept in `cause`.
 */
export class LoaderError extends DamperError {
  readonly key: string;

  constructor(key: string, cause: unknown) {
    super('LOADER', `loader for key "${key}" failed with a non-Error value: ${describe(cause)}`, { cause });
    this.key = key;
  }
}

/**
 * `v instanceof Error`, for a value from outside (what a loader threw, a
 * signal's reason) that may be hostile: a revoked Proxy makes `instanceof`
 * throw, and a throw inside a rejection handler would leave the load
 * unsettled forever. Such a value is no Error.
 */
export function isError(v: unknown): v is Error {
  try {
    return v instanceof Error;
  } catch {
    return false;
  }
}

/** A value in words for a message, whatever it is: never throws, even for a revoked Proxy. */
export function describe(v: unknown): string {
  try {
    return typeof v === 'string' ? JSON.stringify(v) : String(v);
  } catch {
    try {
      return Object.prototype.toString.call(v);
    } catch {
      // A revoked Proxy refuses even that.
      return 'a value that cannot be described';
    }
  }
}

/**
 * A request header damper reads (a deadline, a priority) held bytes it cannot
 * take: the caller's slip, answered at the boundary (an HTTP 400) rather than
 * guessed at, because a deadline misread as "none" would let work outlive its
 * caller and one misread as "0" would drop work the caller still waits for.
 */
export class HeaderError extends DamperError {
  /** The header's name, lower case. */
  readonly header: string;

  constructor(header: string, message: string) {
    super('BAD_HEADER', `header ${header}: ${message}`);
    this.header = header;
  }
}

/**
 * An optional entry point (`damper/redis`, `damper/otel`, `damperFetch`) was
 * used without the package it runs on. Said in one line, with what to
 * install, rather than as a resolver's stack trace naming a file inside
 * damper: the package is an optional peer dependency, so npm did not install
 * it, and the user who chose the entry point is the one who must.
 */
export class MissingPeerError extends DamperError {
  /** The package to install, e.g. `ioredis`. */
  readonly peer: string;

  constructor(entry: string, peer: string, range: string, cause?: unknown) {
    super('MISSING_PEER', `${entry} needs the package ${peer} (${range}), which is not installed: npm install ${peer}`, { cause });
    this.peer = peer;
  }
}
