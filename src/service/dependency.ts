import { Balancer, type BalancerOptions, type BalancerStats, type Upstream } from '../balance/balancer.js';
import { arrayOption, boolean, clockOption, duration, isInstance, oneOf, optionalFunction, optionsObject, or } from '../config.js';
import { ConfigError, describe } from '../errors.js';
import { type BreakerStats, CircuitBreaker, type CircuitBreakerOptions } from '../guard/breaker.js';
import { RetryBudget, type RetryBudgetStats } from '../guard/budget.js';
import { classify, isAbort } from '../guard/classify.js';
import { type Gate, type GuardContext, NEVER_ABORTS } from '../guard/guard.js';
import { checkPriority, type Priority } from '../guard/priority.js';
import { Retry, type RetryOptions, type RetryStats } from '../guard/retry.js';
import { AdaptiveThrottle, type AdaptiveThrottleOptions, type AdaptiveThrottleStats } from '../guard/throttle.js';
import { type Clock } from '../time/clock.js';
import { type Attempt, Route } from './route.js';
import { type HedgeOptions, type HedgeStats, Hedging } from './hedge.js';
import { currentRequestScope } from './scope.js';

export { type Attempt } from './route.js';

/** Options for {@link Dependency}. */
export interface DependencyOptions<U> {
  /** The servers that serve this dependency, each with an `id` and the `target` an attempt is sent to. At least one. */
  upstreams: readonly Upstream<U>[];
  /**
   * The budget every retry to this dependency is drawn from. Default: one of
   * its own. Share one instance among every client of the same dependency in
   * the process, so the bound holds over all of them.
   */
  budget?: RetryBudget;
  /** Retry settings (`maxAttempts`, `baseDelay`, `maxDelay`, `attemptTimeout`, …). The budget and clock are the dependency's. Default: `Retry`'s. */
  retry?: Omit<RetryOptions, 'budget' | 'clock'>;
  /** Settings of the breaker made for each upstream; `false` for none. Default: `CircuitBreaker`'s. */
  breaker?: Omit<CircuitBreakerOptions, 'clock' | 'isFailure'> | false;
  /** Settings of the adaptive throttle made for each upstream; `false` for none. Default: `AdaptiveThrottle`'s. */
  throttle?: Omit<AdaptiveThrottleOptions, 'clock'> | false;
  /** Balancer settings: outlier detection, health checks, panic threshold, slow start, `maxOutstanding`. */
  balancer?: Omit<BalancerOptions<U>, 'upstreams' | 'clock' | 'isFailure'>;
  /**
   * The deadline of a call that has none from its caller, ms from when it is
   * made. Default: none. A call made while serving an admitted request takes
   * that one's deadline (see `RequestScope`); with both, the earlier.
   */
  timeout?: number;
  /** Priority of a call that names none and serves no admitted request. Default `normal`. */
  priority?: Priority;
  /**
   * Whether an attempt's error counts against the upstream it went to: its
   * breaker, and the balancer's outlier detection. Default: every error but
   * the caller's own abort (a connection refused, an attempt cut at its
   * timeout: a hung upstream answers nothing else). What a transport calls
   * an answer rather than a failure it resolves with, not rejects.
   */
  countsAgainst?: (error: unknown) => boolean;
  /**
   * How many upstreams open breakers may take out. `'bounded'` (default): no
   * more than the balancer may eject (`maxEjectionShare`, and never every
   * one); past that, an attempt goes to an upstream whose breaker is open
   * through its throttle alone, which sheds in proportion to what the
   * upstream still serves. `'unbounded'`: every open breaker refuses, so a
   * dependency with one upstream is refused whole while its breaker is open:
   * for a dependency that must not be called while it fails, knowing a
   * brownout (half the capacity left) then becomes an outage.
   */
  breakerReach?: 'bounded' | 'unbounded';
  /**
   * Hedged requests: after a delay with no answer (`after` ms, or a
   * `percentile` of recent attempts), one more attempt to another upstream;
   * the first good answer wins, the other is cancelled. Only for calls that
   * may be repeated, never to an upstream the call already waits on, and each
   * hedge spent from `budget` like a retry: unbudgeted, hedging is a retry
   * storm (every call past the delay doubles its load). Default: none.
   */
  hedge?: HedgeOptions | false;
  clock?: Clock;
}

/** Per-call options of {@link Dependency.call}. */
export interface DependencyCallOptions {
  /** Aborts the call: its attempt in flight, and any retry not yet sent. */
  signal?: AbortSignal;
  /** Instant on the dependency's clock after which the call is worthless. The earlier of it, `timeout` and the request being served. */
  deadline?: number;
  /** Default: the request being served's, else the dependency's `priority`. */
  priority?: Priority;
  /**
   * Whether the call may be sent more than once. Default true. A call that
   * changes something (a payment, a POST that is not keyed) must say false:
   * a retried attempt that had reached the upstream does its work twice.
   */
  idempotent?: boolean;
}

