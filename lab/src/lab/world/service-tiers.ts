import { type Backoff, type Population } from '../schema/common.js';
import { type ServiceScenario } from '../schema/service.js';

/**
 * The service world's client tiers (a web front end, a cart service…)
 * between the users and the servers: how many, and what each does with a
 * failed attempt. By default every tier retries per the calling population's
 * `retries` and `backoff` and only the innermost times its attempts out;
 * `each` gives a tier its own (an API that retries 3 times in front of a
 * service that retries once, each with its own timeout), and a population
 * its own retries and backoff at each tier (`clients[i].tiers`: an app that
 * retries beside a web page that does not).
 */

/** The client tiers of a service scenario (`tiers`), as its schema infers them. */
export type ServiceTiers = NonNullable<ServiceScenario['tiers']>;

/** A client tier's own settings (`tiers.each[t]`), where they differ from the defaults. */
export type TierSettings = NonNullable<ServiceTiers['each']>[number];

/**
 * Tier `t`'s retries, backoff, timeout per attempt and hedge delay for a call of
 * `population` (outermost first): the retries and backoff the population
 * gives for this tier (`clients[i].tiers[t]`), else the tier's own where
 * `each` gives them, else the population's; a timeout for the innermost only.
 */
export function tierSettings(
  tiers: ServiceTiers,
  t: number,
  population: Pick<Population, 'retries' | 'backoff' | 'tiers'>,
): { readonly retries: number; readonly backoff: Backoff; readonly attemptTimeoutMs: number | undefined; readonly timerTickMs: number | undefined; readonly hedgeAfterMs: number | undefined } {
  const own = tiers.each?.[t];
  const caller = population.tiers?.[t];
  return {
    retries: caller?.retries ?? own?.retries ?? population.retries,
    backoff: caller?.backoff ?? own?.backoff ?? population.backoff,
    attemptTimeoutMs: own?.attemptTimeoutMs ?? (t === tiers.count - 1 ? tiers.attemptTimeoutMs : undefined),
    timerTickMs: own?.timerTickMs,
    hedgeAfterMs: own?.hedgeAfterMs,
  };
}

/**
 * When a timeout of `ms` set at `now` fires on a client whose timers are
 * checked every `tickMs` (undici's fast timers): at the first tick at or
 * after it was due, ticks falling on multiples of `tickMs`, so between `ms`
 * and `ms + tickMs` from now. Without a tick, at `ms`.
 */
export function tickedDelay(now: number, ms: number, tickMs: number | undefined): number {
  if (tickMs === undefined) return ms;
  return Math.ceil((now + ms) / tickMs) * tickMs - now;
}
