import type { Attributes } from '@opentelemetry/api';
import { Balancer, type BalancerStats } from '../balance/balancer.js';
import { Cache } from '../cache/cache.js';
import { type CacheStats } from '../cache/stats.js';
import { type BreakerStats, CircuitBreaker } from '../guard/breaker.js';
import { RetryBudget, type RetryBudgetStats } from '../guard/budget.js';
import { DeadlineGuard, type DeadlineGuardStats } from '../guard/deadline-guard.js';
import { ConcurrencyLimiter, type ConcurrencyLimiterStats } from '../guard/limiter.js';
import { RateLimiter, type RateLimiterStats } from '../guard/rate.js';
import { Retry, type RetryStats } from '../guard/retry.js';
import { AdaptiveThrottle, type AdaptiveThrottleStats } from '../guard/throttle.js';

/** One point of an observable instrument: a value, and the attributes that tell it from its siblings. */
export type Point = readonly [value: number, attributes?: Attributes];

/** An observable instrument read from a target's `stats()` at each collection. */
export interface ObservedSpec<S> {
  readonly name: string;
  /** counter: only grows; updown: a level that may fall; gauge: a value now (a state, a ratio, a limit). */
  readonly kind: 'counter' | 'updown' | 'gauge';
  readonly unit: string;
  /** What it counts, then what a rising value means: the row of docs/observability.md. */
  readonly description: string;
  readonly read: (stats: S) => number | readonly Point[];
}

/** A characteristic ratio: Δnumerator ÷ Δdenominator over the ratio window (see `RollingRatio`). */
export interface RatioSpec<S> {
  readonly name: string;
  readonly description: string;
  readonly numerator: (stats: S) => number;
  readonly denominator: (stats: S) => number;
}

/** A histogram, recorded from a target's events: only where a distribution matters. */
export interface HistogramSpec<T> {
  readonly name: string;
  readonly unit: 's';
  readonly description: string;
  readonly boundaries: readonly number[];
  /** Subscribes `record` (seconds, with the point's attributes) to the target; returns the unsubscribe. */
  readonly subscribe: (target: T, record: (seconds: number, attributes: Attributes) => void) => () => void;
}

/** Everything `instrument()` attaches to one kind of target. */
export interface TargetSpec<T, S> {
  readonly kind: string;
  readonly matches: (target: unknown) => target is T;
  readonly stats: (target: T) => S;
  readonly observed: readonly ObservedSpec<S>[];
  readonly ratios: readonly RatioSpec<S>[];
  readonly histograms: readonly HistogramSpec<T>[];
}

/** Bucket bounds for durations from sub-millisecond loads to multi-second timeouts, s. */
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** A counter split by one attribute: one point per value of `key`. */
function split<K extends string>(key: string, counts: { readonly [k in K]: number }): readonly Point[] {
  return (Object.keys(counts) as K[]).map((k) => [counts[k], { [key]: k }] as const);
}

function flag(on: boolean): number {
  return on ? 1 : 0;
}