/** What a {@link Dependency} has done, from {@link Dependency.stats}. */
export interface DependencyStats {
  readonly balancer: BalancerStats;
  /** The retries of idempotent calls, and the single attempts of the rest: `calls` is every call. */
  readonly retry: RetryStats;
  readonly budget: RetryBudgetStats;
  /** Each upstream's breaker and throttle, in the order given (absent when turned off). */
  readonly upstreams: readonly { readonly id: string; readonly breaker: BreakerStats | undefined; readonly throttle: AdaptiveThrottleStats | undefined }[];
  /** Hedges sent, won, and not sent (budget, no other upstream); absent without hedging. */
  readonly hedges: HedgeStats | undefined;
}

/**
 * One call as the dependency's guards see it: its `Retry` context itself
 * (so a rule about the call reads it with no lookup).
 *
 * @internal
 */
export interface DependencyCall extends GuardContext {
  readonly retryable: boolean;
  /** Set once the answer has begun to reach the caller: from then on no attempt may follow. */
  delivering: boolean;
  /**
   * Aborts the call. A transport that is handed an `abort()` rather than a
   * signal (undici's interceptor) starts a {@link Dependency.bare} call on
   * `NEVER_ABORTS`, and makes its signal only when it needs one: it puts it
   * here with {@link Dependency.arm} before the first attempt settles, when
   * nothing but that attempt has been given the signal.
   */
  signal: AbortSignal;
}

/**
 * One upstream's guards, and the gates a route enters for an attempt to it.
 *
 * @internal
 */
export interface UpstreamGates {
  readonly breaker: CircuitBreaker | undefined;
  readonly throttle: AdaptiveThrottle | undefined;
  /** Its throttle, then its breaker (those it has), entered in this order. */
  readonly all: readonly Gate[];
  /** All but its breaker: the way past a breaker that would take out more than the bound; none when breakers are unbounded. */
  readonly pastBreaker: readonly Gate[] | undefined;
}

/**
 * One dependency (a service behind a set of upstreams) and the guards in
 * front of it, whatever carries its calls: the attempt is a function the
 * caller supplies, `(upstream, signal) => Promise<answer>`. damper/http's
 * undici interceptor and `damperFetch` are adapters over it (as
 * `HttpDependency`); a gRPC client, a database pool per replica or the lab's
 * simulated network use it as it is. So the composition a service deploys
 * is one thing, written once, and the lab runs that very thing.
 *
 * Each call goes through, outermost first:
 * - **`Retry` under one {@link RetryBudget}** (principle 3): idempotent
 *   calls only; a server's retry-after honoured; a retry goes to another
 *   upstream than the one that just failed it whenever another is routable.
 *   Retries are the sustaining effect of most metastable failures (Huang et
 *   al., OSDI'22); "3 retries per tier" is how a slowdown at the bottom of a
 *   call graph becomes 16× the load on it.
 * - **The {@link Balancer}**: power of two choices over the upstreams,
 *   outlier ejection bounded by `maxEjectionShare` and never of the last one
 *   (principle 5: the Missourian's balancer ejected both servers).
 * - **Per upstream: an `AdaptiveThrottle`, then a `CircuitBreaker`**, so one
 *   failing upstream is refused locally and the others go on. An upstream
 *   whose breaker or throttle refuses is skipped for this attempt, not
 *   counted against it, and the next one is tried; when every upstream
 *   refuses, the call fails fast with the refusal (`BreakerOpenError` or
 *   `OverloadedError`; principle 4). But open breakers are held to the
 *   balancer's bound on ejection (`maxEjectionShare`, never every upstream):
 *   past it, an attempt goes to an upstream whose breaker is open through
 *   its throttle alone, which sheds in proportion to what the dependency
 *   still serves. A breaker on the only upstream would otherwise refuse
 *   everything whenever a brownout tripped it: the lab's retry-storm, a
 *   server at half capacity, kept 10 % of the goodput it could have had.
 * - **The deadline**, from the caller, the admitted request being served, or
 *   `timeout`: no attempt starts that cannot finish before it, and each
 *   attempt's signal aborts at it (`deadlineOf(signal)` gives the instant, to
 *   send on to the next tier).
 */
export class Dependency<U> {
  readonly budget: RetryBudget;
  readonly timeout: number | undefined;
  readonly priority: Priority | undefined;
  /** The clock deadlines are instants on: a transport reads the time left on it. */
  readonly clock: Clock;
  /** The balancer over the upstreams: subscribe to its `eject`, `restore` and `panic` events here. */
  readonly balancer: Balancer<U>;
  /** The retry of idempotent calls: its `retry`, `budgetExhausted` and `abandoned` events. */
  readonly retry: Retry;
  /** Calls that may not be repeated: one attempt, under the same deadline rules and counted by the same budget. */
  private readonly once: Retry;
  /** Each upstream's guards, by id: a fixed set, so a map and no LRU (`keyed` would move an entry on every call). */
  private readonly guards = new Map<string, UpstreamGates>();
  private readonly ids: readonly string[];
  private readonly countsAgainst: (error: unknown) => boolean;
  private readonly hedging: Hedging | undefined;

