import { type Clock } from 'damper';
import { type ServiceScenario } from '../schema/service.js';
import { tierSettings } from '../world/service-tiers.js';
import { type Knobs, type TierPlan } from './stack.js';

/**
 * What a peer's client tier `t` is told of the system, the same in a
 * simulation and on real processes: the first population's retries and
 * backoff at that tier (a real tier has one client for every caller, as
 * undici's one agent does), its attempt timeout, the knobs given, and the
 * fitting's time scale.
 */
export function peerPlan(scenario: ServiceScenario, t: number, knobs: Knobs, timeScale: number, clock: Clock): TierPlan {
  const { retries, backoff, attemptTimeoutMs } = tierSettings(scenario.tiers!, t, scenario.clients[0]!);
  return { tier: t, retries, backoff, attemptTimeoutMs, knobs, timeScale, clock };
}
