import { type ServiceScenario } from '../schema/service.js';

/** A naive hand-written breaker's settings (`cache.naive.breaker`: failures in a row, ms open). */
export type NaiveBreakerShape = NonNullable<NonNullable<ServiceScenario['cache']>['naive']['breaker']>;

/**
 * The hand-written breaker of Discord 2019's API processes, in front of the
 * cache nodes, one per server. It counts cache failures in a row and opens,
 * as a breaker should; after `openMs` one call tries the cache again, and a
 * failure opens it again. Its bug is not here but in its caller (the
 * postmortem's "bug in our circuit breaking code"): open, it degrades
 * nothing, it only stops calling the cache, and the caller falls through
 * to the database for every read, low priority included. So the breaker
 * moves the cache's load onto the database, which is exactly what it was
 * there to prevent.
 */
export class NaiveBreaker {
  // A call that started before the breaker opened may end after: its failure counts towards the next opening, its success only clears the count.
  private state: { readonly kind: 'closed'; readonly failures: number } | { readonly kind: 'open'; readonly until: number; readonly failures: number } | { readonly kind: 'half-open' } = { kind: 'closed', failures: 0 };

  constructor(private readonly shape: NaiveBreakerShape) {}

  /** Whether the cache must not be called at `now`; an open breaker past its time lets the next call through. */
  isOpen(now: number): boolean {
    if (this.state.kind !== 'open') return false;
    if (now < this.state.until) return true;
    this.state = { kind: 'half-open' };
    return false;
  }

  success(): void {
    this.state = this.state.kind === 'open' ? { ...this.state, failures: 0 } : { kind: 'closed', failures: 0 };
  }

  failure(now: number): void {
    const failures = this.state.kind === 'half-open' ? this.shape.failures : this.state.failures + 1;
    if (failures >= this.shape.failures) this.state = { kind: 'open', until: now + this.shape.openMs, failures: 0 };
    else this.state = { ...this.state, failures } as typeof this.state;
  }
}
