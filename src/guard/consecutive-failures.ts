import { integer, optionsObject, or } from '../config.js';
import { SHIPPED, type TripCounts, type TripReason, type TripRule } from './trip-rule.js';

/** Options for {@link ConsecutiveFailuresRule}. */
export interface ConsecutiveFailuresOptions {
  /** Failures in a row that trip the breaker. Default 5. */
  failures?: number;
}

/**
 * Trips after `failures` failures in a row; one success starts the count
 * again (cockatiel's `ConsecutiveBreaker`). The fast rule: a dependency that
 * is down fails every call, and waiting for a rate over a whole window would
 * send it a window of full traffic first. Blind to a dependency that fails
 * half its calls, which a {@link FailureRateRule} sees.
 */
export class ConsecutiveFailuresRule implements TripRule {
  /** @internal */
  readonly [SHIPPED] = true as const;
  readonly failures: number;
  private inARow = 0;

  constructor(ruleOptions?: ConsecutiveFailuresOptions) {
    const options = optionsObject('ConsecutiveFailuresRule options', ruleOptions);
    this.failures = integer('failures', or(options.failures, 5), 1);
  }

  success(): TripReason | undefined {
    this.inARow = 0;
    return undefined;
  }

  failure(): TripReason | undefined {
    this.inARow++;
    return this.inARow >= this.failures ? 'consecutive-failures' : undefined;
  }

  reset(): void {
    this.inARow = 0;
  }

  counts(): TripCounts {
    return { consecutiveFailures: this.inARow };
  }
}