  constructor(dependencyOptions: DependencyOptions<U>) {
    if (dependencyOptions === undefined) throw new ConfigError('Dependency needs options with its upstreams');
    const options = optionsObject('Dependency options', dependencyOptions);
    this.clock = clockOption('clock', options.clock);
    const upstreams = arrayOption('upstreams', options.upstreams, 'a non-empty array of upstreams');
    if (upstreams.length === 0) throw new ConfigError('upstreams must be a non-empty array: a dependency served by nothing cannot be called');
    if (options.budget !== undefined && !isInstance(options.budget, RetryBudget)) throw new ConfigError('budget must be a RetryBudget');
    this.budget = options.budget ?? new RetryBudget({ clock: this.clock });
    this.countsAgainst = optionalFunction('countsAgainst', options.countsAgainst) ?? notAnAbort;
    const retryOptions = optionsObject('retry', options.retry);
    // The dependency's own error (a 503 it answered) is retried; everything Retry never retries stays so.
    this.retry = new Retry({ ...retryOptions, budget: this.budget, clock: this.clock, retryOn: retryOnOf(retryOptions.retryOn) });
    this.once = new Retry({ ...retryOptions, maxAttempts: 1, budget: this.budget, clock: this.clock });
    this.timeout = options.timeout === undefined ? undefined : duration('timeout', options.timeout, { positive: true, timer: true });
    this.priority = checkPriority('priority', options.priority);
    // The balancer checks the upstreams' ids, weights and limits.
    this.balancer = new Balancer<U>({ ...optionsObject('balancer', options.balancer), upstreams, clock: this.clock });
    this.ids = upstreams.map((u) => u.id);
    const breakerOptions = options.breaker === false ? false : optionsObject('breaker', options.breaker);
    const throttleOptions = options.throttle === false ? false : optionsObject('throttle', options.throttle);
    const reach = oneOf('breakerReach', or(options.breakerReach, 'bounded'), ['bounded', 'unbounded']);
    // Built now, for every upstream: a bad breaker or throttle option is a ConfigError here, not at the first call.
    for (const id of this.ids) {
      const breaker = breakerOptions === false ? undefined : new CircuitBreaker({ ...breakerOptions, clock: this.clock, isFailure: this.countsAgainst });
      const throttle = throttleOptions === false ? undefined : new AdaptiveThrottle({ isRejection: refusedByUpstream, ...throttleOptions, clock: this.clock });
      const pastBreaker = throttle === undefined ? [] : [throttle];
      this.guards.set(id, { breaker, throttle, all: breaker === undefined ? pastBreaker : [...pastBreaker, breaker], pastBreaker: reach === 'unbounded' ? undefined : pastBreaker });
    }
    this.hedging = options.hedge === undefined || options.hedge === false ? undefined : new Hedging(options.hedge, this.budget, this.clock);
  }