const cache: TargetSpec<Cache<unknown>, CacheStats> = {
  kind: 'Cache',
  matches: (t): t is Cache<unknown> => t instanceof Cache,
  stats: (t) => t.stats(),
  observed: [
    {
      name: 'damper.cache.requests',
      kind: 'counter',
      unit: '{request}',
      description: 'get() calls by how they ended (damper.result: hit, stale, miss, error). A rising error share: callers are failing with nothing to serve.',
      read: (s) => split('damper.result', { hit: s.hits, stale: s.stale, miss: s.misses, error: s.errors }),
    },
    {
      name: 'damper.cache.loads',
      kind: 'counter',
      unit: '{load}',
      description: 'Loader calls: the queries that reached the origin (damper.cause: read, or warm for warm-up). Read loads rising faster than requests: the cache is not absorbing load.',
      read: (s) => split('damper.cause', { read: s.loads - s.warmLoads, warm: s.warmLoads }),
    },
    {
      name: 'damper.cache.stale',
      kind: 'counter',
      unit: '{request}',
      description: 'Stale values served, by why (damper.reason: revalidate, error, backoff, timeout). revalidate is routine; the other three rising: the origin fails or is slow and the cache covers for it.',
      read: (s) => split('damper.reason', s.staleBy),
    },
    { name: 'damper.cache.load.errors', kind: 'counter', unit: '{load}', description: 'Loader calls that failed. Rising: the origin is failing; the cache serves stale and backs off per key.', read: (s) => s.loadErrors },
    {
      name: 'damper.cache.backoff.refusals',
      kind: 'counter',
      unit: '{request}',
      description: 'Reads answered from a failing key’s backoff without a load. Rising: failing keys are being read, and the backoff keeps those reads off the origin.',
      read: (s) => s.backoffRefusals,
    },
    {
      name: 'damper.cache.validation.rejections',
      kind: 'counter',
      unit: '{value}',
      description: 'Loaded values that validate rejected (the last known good kept). Any rise: the origin holds invalid data (Facebook 2010’s trigger).',
      read: (s) => s.validationRejections,
    },
    { name: 'damper.cache.coalesced', kind: 'counter', unit: '{request}', description: 'Reads that joined a load in flight. Rising with loads flat: a hot key is being protected from a stampede.', read: (s) => s.coalesced },
    { name: 'damper.cache.evictions', kind: 'counter', unit: '{entry}', description: 'Entries pushed out to bound memory. Rising with misses: the cache is too small for its working set.', read: (s) => s.evictions },
    { name: 'damper.cache.entries', kind: 'updown', unit: '{entry}', description: 'Keys held now. Falling to zero: a restart or a clear, a cold cache (principle 7).', read: (s) => s.entries },
    { name: 'damper.cache.loading', kind: 'updown', unit: '{load}', description: 'Loads in flight now (a load superseded by a write counts until it ends). Rising: loads are slow or queued behind the origin budget.', read: (s) => s.loading },
    {
      name: 'damper.cache.shared.reads',
      kind: 'counter',
      unit: '{read}',
      description: 'Reads of the shared tier (damper.result: hit, miss). A falling hit share across the cluster: the shared tier lost keys (Discord 2019).',
      read: (s) => (s.shared === undefined ? [] : split('damper.result', { hit: s.shared.hits, miss: s.shared.reads - s.shared.hits })),
    },
    { name: 'damper.cache.shared.errors', kind: 'counter', unit: '{call}', description: 'Shared-tier calls that failed or timed out. Rising: Redis is slow or down; reads carry on from memory and the origin budget.', read: (s) => (s.shared === undefined ? [] : s.shared.errors) },
    { name: 'damper.cache.shared.lease_waits', kind: 'counter', unit: '{wait}', description: 'Waits for another process’s lease on a key. Rising: many processes want the same keys at once, and one loads for all.', read: (s) => (s.shared === undefined ? [] : s.shared.leaseWaits) },
    { name: 'damper.cache.shared.bus_gaps', kind: 'counter', unit: '{gap}', description: 'Times messages on the invalidation bus were found lost (a subscription cut, a hole in a sender’s numbering); each made every value in memory stale. Rising: subscriptions are dropped (reconnects, failovers, output-buffer limits).', read: (s) => (s.shared === undefined ? [] : s.shared.busGaps) },
    { name: 'damper.cache.shared.tag_invalidations_heard', kind: 'counter', unit: '{invalidation}', description: 'Tag invalidations (invalidateTags) from other processes that reached this one through the bus, each applied on arrival.', read: (s) => (s.shared === undefined ? [] : s.shared.tagInvalidationsHeard) },
    { name: 'damper.cache.shared.bus', kind: 'gauge', unit: '1', description: '1 while the invalidation bus is up. 0: values in memory are fresh for at most freshWithoutBus.', read: (s) => (s.shared === undefined ? [] : flag(s.shared.busUp)) },
  ],
  ratios: [
    {
      name: 'damper.cache.origin_amplification',
      description: 'Read-driven loads (not warm-up) ÷ requests over the ratio window. Rising towards 1 or above: every read is becoming an origin query (the loop of Facebook 2010).',
      numerator: (s) => s.loads - s.warmLoads,
      denominator: (s) => s.requests,
    },
    {
      name: 'damper.cache.stale_ratio',
      description: 'Stale served because the origin failed or was slow (error, backoff, timeout; not revalidate) ÷ requests over the ratio window. Rising: the cache is covering for a failing origin.',
      numerator: (s) => s.staleBy.error + s.staleBy.backoff + s.staleBy.timeout,
      denominator: (s) => s.requests,
    },
  ],
  histograms: [
    {
      name: 'damper.cache.load.duration',
      unit: 's',
      description: 'How long loads took, from their start to their value or failure (damper.result: success, error). A rising tail: the origin is slowing.',
      boundaries: DURATION_BUCKETS,
      subscribe: (t, record) => {
        const offLoad = t.on('load', ({ ms }) => record(ms / 1000, { 'damper.result': 'success' }));
        const offError = t.on('error', ({ ms }) => record(ms / 1000, { 'damper.result': 'error' }));
        const offInvalid = t.on('invalid', ({ ms }) => record(ms / 1000, { 'damper.result': 'error' }));
        return () => {
          offLoad();
          offError();
          offInvalid();
        };
      },
    },
  ],
};

