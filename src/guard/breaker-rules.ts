import { ConfigError } from '../errors.js';
import { type Clock } from '../time/clock.js';
import { type CircuitBreaker } from './breaker.js';
import { ConsecutiveFailuresRule } from './consecutive-failures.js';
import { FailureRateRule } from './failure-rate.js';
import { SlowCallRateRule } from './slow-call-rate.js';
import { takeRules, type TripRule } from './trip-rule.js';

/** The options that build the default rules: given with `trip`, they would be silently ignored. */
const RULE_OPTIONS = ['consecutiveFailures', 'window', 'windowBuckets', 'minimumCalls', 'failureRateThreshold', 'slowCallRateThreshold', 'slowCallMs'] as const;

/** Those options as the breaker took them (checked, defaults filled in): its public fields of the same names. */
type RuleSettings = Pick<CircuitBreaker, (typeof RULE_OPTIONS)[number]>;

/**
 * The rules a breaker trips by: its `trip` option, or the rules its older
 * options describe, in the order their reasons win when two trip at once
 * (consecutive failures, failure rate, slow-call rate). A rate rule whose
 * threshold is 1 can never trip and is not made: with both off the breaker
 * keeps no window at all.
 *
 * @internal
 */
export function breakerRules(options: { readonly trip?: TripRule | readonly TripRule[] | undefined } & Partial<RuleSettings>, settings: RuleSettings, clock: Clock): readonly TripRule[] {
  if (options.trip !== undefined) {
    const given = RULE_OPTIONS.filter((name) => options[name] !== undefined);
    if (given.length > 0) throw new ConfigError(`CircuitBreaker: trip replaces ${given.join(', ')}; give each rule its own settings (new FailureRateRule({ threshold, window, minimumCalls }), …)`);
    return takeRules(options.trip, clock);
  }
  const rules: TripRule[] = [new ConsecutiveFailuresRule({ failures: settings.consecutiveFailures })];
  const sampling = { window: settings.window, windowBuckets: settings.windowBuckets, minimumCalls: settings.minimumCalls };
  if (settings.failureRateThreshold < 1) rules.push(new FailureRateRule({ ...sampling, threshold: settings.failureRateThreshold }));
  if (settings.slowCallRateThreshold < 1) rules.push(new SlowCallRateRule({ ...sampling, threshold: settings.slowCallRateThreshold, slowCallMs: settings.slowCallMs }));
  return takeRules(rules, clock);
}
