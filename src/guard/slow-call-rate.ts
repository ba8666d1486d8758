import { between, duration, optionsObject, or } from '../config.js';
import { type Clock } from '../time/clock.js';
import { CALLS, FAILURES, SampledCalls, type SampledCallsOptions, SLOW } from './sampled-calls.js';
import { SHIPPED, type TripCounts, type TripReason, type TripRule } from './trip-rule.js';

/** Options for {@link SlowCallRateRule}. */
export interface SlowCallRateOptions extends SampledCallsOptions {
  /** Trip when calls slower than `slowCallMs` / calls in the window exceed this. Default 0.5. */
  threshold?: number;
  /** A call taking at least this long is slow, ms. Default 5 000. */
  slowCallMs?: number;
}

/**
 * Trips when more than `threshold` of the calls in the last `window` ms took
 * `slowCallMs` or longer, once the window holds `minimumCalls`; failed calls
 * count too (a slow failure is slow). Slow is how overload starts
 * (Missourian 2010: the server that hung was slow long before it was dead);
 * shedding calls before they time out keeps threads and sockets for work that
 * can succeed. With this rule the breaker times every call, and a half-open
 * probe this slow fails.
 */
export class SlowCallRateRule implements TripRule {
  /** @internal */
  readonly [SHIPPED] = true as const;
  readonly threshold: number;
  readonly slowCallMs: number;
  private readonly calls: SampledCalls;

  constructor(ruleOptions?: SlowCallRateOptions) {
    const options = optionsObject('SlowCallRateRule options', ruleOptions);
    this.calls = new SampledCalls(options);
    this.threshold = between('threshold', or(options.threshold, 0.5), 0, 1);
    this.slowCallMs = duration('slowCallMs', or(options.slowCallMs, 5_000), { positive: true });
  }

  attach(clock: Clock): void {
    this.calls.attach(clock);
  }

  success(ms: number): TripReason | undefined {
    this.count(ms);
    return this.verdict();
  }

  failure(ms: number): TripReason | undefined {
    this.count(ms);
    this.calls.add(FAILURES);
    return this.verdict();
  }

  private count(ms: number): void {
    this.calls.add(CALLS);
    if (ms >= this.slowCallMs) this.calls.add(SLOW);
  }

  private verdict(): TripReason | undefined {
    return this.calls.rateAbove(SLOW, this.threshold) ? 'slow-call-rate' : undefined;
  }

  reset(): void {
    this.calls.clear();
  }

  counts(): TripCounts {
    return { calls: this.calls.sum(CALLS), failures: this.calls.sum(FAILURES), slow: this.calls.sum(SLOW) };
  }
}
