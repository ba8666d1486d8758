/**
 * damper: a data-access tier that cannot fall into the feedback loops of
 * Facebook 2010, Discord 2019 and the Columbia Missourian 2010.
 * See docs/design.md for the principles each export answers to.
 */
export { Cache, type CacheEvents, type Loader, type LoaderContext, type StaleReason } from './cache/cache.js';
export { type CacheOptions, type LoadOptions } from './cache/options.js';
export { type CacheStats, type SharedTierStats } from './cache/stats.js';
export { type RestoreOptions, type RestoreSummary, type Snapshot, type SnapshotEntry, SNAPSHOT_FORMAT, SNAPSHOT_VERSION } from './cache/snapshot.js';
export { type SharedTierOptions } from './cache/shared-tier.js';
export { type BusCause } from './cache/bus.js';
export { type Validator } from './cache/validate.js';
export { type WarmKeyOutcome, type WarmOptions, type WarmSummary } from './cache/warm.js';
export { AbortedError, ArgumentError, BreakerOpenError, ConfigError, DamperError, DeadlineExceededError, LeaseBackoffError, LoaderError, HeaderError, LoadTimeoutError, MissingPeerError, OverloadedError, SharedTierError, ValidationError } from './errors.js';
export { Events, type ListenerErrorOption } from './events.js';
export { onAbort } from './guard/abort.js';
export { Backoff, type BackoffOptions } from './guard/backoff.js';
export { type BreakerEvents, type BreakerReason, type BreakerState, type BreakerStats, CircuitBreaker, type CircuitBreakerOptions } from './guard/breaker.js';
export { ConsecutiveFailuresRule, type ConsecutiveFailuresOptions } from './guard/consecutive-failures.js';
export { FailureRateRule, type FailureRateOptions } from './guard/failure-rate.js';
export { type SampledCallsOptions } from './guard/sampled-calls.js';
export { SlowCallRateRule, type SlowCallRateOptions } from './guard/slow-call-rate.js';
export { type TripCounts, type TripReason, type TripRule } from './guard/trip-rule.js';
/**
 * The library's one judgement of an outcome, public because a user's own
 * guard, metric or log asks the same question the library does ("did the
 * dependency fail, or did we refuse, or did the caller leave?") and must get
 * the same answer, or its counts and the breaker's disagree.
 */
export { classify, type Outcome } from './guard/classify.js';
export { RetryBudget, type RetryBudgetOptions, type RetryBudgetStats } from './guard/budget.js';
export { deadlineOf, deadlineSignal, effectiveDeadline, scopedSignal, type ScopedSignal } from './guard/deadline.js';
export { DeadlineGuard, type DeadlineGuardOptions, type DeadlineGuardStats } from './guard/deadline-guard.js';
export { callContext, type CallOptions, type Guard, type GuardContext, guarded, pipeline } from './guard/guard.js';
export { keyed, type KeyedOptions } from './guard/keyed.js';
export { AimdLimit, type AimdOptions, GradientLimit, type GradientOptions, type LimitAlgorithm } from './guard/limit-algorithms.js';
export { type QueueAdmission, type QueuedCall } from './guard/wait-queue.js';
export { ConcurrencyLimiter, type ConcurrencyLimiterEvents, type ConcurrencyLimiterOptions, type ConcurrencyLimiterStats, type ShedDelays, type ShedReason } from './guard/limiter.js';
export { type Priority, priorityRank } from './guard/priority.js';
export { RateLimiter, type RateLimiterEvents, type RateLimiterOptions, type RateLimiterStats, type RateRefusalReason } from './guard/rate.js';
export { Retry, type RetryEvents, type RetryOptions, type RetryStats } from './guard/retry.js';
export { AdaptiveThrottle, type AdaptiveThrottleEvents, type AdaptiveThrottleOptions, type AdaptiveThrottleStats } from './guard/throttle.js';
export { type LeaseGrant, type SharedBackend, type SharedRead } from './stores/backend.js';
export { InMemorySharedStore, type InMemorySharedStoreOptions } from './stores/in-memory-shared.js';
export { SharedSlots } from './stores/shared-slots.js';
export { MemoryStore, type MemoryStoreOptions } from './stores/memory.js';
export { type Clock, MAX_TIMER_MS, sleep, type Timer } from './time/clock.js';
export { seededRandom } from './time/random.js';
export { forbidRealTime, type RealTimeBan, RealTimeInSimulationError } from './time/real-time-guard.js';
export { createSystemClock, systemClock } from './time/system.js';
export { VirtualClock, type VirtualClockOptions } from './time/virtual.js';
export { Balancer, type BalancerEvents, type BalancerOptions, type PickOptions, type BalancerSnapshot, type BalancerStats, type PickedUpstream, type Upstream, type UpstreamSnapshot } from './balance/balancer.js';
export { type Attempt, Dependency, type DependencyCallOptions, type DependencyOptions, type DependencyStats } from './service/dependency.js';
export { type HedgeOptions, type HedgeStats } from './service/hedge.js';
export { Admission, type AdmissionOptions, type AdmissionRequest, type AdmissionStats, type Door, type Refusal } from './service/admission.js';
export { currentRequestScope, type RequestScope, runInRequestScope } from './service/scope.js';
export { HealthChecker, type HealthCheckOptions, type ProbeResult } from './balance/health.js';
export { type OutlierConfig, outlierConfig, type OutlierOptions } from './balance/outliers.js';
