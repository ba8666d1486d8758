import {
  BrokenCircuitError,
  BulkheadRejectedError,
  bulkhead,
  circuitBreaker,
  ConsecutiveBreaker,
  ExponentialBackoff,
  handleAll,
  type IPolicy,
  retry,
  TaskCancelledError,
  timeout,
  TimeoutStrategy,
  wrap,
} from 'cockatiel';
import { type PeerPolicy, type PeerSetting, type PolicyPeer, scaledWords, type TierPlan } from './stack.js';

/**
 * cockatiel 3 around a client tier's calls, as its README's "getting
 * started" composes it: a retry with its `ExponentialBackoff` (its
 * defaults: 128 ms first, exponent 2, 30 s at most, decorrelated jitter)
 * around a circuit breaker that opens after 5 failures in a row and tries
 * again after 10 s, around an aggressive timeout at the scenario's attempt
 * timeout (none where the scenario gives none: cockatiel has no default),
 * and outermost, when the `bulkhead` knob gives its size, a bulkhead
 * (cockatiel has no default size; no queue, its default). The retry count is
 * the system's (the scenario's `retries`). Durations are divided by the
 * fitting's time scale, as the scenario's own are.
 */

const README = 'cockatiel README, "Then go forth with confidence" (the getting-started example)';

export const cockatiel: PolicyPeer = {
  name: 'cockatiel',
  settings: (plan) => settings(plan),
  tier: (plan) => policy(plan),
};

/** The breaker's documented example: open after 5 consecutive failures, half-open after 10 s. */
const CONSECUTIVE_FAILURES = 5;
const HALF_OPEN_AFTER_MS = 10_000;

function settings(plan: TierPlan): readonly PeerSetting[] {
  const size = plan.knobs.bulkhead ?? 0;
  return [
    { name: 'retry', value: `handleAll, maxAttempts ${plan.retries} (the scenario's retries), new ExponentialBackoff() (first ${scaledWords(128, plan.timeScale)}, ×2, at most ${scaledWords(30_000, plan.timeScale)}, decorrelated jitter)`, source: `${README}; README "ExponentialBackoff" for the defaults` },
    { name: 'circuit breaker', value: `handleAll, ConsecutiveBreaker(${CONSECUTIVE_FAILURES}), halfOpenAfter ${scaledWords(HALF_OPEN_AFTER_MS, plan.timeScale)}`, source: README },
    { name: 'timeout', value: plan.attemptTimeoutMs === undefined ? 'none (the scenario gives this tier none)' : `${plan.attemptTimeoutMs} ms (the scenario's attempt timeout), TimeoutStrategy.Aggressive`, source: 'cockatiel README, "timeout(duration, strategy)"' },
    { name: 'bulkhead', value: size > 0 ? `bulkhead(${size}), no queue` : 'none (cockatiel has no default size: the knob `bulkhead=N` sets one)', source: 'cockatiel README, "bulkhead(limit[, queue])"' },
  ];
}

function policy(plan: TierPlan): PeerPolicy {
  const scale = (ms: number): number => ms / plan.timeScale;
  const policies: IPolicy[] = [];
  const size = plan.knobs.bulkhead ?? 0;
  if (size > 0) policies.push(bulkhead(size));
  const backoff = new ExponentialBackoff({ initialDelay: scale(128), maxDelay: scale(30_000) });
  policies.push(retry(handleAll, { maxAttempts: plan.retries, backoff }));
  policies.push(circuitBreaker(handleAll, { halfOpenAfter: scale(HALF_OPEN_AFTER_MS), breaker: new ConsecutiveBreaker(CONSECUTIVE_FAILURES) }));
  if (plan.attemptTimeoutMs !== undefined) policies.push(timeout(plan.attemptTimeoutMs, TimeoutStrategy.Aggressive));
  const stack = wrap(...policies);
  return {
    execute: (attempt, signal) => stack.execute(({ signal: inner }) => attempt(inner), signal),
    rejection: (error) => {
      if (error instanceof TaskCancelledError) return 'timeout';
      if (error instanceof BrokenCircuitError || error instanceof BulkheadRejectedError) return 'refused';
      return undefined;
    },
    close: () => {},
  };
}
