import { between, optionsObject, or } from '../config.js';
import { type Clock } from '../time/clock.js';
import { CALLS, FAILURES, SampledCalls, type SampledCallsOptions } from './sampled-calls.js';
import { SHIPPED, type TripCounts, type TripReason, type TripRule } from './trip-rule.js';

/** Options for {@link FailureRateRule}. */
export interface FailureRateOptions extends SampledCallsOptions {
  /** Trip when failures / calls in the window exceed this. Default 0.5. */
  threshold?: number;
}

/**
 * Trips when more than `threshold` of the calls in the last `window` ms
 * failed, once the window holds `minimumCalls` (cockatiel's
 * `SamplingBreaker`). Catches a dependency that fails often but not always,
 * which a {@link ConsecutiveFailuresRule} never sees (one success resets it).
 */
export class FailureRateRule implements TripRule {
  /** @internal */
  readonly [SHIPPED] = true as const;
  readonly threshold: number;
  private readonly calls: SampledCalls;

  constructor(ruleOptions?: FailureRateOptions) {
    const options = optionsObject('FailureRateRule options', ruleOptions);
    this.calls = new SampledCalls(options);
    this.threshold = between('threshold', or(options.threshold, 0.5), 0, 1);
  }

  attach(clock: Clock): void {
    this.calls.attach(clock);
  }

  success(): TripReason | undefined {
    this.calls.add(CALLS);
    return this.verdict();
  }

  failure(): TripReason | undefined {
    this.calls.add(CALLS);
    this.calls.add(FAILURES);
    return this.verdict();
  }

  private verdict(): TripReason | undefined {
    return this.calls.rateAbove(FAILURES, this.threshold) ? 'failure-rate' : undefined;
  }

  reset(): void {
    this.calls.clear();
  }

  counts(): TripCounts {
    return { calls: this.calls.sum(CALLS), failures: this.calls.sum(FAILURES) };
  }
}
