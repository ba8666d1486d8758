import { arrayOption, hasMethods } from '../config.js';
import { ConfigError, describe } from '../errors.js';
import { type Clock } from '../time/clock.js';

/**
 * Why a {@link TripRule} opens its breaker: one of the shipped rules' reasons,
 * or `rule:` and a name of a user's own, so that the `state` event and a
 * dashboard say which rule tripped.
 */
export type TripReason = 'consecutive-failures' | 'failure-rate' | 'slow-call-rate' | `rule:${string}`;

/** What a {@link TripRule} has counted, for `CircuitBreaker.stats()`; each field only from a rule that counts it. */
export interface TripCounts {
  /** Calls in the rule's window. */
  readonly calls?: number;
  /** Of those, the failures. */
  readonly failures?: number;
  /** Of those, the slow ones. */
  readonly slow?: number;
  /** Failures in a row now. */
  readonly consecutiveFailures?: number;
}

/**
 * When a closed {@link CircuitBreaker} opens: a strategy object, as
 * cockatiel's `ConsecutiveBreaker` and `SamplingBreaker` are. The breaker owns
 * the states and their transitions (half-open probes, the open interval, the
 * epochs that drop late outcomes); a rule owns only the question "has the
 * dependency failed enough to stop calling it?", so a new question (an error
 * budget, a failure count per minute) is a small class, not a fourth special
 * case inside the breaker.
 *
 * The breaker tells a rule only about calls that ran while it was closed and
 * whose outcome counts (the caller's aborts and local refusals never reach a
 * rule; `isFailure` has decided success or failure), and resets every rule
 * when it closes. Counting a call and answering "trip now?" are one call, as
 * cockatiel's `failure()` answers: the breaker's success path pays one call
 * per rule, not two. A rule holds state, so it belongs to one breaker: giving
 * one to two is a `ConfigError`.
 */
export interface TripRule {
  /**
   * Calls that take at least this long are slow, ms; set only by a rule that
   * counts slow calls. The breaker times calls (a clock read and a closure
   * more per call) only when one of its rules sets it, and a half-open probe
   * this slow fails.
   */
  readonly slowCallMs?: number | undefined;
  /** The breaker's clock, once, when the breaker takes the rule: a rule that keeps a window of time reads it here. */
  attach?(clock: Clock): void;
  /**
   * A call succeeded: count it, and say why the breaker must open now, or
   * undefined (a rate rule can trip on a success: the one that brings the
   * window up to its minimum of calls, or a slow one). `ms` is the call's
   * duration, NaN when no rule of the breaker sets `slowCallMs`.
   */
  success(ms: number): TripReason | undefined;
  /** A call failed: as {@link success}. */
  failure(ms: number): TripReason | undefined;
  /** The breaker closed: forget every call counted. */
  reset(): void;
  /** What the rule counts, for the breaker's `stats()`. */
  counts?(): TripCounts;
}

/** Brands the rules damper ships: they never throw, so the breaker calls them bare, on its hot path. @internal */
export const SHIPPED: unique symbol = Symbol('damper.shipped-rule');

function isShipped(rule: TripRule): boolean {
  return (rule as { [SHIPPED]?: true })[SHIPPED] === true;
}

/**
 * A user's rule, called so that what it throws is a warning, not an
 * unhandled rejection on every call of the dependency (the breaker counts
 * from a promise reaction) nor a transition left half done: the breaker goes
 * on as if the rule had not been asked.
 */
class CheckedRule implements TripRule {
  readonly slowCallMs: number | undefined;

  constructor(private readonly rule: TripRule) {
    const ms = rule.slowCallMs;
    if (ms !== undefined && !(typeof ms === 'number' && ms > 0)) throw new ConfigError(`a TripRule's slowCallMs must be a number of ms > 0, got ${describe(ms)}`);
    this.slowCallMs = ms;
  }

  success(ms: number): TripReason | undefined {
    return reasonOrNone(this.checked(() => this.rule.success(ms)));
  }

  failure(ms: number): TripReason | undefined {
    return reasonOrNone(this.checked(() => this.rule.failure(ms)));
  }

  reset(): void {
    this.checked(() => this.rule.reset());
  }

  counts(): TripCounts {
    return (typeof this.rule.counts === 'function' ? this.checked(() => this.rule.counts?.()) : undefined) ?? {};
  }

  private checked<T>(call: () => T): T | undefined {
    try {
      return call();
    } catch (error) {
      process.emitWarning(`a CircuitBreaker trip rule threw: ${describe(error)}`, { code: 'DAMPER_TRIP_RULE_ERROR' });
      return undefined;
    }
  }
}

/** A user's rule's answer, if it names a reason: anything else (a `false`, a `null`) is no. */
function reasonOrNone(said: unknown): TripReason | undefined {
  return typeof said === 'string' ? (said as TripReason) : undefined;
}

/** Rules taken by a breaker: a rule's counts are one dependency's, and two breakers feeding one rule would trip each other. */
const taken = new WeakSet<TripRule>();

/**
 * The rules of a breaker's `trip` option, checked and taken for it: one rule
 * or a list, each with the methods a rule must have, none already taken by
 * another breaker.
 *
 * @internal
 */
export function takeRules(trip: TripRule | readonly TripRule[], clock: Clock): readonly TripRule[] {
  const rules = hasMethods(trip, ['success']) ? [trip as TripRule] : arrayOption('trip', trip as readonly TripRule[], 'a TripRule or an array of them');
  for (const [i, rule] of rules.entries()) {
    if (!hasMethods(rule, ['success', 'failure', 'reset'])) throw new ConfigError(`trip[${i}] must be a TripRule (success, failure and reset functions)`);
    if (taken.has(rule)) throw new ConfigError(`trip[${i}] is already the rule of another CircuitBreaker: a rule counts one dependency's calls; make one per breaker`);
  }
  for (const rule of rules) {
    taken.add(rule);
    rule.attach?.(clock);
  }
  return rules.map((rule) => (isShipped(rule) ? rule : new CheckedRule(rule)));
}

/** The shortest `slowCallMs` of `rules`: calls are timed only when some rule reads durations. @internal */
export function slowCallMsOf(rules: readonly TripRule[]): number | undefined {
  let ms: number | undefined;
  for (const rule of rules) if (rule.slowCallMs !== undefined && (ms === undefined || rule.slowCallMs < ms)) ms = rule.slowCallMs;
  return ms;
}

/** The breaker's counts from its rules: each field from the first rule that counts it, 0 when none does. @internal */
export function countsOf(rules: readonly TripRule[]): Required<TripCounts> {
  let calls: number | undefined;
  let failures: number | undefined;
  let slow: number | undefined;
  let consecutiveFailures: number | undefined;
  for (const rule of rules) {
    const c = rule.counts?.();
    if (c === undefined) continue;
    calls ??= c.calls;
    failures ??= c.failures;
    slow ??= c.slow;
    consecutiveFailures ??= c.consecutiveFailures;
  }
  return { calls: calls ?? 0, failures: failures ?? 0, slow: slow ?? 0, consecutiveFailures: consecutiveFailures ?? 0 };
}