const BREAKER_STATES = ['closed', 'open', 'half-open'] as const;

const breaker: TargetSpec<CircuitBreaker, BreakerStats> = {
  kind: 'CircuitBreaker',
  matches: (t): t is CircuitBreaker => t instanceof CircuitBreaker,
  stats: (t) => t.stats(),
  observed: [
    { name: 'damper.breaker.state', kind: 'gauge', unit: '1', description: '1 for the state the breaker is in (damper.state: closed, open, half-open), 0 for the others. Open: calls fail fast; flapping: the dependency is on the edge.', read: (s) => BREAKER_STATES.map((state) => [flag(s.state === state), { 'damper.state': state }] as const) },
    {
      name: 'damper.breaker.calls',
      kind: 'counter',
      unit: '{call}',
      description: 'Calls by outcome (damper.result: success, failure, rejected). Rising rejected: the breaker is open and shedding calls its dependency cannot take.',
      read: (s) => split('damper.result', { success: s.succeeded, failure: s.failed, rejected: s.rejected }),
    },
    { name: 'damper.breaker.trips', kind: 'counter', unit: '{trip}', description: 'Times the breaker opened. Rising steadily: the dependency keeps failing its probes.', read: (s) => s.trips },
  ],
  ratios: [],
  histograms: [],
};

const limiter: TargetSpec<ConcurrencyLimiter, ConcurrencyLimiterStats> = {
  kind: 'ConcurrencyLimiter',
  matches: (t): t is ConcurrencyLimiter => t instanceof ConcurrencyLimiter,
  stats: (t) => t.stats(),
  observed: [
    { name: 'damper.limiter.limit', kind: 'gauge', unit: '{call}', description: 'The concurrency limit in force. Falling (an adaptive limit): latency is rising at the dependency.', read: (s) => s.limit },
    { name: 'damper.limiter.in_flight', kind: 'updown', unit: '{call}', description: 'Calls holding a slot now. At the limit for long: demand exceeds capacity.', read: (s) => s.inFlight },
    { name: 'damper.limiter.queued', kind: 'updown', unit: '{call}', description: 'Calls waiting for a slot now. Rising: a standing queue, the start of Discord 2019’s herd if nothing bounded it.', read: (s) => s.queued },
    { name: 'damper.limiter.admitted', kind: 'counter', unit: '{call}', description: 'Calls that got a slot. Falling while demand holds: callers are being shed.', read: (s) => s.admitted },
    { name: 'damper.limiter.waited', kind: 'counter', unit: '{call}', description: 'Admitted calls that queued first. A rising share of admitted: the limit is reached often.', read: (s) => s.waited },
    { name: 'damper.limiter.shed', kind: 'counter', unit: '{call}', description: 'Calls refused, by reason (damper.reason: busy, delay, full, displaced, timeout). Rising: overload answered by shedding, lowest priority first.', read: (s) => split('damper.reason', s.shed) },
  ],
  ratios: [
    {
      name: 'damper.limiter.shed_ratio',
      description: 'Shed ÷ (admitted + shed) over the ratio window. Rising: more callers are refused than the dependency’s capacity explains; check what drives demand (retries?).',
      numerator: (s) => sum(s.shed),
      denominator: (s) => s.admitted + sum(s.shed),
    },
  ],
  histograms: [
    {
      name: 'damper.limiter.queue.delay',
      unit: 's',
      description: 'How long queued calls waited for a slot (calls admitted at once are not recorded; see damper.limiter.waited). A rising tail: queueing delay, the first sign of overload.',
      boundaries: DURATION_BUCKETS,
      subscribe: (t, record) => t.on('admitted', ({ waitedMs, priority }) => record(waitedMs / 1000, { 'damper.priority': String(priority) })),
    },
  ],
};

