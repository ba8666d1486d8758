import { type Backoff } from '../schema/common.js';
import { type ServiceScenario } from '../schema/service.js';
import { type PeerSetting } from './stack.js';

/**
 * undici's retry interceptor (`interceptors.retry`, the `RetryAgent`'s
 * handler) as its documentation sets it up, in place of naive's, which is
 * the same interceptor told to retry at once. What the scenario says of the
 * system stays (how many retries each tier makes, its attempt timeout, and
 * that a timed-out attempt is retried: undici's default error codes leave
 * out its own timeouts, and a system that "times out and retries" lists
 * them, as naive's does); what undici has a default for and the scenario
 * does not say is undici's: its exponential wait, 500 ms doubled per retry
 * up to 30 s, with no jitter.
 *
 * So undici's stack is naive's with undici's backoff: the same code on real
 * processes (tier-clients.ts's `naiveTierClient` maps the backoff onto the
 * interceptor's `minTimeout`, `maxTimeout` and `timeoutFactor`), and the
 * lab's model of that interceptor in the simulation (naive-tiers.ts, checked
 * against the real one in the real runs).
 */

/** undici 7's `RetryHandler` defaults: `minTimeout` 500 ms, `timeoutFactor` 2, `maxTimeout` 30 s. */
export const UNDICI_BACKOFF = { kind: 'exponential', baseMs: 500, maxMs: 30_000 } as const satisfies Backoff;

const SOURCE = 'undici docs, "Class: RetryHandler" (docs/docs/api/RetryHandler.md), RetryOptions: minTimeout 500, maxTimeout 30000, timeoutFactor 2';

/** The settings undici's stack takes from undici, for the docs and the page. */
export function undiciSettings(): readonly PeerSetting[] {
  return [
    { name: 'backoff', value: 'min(30 s, 500 ms × 2^(n−1)) before retry n, no jitter', source: SOURCE },
    { name: 'retried', value: 'statuses 500, 502, 503, 504, 429 (its default), its default error codes and its own headers/body timeouts', source: 'undici docs, RetryHandler: statusCodes and errorCodes defaults' },
  ];
}

/**
 * The scenario with every population's wait before each tier's retry
 * undici's own (÷ the fitting's time scale, as the scenario's durations
 * are): the system undici's stack runs in.
 */
export function undiciSystem(scenario: ServiceScenario, timeScale: number): ServiceScenario {
  const count = scenario.tiers?.count ?? 0;
  const backoff = { ...UNDICI_BACKOFF, baseMs: UNDICI_BACKOFF.baseMs / timeScale, maxMs: UNDICI_BACKOFF.maxMs / timeScale };
  return {
    ...scenario,
    clients: scenario.clients.map((p) => ({ ...p, tiers: Array.from({ length: count }, (_, t) => ({ ...p.tiers?.[t], backoff })) })),
  };
}
