import type { StandardSchemaV1 } from '@standard-schema/spec';
import { hasMethods } from '../config.js';
import { ConfigError, describe, isError } from '../errors.js';
import { beforeAbort } from '../guard/abort.js';
import { classify } from '../guard/classify.js';
import { type Clock } from '../time/clock.js';

/**
 * What `validate` accepts: a predicate, or any Standard Schema validator
 * (zod, valibot, arktype, …). damper depends on the spec's types only, never
 * on a validator library.
 *
 * A predicate may return `true`, `false`, or a string that explains why the
 * value is invalid (shown in the `invalid` event and in `ValidationError`).
 */
export type Validator<V> = ((value: V) => boolean | string) | StandardSchemaV1<unknown, V>;

/** The verdict on one value. On success `value` is the validator's output (a schema may coerce or strip). */
export type Verdict<V> = { readonly ok: true; readonly value: V } | { readonly ok: false; readonly reason: string; readonly issues?: readonly unknown[] };

/**
 * Turns a `Validator` into one function. A validator that throws is treated as
 * rejecting the value: an unchecked value must never reach the cache.
 */
export function compileValidator<V>(validator: Validator<V>): (value: V) => Verdict<V> | Promise<Verdict<V>> {
  // Checked here, once: a `validate: 42` would otherwise reject every value as "schema threw".
  if (typeof validator !== 'function' && !hasMethods(standardOf(validator), ['validate'])) {
    throw new ConfigError('validate must be a function (value) => boolean | string, or a Standard Schema (zod, valibot, arktype, …)');
  }
  if (typeof validator === 'function') {
    return (value) => {
      try {
        const r = validator(value);
        if (r === true) return { ok: true, value };
        return { ok: false, reason: typeof r === 'string' ? r : 'rejected by validate()' };
      } catch (error) {
        return { ok: false, reason: `validate() threw: ${messageOf(error)}` };
      }
    };
  }
  const standard = validator['~standard'];
  const fromResult = (r: StandardSchemaV1.Result<V>): Verdict<V> =>
    r.issues === undefined ? { ok: true, value: r.value } : { ok: false, reason: r.issues.map((i) => i.message).join('; ') || 'rejected by schema', issues: r.issues };
  const thrown = (error: unknown): Verdict<V> => ({ ok: false, reason: `schema threw: ${messageOf(error)}` });
  return (value) => {
    try {
      const r = standard.validate(value);
      return r instanceof Promise ? r.then(fromResult, thrown) : fromResult(r);
    } catch (error) {
      return thrown(error);
    }
  };
}

/**
 * An async verdict that ends by `ms` on `clock`: past it, a rejection
 * (`reason` says so). A validator that never settles must not hold its key:
 * every later `get` of it would wait on the same flight (issue 13). Called
 * only for a verdict that is a promise, so a synchronous validator arms no
 * timer.
 */
export function verdictWithin<V>(verdict: Promise<Verdict<V>>, clock: Clock, ms: number): Promise<Verdict<V>> {
  return new Promise((resolve) => {
    const timer = clock.setTimer(() => resolve({ ok: false, reason: `validation did not finish within ${ms} ms` }), ms);
    const done = (v: Verdict<V>): void => {
      timer.cancel();
      resolve(v);
    };
    verdict.then(done, () => done({ ok: false, reason: 'validator threw' }));
  });
}

/** An async verdict that gives up when `signal` aborts (a load's hard timeout), rejecting with its reason. */
export function verdictBefore<V>(verdict: Promise<Verdict<V>>, signal: AbortSignal): Promise<Verdict<V>> {
  return beforeAbort(verdict, signal, (): Verdict<V> => ({ ok: false, reason: 'validator threw' }));
}

/** A Standard Schema's `~standard` property, or undefined for anything else (a revoked Proxy included). */
function standardOf(validator: unknown): unknown {
  try {
    return (validator as { '~standard'?: unknown })['~standard'];
  } catch {
    return undefined;
  }
}

/** What a validator threw, in words; a hostile throw (whose `message` throws) cannot escape the verdict. */
function messageOf(error: unknown): string {
  try {
    return isError(error) ? error.message : describe(error);
  } catch {
    return describe(error);
  }
}

/**
 * Why a failed load's error says its value was invalid, or undefined when it
 * says something else: read by `classify` (code `VALIDATION`), so a
 * `ValidationError` from a second copy of damper (a nested cache's, behind a
 * loader) is an `invalid` event as this copy's own is. Its fields are read
 * with care: a value from a loader may be hostile, and this runs where a
 * failure is recorded.
 */
export function invalidity(error: unknown): { readonly reason: string; readonly issues: readonly unknown[] | undefined } | undefined {
  if (classify(error) !== 'invalid') return undefined;
  try {
    const { reason, issues } = error as { reason?: unknown; issues?: unknown };
    return { reason: typeof reason === 'string' ? reason : describe(error), issues: Array.isArray(issues) ? (issues as readonly unknown[]) : undefined };
  } catch {
    return { reason: 'a value that cannot be described', issues: undefined };
  }
}