const rate: TargetSpec<RateLimiter, RateLimiterStats> = {
  kind: 'RateLimiter',
  matches: (t): t is RateLimiter => t instanceof RateLimiter,
  stats: (t) => t.stats(),
  observed: [
    { name: 'damper.rate_limiter.admitted', kind: 'counter', unit: '{call}', description: 'Calls that got a token. Flat at the rate while demand rises: the limit is doing its job.', read: (s) => s.admitted },
    { name: 'damper.rate_limiter.queued', kind: 'updown', unit: '{call}', description: 'Calls waiting for a token now. Rising: demand above the rate.', read: (s) => s.queued },
    { name: 'damper.rate_limiter.refused', kind: 'counter', unit: '{call}', description: 'Calls refused, by reason (damper.reason). Rising: demand above the rate the dependency was given.', read: (s) => split('damper.reason', s.refused) },
  ],
  ratios: [],
  histograms: [],
};

const retry: TargetSpec<Retry, RetryStats> = {
  kind: 'Retry',
  matches: (t): t is Retry => t instanceof Retry,
  stats: (t) => t.stats(),
  observed: [
    { name: 'damper.retry.calls', kind: 'counter', unit: '{call}', description: 'Calls (first attempts). The denominator of the retry ratio.', read: (s) => s.calls },
    { name: 'damper.retry.retries', kind: 'counter', unit: '{attempt}', description: 'Attempts after the first. Rising faster than calls: a dependency is failing and retries add load to it.', read: (s) => s.retries },
    { name: 'damper.retry.budget.refusals', kind: 'counter', unit: '{attempt}', description: 'Retries not made because the retry budget was spent. Rising: the budget is what keeps a retry storm from forming.', read: (s) => s.budgetRefusals },
    { name: 'damper.retry.abandoned', kind: 'counter', unit: '{attempt}', description: 'Attempts that ended for the caller while their task still ran. Rising: work nobody waits for is still loading the dependency.', read: (s) => s.abandoned },
    { name: 'damper.retry.abandoned.running', kind: 'updown', unit: '{attempt}', description: 'Abandoned attempts whose task has not settled. A level that stays up: a driver that ignores its abort signal.', read: (s) => s.abandonedRunning },
  ],
  ratios: [{ name: 'damper.retry.ratio', description: 'Retries ÷ first attempts over the ratio window. Rising: retries are amplifying load on a failing dependency (the sustaining effect of most metastable failures).', numerator: (s) => s.retries, denominator: (s) => s.calls }],
  histograms: [],
};

const budget: TargetSpec<RetryBudget, RetryBudgetStats> = {
  kind: 'RetryBudget',
  matches: (t): t is RetryBudget => t instanceof RetryBudget,
  stats: (t) => t.stats(),
  observed: [
    { name: 'damper.retry_budget.requests', kind: 'gauge', unit: '{call}', description: 'Requests in the budget’s window. The base the retry allowance is computed from.', read: (s) => s.requests },
    { name: 'damper.retry_budget.retries', kind: 'gauge', unit: '{attempt}', description: 'Retries spent in the budget’s window. Near the allowance: the budget is holding retries down.', read: (s) => s.retries },
    { name: 'damper.retry_budget.available', kind: 'gauge', unit: '{attempt}', description: 'Retries that may be spent now. Near zero for long: every retry beyond the floor is refused.', read: (s) => s.available },
  ],
  ratios: [],
  histograms: [],
};

const throttle: TargetSpec<AdaptiveThrottle, AdaptiveThrottleStats> = {
  kind: 'AdaptiveThrottle',
  matches: (t): t is AdaptiveThrottle => t instanceof AdaptiveThrottle,
  stats: (t) => t.stats(),
  observed: [
    { name: 'damper.throttle.calls', kind: 'counter', unit: '{call}', description: 'Calls through the throttle.', read: (s) => s.calls },
    { name: 'damper.throttle.rejected', kind: 'counter', unit: '{call}', description: 'Calls rejected locally, never sent. Rising: the backend is refusing work and the client is backing off for it.', read: (s) => s.rejected },
    { name: 'damper.throttle.rejection_probability', kind: 'gauge', unit: '1', description: 'The probability a new call is rejected locally now. Above 0: the backend accepts fewer calls than are sent.', read: (s) => s.rejectionProbability },
  ],
  ratios: [],
  histograms: [],
};

