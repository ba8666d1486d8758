import { type Backoff, type Population } from '../scenario.js';

/**
 * The service world's client tiers (a web front end, a cart service…)
 * between the users and the servers: how many, and what each does with a
 * failed attempt. By default every tier retries per the calling population's
 * `retries` and `backoff` and only the innermost times its attempts out;
 * `each` gives a tier its own (an API that retries 3 times in front of a
 * service that retries once, each with its own timeout).
 */

/** A client tier's own settings, where they differ from the defaults. */
export interface TierSettings {
  readonly retries?: number;
  readonly backoff?: Backoff;
  readonly attemptTimeoutMs?: number;
}

export interface ServiceTiers {
  readonly count: number;
  /** The innermost tier's timeout per attempt, ms. */
  readonly attemptTimeoutMs: number;
  /** Each tier's own settings, outermost first, one per tier. */
  readonly each?: readonly TierSettings[];
}

/**
 * Tier `t`'s retries, backoff and timeout per attempt for a call of
 * `population` (outermost first): its own where `each` gives them, else the
 * population's retries and backoff, and a timeout for the innermost only.
 */
export function tierSettings(tiers: ServiceTiers, t: number, population: Pick<Population, 'retries' | 'backoff'>): { readonly retries: number; readonly backoff: Backoff; readonly attemptTimeoutMs: number | undefined } {
  const own = tiers.each?.[t];
  return {
    retries: own?.retries ?? population.retries,
    backoff: own?.backoff ?? population.backoff,
    attemptTimeoutMs: own?.attemptTimeoutMs ?? (t === tiers.count - 1 ? tiers.attemptTimeoutMs : undefined),
  };
}