  /**
   * Calls the dependency: `attempt` is called once per attempt with the
   * upstream picked for it and the attempt's signal (its timeout, the
   * deadline, the caller's abort), inside that upstream's guards and the
   * retry. Rejects with the last attempt's error, or with a local refusal
   * when nothing could be sent (`BreakerOpenError`, `OverloadedError`,
   * `DeadlineExceededError`). Bad options reject with a `ConfigError`.
   */
  call<T>(attempt: Attempt<U, T>, options?: DependencyCallOptions): Promise<T> {
    let call: DependencyCall;
    try {
      if (typeof attempt !== 'function') throw new ConfigError(`Dependency.call: the attempt must be a function (upstream, signal) => Promise, got ${describe(attempt)}`);
      const o = optionsObject('call options', options);
      if (o.signal !== undefined && !isInstance(o.signal, AbortSignal)) throw new ConfigError('signal must be an AbortSignal');
      if (o.deadline !== undefined && (typeof o.deadline !== 'number' || Number.isNaN(o.deadline))) throw new ConfigError(`deadline must be an instant (a number of ms on the dependency's clock), got ${describe(o.deadline)}`);
      const idempotent = o.idempotent === undefined ? true : boolean('idempotent', o.idempotent);
      call = this.callOf(o.deadline, checkPriority('priority', o.priority), o.signal ?? NEVER_ABORTS, idempotent);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.send(call, attempt);
  }

  /**
   * A call's context: its own deadline and priority (the caller's explicit
   * word), else the admitted request being served, else the dependency's
   * defaults; the earliest deadline wins, and the served request's abort
   * ends the call too (work for a caller who has gone is dropped).
   *
   * @internal
   */
  callOf(deadline: number | undefined, priority: Priority | undefined, signal: AbortSignal, retryable: boolean): DependencyCall {
    const scope = currentRequestScope();
    const reads = this.timeout !== undefined || scope?.deadline !== undefined;
    const now = reads ? this.clock.now() : 0;
    if (this.timeout !== undefined) deadline = Math.min(deadline ?? Infinity, now + this.timeout);
    if (scope !== undefined) {
      // Converted through the time left: the scope's clock need not be this one.
      if (scope.deadline !== undefined) deadline = Math.min(deadline ?? Infinity, now + (scope.deadline - scope.clock.now()));
      signal = either(signal, scope.signal);
    }
    return { key: '', wait: true, signal, priority: priority ?? scope?.priority ?? this.priority, deadline, retryable, delivering: false };
  }

  /**
   * Whether `call`'s first attempt needs no signal: nothing aborts it but its
   * caller (no request being served), and it has no time limit (no deadline,
   * no `attemptTimeout`) and no hedge. Such a call may start on
   * `NEVER_ABORTS` and be given its caller's signal later ({@link arm}): a
   * signal costs ~4–5 µs on Node 20, the largest share of what a request
   * through damper/http cost beyond undici's own.
   *
   * @internal
   */
  bare(call: DependencyCall): boolean {
    return call.signal === NEVER_ABORTS && call.deadline === undefined && (call.retryable ? this.retry : this.once).attemptTimeout === undefined && (this.hedging === undefined || !call.retryable);
  }

  /** Adds the caller's `signal` to a call made without it (see {@link DependencyCall.signal}). @internal */
  arm(call: DependencyCall, signal: AbortSignal): void {
    call.signal = either(signal, call.signal);
  }

  /** Sends one call whose context is made (see {@link Dependency.callOf}). @internal */
  send<T>(call: DependencyCall, attempt: Attempt<U, T>): Promise<T> {
    const route = new Route(this.balancer, this.guards, call, attempt, this.countsAgainst, call.retryable ? this.hedging : undefined, this.clock);
    return (call.retryable ? this.retry : this.once).run(route.attempt, call);
  }

  /** The balancer, the retries and budget, and each upstream's breaker and throttle now. */
  stats(): DependencyStats {
    return {
      balancer: this.balancer.stats(),
      retry: sum(this.retry.stats(), this.once.stats()),
      budget: this.budget.stats(),
      upstreams: this.ids.map((id) => {
        const g = this.guards.get(id)!;
        return { id, breaker: g.breaker?.stats(), throttle: g.throttle?.stats() };
      }),
      hedges: this.hedging?.stats(),
    };
  }

  /** Stops the balancer's timers (ejections, health checks). Calls still route. Idempotent. */
  close(): void {
    this.balancer.close();
  }
}

/** A signal that aborts when either does: one of them when the other never aborts. */
function either(a: AbortSignal, b: AbortSignal): AbortSignal {
  if (a === NEVER_ABORTS) return b;
  return b === NEVER_ABORTS ? a : AbortSignal.any([a, b]);
}

/** The default `countsAgainst`: everything but the caller's own abort. */
function notAnAbort(error: unknown): boolean {
  return !isAbort(error);
}

/**
 * The throttle's `isRejection` here: the upstream refused the call (a 503
 * or 429, an answer that never came in time), not the breaker inside the
 * throttle. The default would also count the breaker's `BreakerOpenError`, so
 * every call the open breaker turned away, which never reached the upstream,
 * kept the throttle rejecting after the upstream had recovered (found by the
 * retry-storm test, docs/http-retry-storm.md). Such a call counts as accepted
 * instead: the throttle has no "did not happen", and an open breaker already
 * refuses everything, so the throttle need not add to it.
 */
function refusedByUpstream(error: unknown): boolean {
  const outcome = classify(error);
  return outcome === 'overloaded' || outcome === 'timeout';
}

/**
 * Retry's `retryOn`: never a call whose answer has begun to reach its
 * caller (a failure after that, a body cut or the deadline mid-stream, is
 * the caller's to see), then the user's rule, if any.
 */
function retryOnOf(user: ((error: unknown, context: GuardContext) => boolean) | undefined): (error: unknown, context: GuardContext) => boolean {
  return (error, context) => (context as Partial<DependencyCall>).delivering !== true && (user === undefined || user(error, context));
}

function sum(a: RetryStats, b: RetryStats): RetryStats {
  return { calls: a.calls + b.calls, retries: a.retries + b.retries, budgetRefusals: a.budgetRefusals + b.budgetRefusals, abandoned: a.abandoned + b.abandoned, abandonedRunning: a.abandonedRunning + b.abandonedRunning };
}