const deadline: TargetSpec<DeadlineGuard, DeadlineGuardStats> = {
  kind: 'DeadlineGuard',
  matches: (t): t is DeadlineGuard => t instanceof DeadlineGuard,
  stats: (t) => t.stats(),
  observed: [
    { name: 'damper.deadline.calls', kind: 'counter', unit: '{call}', description: 'Calls through the deadline guard.', read: (s) => s.calls },
    { name: 'damper.deadline.expired', kind: 'counter', unit: '{call}', description: 'Calls refused or ended because their deadline passed. Rising: callers give up before the work ends; work done past it is wasted.', read: (s) => s.expired },
  ],
  ratios: [],
  histograms: [],
};

const balancer: TargetSpec<Balancer<unknown>, BalancerStats> = {
  kind: 'Balancer',
  matches: (t): t is Balancer<unknown> => t instanceof Balancer,
  stats: (t) => t.stats(),
  observed: [
    { name: 'damper.balancer.picks', kind: 'counter', unit: '{call}', description: 'Calls routed to an upstream.', read: (s) => s.picks },
    { name: 'damper.balancer.unavailable', kind: 'counter', unit: '{call}', description: 'Calls refused because no upstream was routable. Any rise: no capacity left to route to.', read: (s) => s.unavailable },
    { name: 'damper.balancer.panic', kind: 'gauge', unit: '1', description: '1 while in panic (too few upstreams healthy, so all are used). Principle 5: the last capacity is never removed.', read: (s) => flag(s.panic) },
    { name: 'damper.balancer.upstream.in_flight', kind: 'updown', unit: '{call}', description: 'Calls in flight per upstream (damper.upstream). One rising alone: that upstream is slow.', read: (s) => s.upstreams.map((u) => [u.inFlight, { 'damper.upstream': u.id }] as const) },
    { name: 'damper.balancer.upstream.ejected', kind: 'gauge', unit: '1', description: '1 while an upstream is ejected (damper.upstream). Several at once: look at what they share before the last one goes (Missourian 2010).', read: (s) => s.upstreams.map((u) => [flag(u.ejected), { 'damper.upstream': u.id }] as const) },
    { name: 'damper.balancer.upstream.slow_start', kind: 'gauge', unit: '1', description: '1 while an upstream ramps up after joining or returning (damper.upstream). Principle 7: cold is a state.', read: (s) => s.upstreams.map((u) => [flag(u.slowStart), { 'damper.upstream': u.id }] as const) },
    { name: 'damper.balancer.upstream.ejections', kind: 'counter', unit: '{ejection}', description: 'Times each upstream was ejected (damper.upstream). Rising for one: a flapping upstream.', read: (s) => s.upstreams.map((u) => [u.ejections, { 'damper.upstream': u.id }] as const) },
  ],
  ratios: [],
  histograms: [],
};

function sum(counts: { readonly [k: string]: number }): number {
  let total = 0;
  for (const k of Object.keys(counts)) total += counts[k]!;
  return total;
}

/**
 * A target spec with its types hidden, so specs of different targets sit in
 * one list: `open` hands the spec, and the target it has matched, to `use`.
 */
export interface KnownTarget {
  readonly kind: string;
  readonly matches: (target: unknown) => boolean;
  /** Every instrument it makes, for the docs' table and its test. */
  readonly instruments: readonly InstrumentRow[];
  readonly open: <R>(target: unknown, use: <T, S>(spec: TargetSpec<T, S>, target: T) => R) => R;
}

/** One row of docs/observability.md's table. */
export interface InstrumentRow {
  readonly name: string;
  readonly kind: 'counter' | 'updown' | 'gauge' | 'histogram';
  readonly unit: string;
  readonly description: string;
}

function known<T, S>(spec: TargetSpec<T, S>): KnownTarget {
  return {
    kind: spec.kind,
    matches: spec.matches,
    instruments: [
      ...spec.observed.map(({ name, kind, unit, description }) => ({ name, kind, unit, description })),
      ...spec.ratios.map(({ name, description }) => ({ name, kind: 'gauge' as const, unit: '1', description })),
      ...spec.histograms.map(({ name, unit, description }) => ({ name, kind: 'histogram' as const, unit, description })),
    ],
    open: (target, use) => {
      if (!spec.matches(target)) throw new TypeError(`not a ${spec.kind}`);
      return use(spec, target);
    },
  };
}

/** Every kind of target `instrument()` knows, with what it attaches to each. */
export const TARGETS: readonly KnownTarget[] = [cache, breaker, limiter, rate, retry, budget, throttle, deadline, balancer].map((spec) => known(spec as TargetSpec<unknown, unknown>));
