import CircuitBreaker from 'opossum';
import { retryDelayMs } from '../engine/retry-delay.js';
import { type PeerPolicy, type PeerSetting, type PolicyPeer, scaledWords, type TierPlan } from './stack.js';

/**
 * opossum 9 around each attempt of a client tier, as its README's "Usage"
 * sets a breaker up, with its defaults where that example gives none: open
 * when half of the calls in its rolling window (10 s in 10 buckets) failed,
 * try again after 30 s, `timeout` the scenario's attempt timeout (opossum's
 * default, 10 s, where the scenario gives none), every call admitted
 * (`capacity`, its semaphore, unbounded unless the knob sets it). opossum
 * retries nothing: the tier retries as the system does (the scenario's
 * retries and backoff, naive's loop), each retry through the breaker, which
 * refuses at once while open. No fallback: a tier that relays a call has no
 * answer of its own to give in its place (a fallback that answers an error
 * only changes the error's shape). Durations are divided by the fitting's
 * time scale, as the scenario's own are.
 */

const README = 'opossum README, "Usage" (timeout, errorThresholdPercentage 50, resetTimeout 30000)';

/** opossum's own defaults (lib/circuit.js, its constructor's JSDoc): the window, and the timeout where the scenario gives none. */
const ROLLING_WINDOW_MS = 10_000;
const DEFAULT_TIMEOUT_MS = 10_000;
const RESET_TIMEOUT_MS = 30_000;
const ERROR_THRESHOLD_PERCENTAGE = 50;

export const opossum: PolicyPeer = {
  name: 'opossum',
  settings: (plan) => settings(plan),
  tier: (plan) => policy(plan),
};

function settings(plan: TierPlan): readonly PeerSetting[] {
  const capacity = plan.knobs.capacity ?? 0;
  return [
    { name: 'timeout', value: plan.attemptTimeoutMs === undefined ? `${scaledWords(DEFAULT_TIMEOUT_MS, plan.timeScale)} (opossum's default; the scenario gives this tier none)` : `${plan.attemptTimeoutMs} ms (the scenario's attempt timeout)`, source: README },
    { name: 'errorThresholdPercentage', value: `${ERROR_THRESHOLD_PERCENTAGE} %`, source: README },
    { name: 'resetTimeout', value: scaledWords(RESET_TIMEOUT_MS, plan.timeScale), source: README },
    { name: 'rolling window', value: `${scaledWords(ROLLING_WINDOW_MS, plan.timeScale)} in 10 buckets, volumeThreshold 0 (its defaults)`, source: 'opossum API docs, CircuitBreaker options (rollingCountTimeout, rollingCountBuckets, volumeThreshold)' },
    { name: 'capacity', value: capacity > 0 ? `${capacity} calls at once` : 'unbounded (its default; the knob `capacity=N` sets it)', source: 'opossum API docs, CircuitBreaker options (capacity)' },
    { name: 'retries', value: `the system's: ${plan.retries} per call, each through the breaker (opossum retries nothing)`, source: 'opossum README (no retry option)' },
    { name: 'fallback', value: 'none: a relaying tier has no answer of its own', source: 'opossum README, "Fallback"' },
  ];
}

/** Why opossum rejected a call, by its error's `code` (lib/circuit.js, `buildError`). */
function rejection(error: unknown): 'timeout' | 'refused' | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (code === 'ETIMEDOUT') return 'timeout';
  if (code === 'EOPENBREAKER' || code === 'ESEMLOCKED') return 'refused';
  return undefined;
}

type Attempt = (signal: AbortSignal) => Promise<unknown>;

function policy(plan: TierPlan): PeerPolicy {
  const capacity = plan.knobs.capacity ?? 0;
  const breaker = new CircuitBreaker((attempt: Attempt, signal: AbortSignal) => attempt(signal), {
    timeout: plan.attemptTimeoutMs ?? DEFAULT_TIMEOUT_MS / plan.timeScale,
    errorThresholdPercentage: ERROR_THRESHOLD_PERCENTAGE,
    resetTimeout: RESET_TIMEOUT_MS / plan.timeScale,
    rollingCountTimeout: ROLLING_WINDOW_MS / plan.timeScale,
    ...(capacity > 0 ? { capacity } : {}),
  });
  // One attempt through the breaker; given up on at its timeout, the request below aborted (as undici's own timeout would).
  const once = async <T>(attempt: (signal: AbortSignal) => Promise<T>, outer: AbortSignal | undefined): Promise<T> => {
    const own = new AbortController();
    const abort = (): void => own.abort();
    outer?.addEventListener('abort', abort);
    try {
      return (await breaker.fire(attempt, own.signal)) as T;
    } catch (error) {
      own.abort();
      throw error;
    } finally {
      outer?.removeEventListener('abort', abort);
    }
  };
  return {
    async execute(attempt, signal) {
      for (let tries = 0; ; tries++) {
        try {
          return await once(attempt, signal);
        } catch (error) {
          if (tries >= plan.retries || signal?.aborted === true) throw error;
          // The system's own loop, on the run's clock.
          const wait = retryDelayMs(plan.backoff, tries + 1, () => plan.clock.random());
          if (wait > 0) await new Promise<void>((resolve) => plan.clock.setTimer(resolve, wait));
        }
      }
    },
    rejection,
    close: () => breaker.shutdown(),
  };
}
