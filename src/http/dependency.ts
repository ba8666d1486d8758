import { Balancer, type BalancerOptions, type BalancerStats, type PickedUpstream } from '../balance/balancer.js';
import { arrayOption, clockOption, duration, isInstance, optionsObject, or } from '../config.js';
import { ConfigError, describe, OverloadedError } from '../errors.js';
import { type BreakerStats, CircuitBreaker, type CircuitBreakerOptions } from '../guard/breaker.js';
import { RetryBudget, type RetryBudgetStats } from '../guard/budget.js';
import { isAbort, isLoadTimeout, isOverloadSignal, isRefusal } from '../guard/classify.js';
import { type Guard, type GuardContext, pipeline, startTask } from '../guard/guard.js';
import { keyed } from '../guard/keyed.js';
import { checkPriority, type Priority } from '../guard/priority.js';
import { Retry, type RetryOptions, type RetryStats } from '../guard/retry.js';
import { AdaptiveThrottle, type AdaptiveThrottleOptions, type AdaptiveThrottleStats } from '../guard/throttle.js';
import { type Clock } from '../time/clock.js';
import { DEADLINE_HEADER, headerNameOption, PRIORITY_HEADER } from './headers.js';

/** One upstream of an {@link HttpDependency}: an origin (`http://10.0.0.7:8080`), and its share. */
export interface HttpUpstream {
  /** `scheme://host[:port]`, no path: what the request's own origin is replaced by. */
  readonly origin: string;
  /** Name in events, stats and snapshots. Default: the origin. */
  readonly id?: string;
  /** Relative share of traffic. Default 1. */
  readonly weight?: number;
  /** Most requests in flight to it; beyond it requests go elsewhere or are shed. Default: the balancer's. */
  readonly maxOutstanding?: number;
}

/** Options for {@link HttpDependency}. */
export interface HttpDependencyOptions {
  /** The servers that serve this dependency: origins, or {@link HttpUpstream}s. At least one. */
  upstreams: readonly (string | HttpUpstream)[];
  /**
   * The budget every retry to this dependency is drawn from. Default: one of
   * its own. Share one instance among every client of the same dependency in
   * the process (an interceptor and a fetch wrapper, say), so the bound holds
   * over all of them.
   */
  budget?: RetryBudget;
  /** Retry settings (`maxAttempts`, `baseDelay`, `maxDelay`, `attemptTimeout`, …). The budget and clock are the dependency's. Default: `Retry`'s. */
  retry?: Omit<RetryOptions, 'budget' | 'clock'>;
  /**
   * Methods retried. Default the idempotent ones of RFC 9110: GET, HEAD,
   * OPTIONS, TRACE, PUT, DELETE. A POST is sent once unless listed here: a
   * retried POST that had reached the server does its work twice.
   */
  retryMethods?: readonly string[];
  /**
   * Response statuses that count as the upstream failing the request, retried
   * (within the budget, elsewhere when another upstream is routable) and
   * counted against it. Default 500, 502, 503, 504 and 429. When no retry
   * follows, the last such response is what the caller receives: it is an
   * answer, not an exception.
   */
  retryStatuses?: readonly number[];
  /** Settings of the breaker made for each upstream; `false` for none. Default: `CircuitBreaker`'s. */
  breaker?: Omit<CircuitBreakerOptions, 'clock' | 'isFailure'> | false;
  /** Settings of the adaptive throttle made for each upstream; `false` for none. Default: `AdaptiveThrottle`'s. */
  throttle?: Omit<AdaptiveThrottleOptions, 'clock'> | false;
  /** Balancer settings: outlier detection, panic threshold, slow start, `maxOutstanding`. */
  balancer?: Omit<BalancerOptions<HttpUpstream>, 'upstreams' | 'clock' | 'isFailure'>;
  /**
   * The deadline of a request that has none from its caller, ms from when it
   * is sent. Default: none. A request made while serving an incoming one
   * takes that one's deadline (see `RequestScope`); with both, the earlier.
   */
  timeout?: number;
  /** Priority of a request that names none and serves no incoming request. Default `normal`. */
  priority?: Priority;
  /** Header the deadline is sent in, as the ms left. Default {@link DEADLINE_HEADER}. */
  deadlineHeader?: string;
  /** Header the priority is sent in. Default {@link PRIORITY_HEADER}. */
  priorityHeader?: string;
  clock?: Clock;
}

/** What an {@link HttpDependency} has done, from {@link HttpDependency.stats}. */
export interface HttpDependencyStats {
  readonly balancer: BalancerStats;
  /** The retries of idempotent requests, and the single attempts of the rest: `calls` is every request. */
  readonly retry: RetryStats;
  readonly budget: RetryBudgetStats;
  /** Each upstream's breaker and throttle, in the order given (absent when turned off). */
  readonly upstreams: readonly { readonly id: string; readonly breaker: BreakerStats | undefined; readonly throttle: AdaptiveThrottleStats | undefined }[];
}

/**
 * One request as the dependency's guards see it: its `Retry` context itself
 * (so a rule about the call reads it with no lookup), made by the interceptor.
 *
 * @internal
 */
export interface OutgoingCall extends GuardContext {
  readonly retryable: boolean;
  /** Set once the response has begun to reach the caller: from then on no attempt may follow. */
  delivering: boolean;
}

/** One attempt: send the request to `upstream`, on `signal`; settle when its outcome is known. @internal */
export type Attempt<T> = (upstream: PickedUpstream<HttpUpstream>, signal: AbortSignal) => Promise<T>;

const IDEMPOTENT = ['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE'];
const RETRY_STATUSES = [500, 502, 503, 504, 429];

/** The per-upstream guards, kept beside `keyed` so their stats can be read. */
interface UpstreamGuards {
  readonly breaker: CircuitBreaker | undefined;
  readonly throttle: AdaptiveThrottle | undefined;
}

/**
 * One dependency reached over HTTP (a service behind a set of upstreams) and
 * the guards in front of it, shared by every request to it however it is
 * sent: an undici interceptor (`damperInterceptor`) or `damperFetch`.
 *
 * Each request goes through, outermost first:
 * - **`Retry` under one {@link RetryBudget}** (principle 3): idempotent
 *   methods only unless told; `Retry-After` honoured; a retry goes to another
 *   upstream than the one that just failed it whenever another is routable.
 *   Retries are the sustaining effect of most metastable failures (Huang et
 *   al., OSDI'22); "3 retries per tier" is how a slowdown at the bottom of a
 *   call graph becomes 16× the load on it.
 * - **The {@link Balancer}**: power of two choices over the upstreams,
 *   outlier ejection bounded by `maxEjectionShare` and never of the last one
 *   (principle 5: the Missourian's balancer ejected both servers).
 * - **Per upstream (`keyed`): an `AdaptiveThrottle`, then a
 *   `CircuitBreaker`**, so one failing upstream is refused locally and the
 *   others go on. An upstream whose breaker or throttle refuses is skipped
 *   for this attempt, not counted against it, and the next one is tried; only
 *   when every upstream refuses does the request fail fast with the refusal
 *   (`BreakerOpenError` or `OverloadedError`; principle 4).
 * - **The deadline**, from the incoming request being served, the request's
 *   own header, or `timeout`: no attempt starts that cannot finish before it,
 *   each attempt is cut at it, and the time left is sent on in a header, so
 *   the next tier drops work whose caller has gone.
 */
export class HttpDependency {
  readonly budget: RetryBudget;
  readonly deadlineHeader: string;
  readonly priorityHeader: string;
  readonly timeout: number | undefined;
  readonly priority: Priority | undefined;
  /** @internal */
  readonly clock: Clock;
  /** The balancer over the upstreams: subscribe to its `eject`, `restore` and `panic` events here. */
  readonly balancer: Balancer<HttpUpstream>;
  /** The retry of idempotent requests: its `retry`, `budgetExhausted` and `abandoned` events. */
  readonly retry: Retry;
  /** Non-idempotent requests: one attempt, under the same deadline rules and counted by the same budget. */
  private readonly once: Retry;
  private readonly retryMethods: ReadonlySet<string>;
  private readonly retryStatuses: ReadonlySet<number>;
  private readonly perUpstream: Guard;
  private readonly guards = new Map<string, UpstreamGuards>();
  private readonly ids: readonly string[];

  constructor(dependencyOptions: HttpDependencyOptions) {
    if (dependencyOptions === undefined) throw new ConfigError('HttpDependency needs options with its upstreams');
    const options = optionsObject('HttpDependency options', dependencyOptions);
    this.clock = clockOption('clock', options.clock);
    const upstreams = arrayOption('upstreams', options.upstreams, 'a non-empty array of origins').map((u, i) => upstreamOf(u, i));
    if (upstreams.length === 0) throw new ConfigError('upstreams must be a non-empty array of origins: a dependency served by nothing cannot be called');
    if (options.budget !== undefined && !isInstance(options.budget, RetryBudget)) throw new ConfigError('budget must be a RetryBudget');
    this.budget = options.budget ?? new RetryBudget({ clock: this.clock });
    const retryOptions = optionsObject('retry', options.retry);
    // The dependency's own error (a 503 it answered) is retried; everything Retry never retries stays so.
    this.retry = new Retry({ ...retryOptions, budget: this.budget, clock: this.clock, retryOn: retryOnOf(retryOptions.retryOn) });
    this.once = new Retry({ ...retryOptions, maxAttempts: 1, budget: this.budget, clock: this.clock });
    this.retryMethods = new Set(arrayOption('retryMethods', options.retryMethods ?? IDEMPOTENT, 'an array of method names').map((m, i) => methodName(m, i)));
    this.retryStatuses = new Set(arrayOption('retryStatuses', options.retryStatuses ?? RETRY_STATUSES, 'an array of status codes').map((s, i) => statusCode(s, i)));
    this.timeout = options.timeout === undefined ? undefined : duration('timeout', options.timeout, { positive: true, timer: true });
    this.priority = checkPriority('priority', options.priority);
    this.deadlineHeader = headerNameOption('deadlineHeader', or(options.deadlineHeader, DEADLINE_HEADER));
    this.priorityHeader = headerNameOption('priorityHeader', or(options.priorityHeader, PRIORITY_HEADER));
    const balancerOptions = optionsObject('balancer', options.balancer);
    this.balancer = new Balancer<HttpUpstream>({
      ...balancerOptions,
      upstreams: upstreams.map((u) => ({ id: u.id ?? u.origin, target: u, ...(u.weight === undefined ? {} : { weight: u.weight }), ...(u.maxOutstanding === undefined ? {} : { maxOutstanding: u.maxOutstanding }) })),
      clock: this.clock,
    });
    this.ids = upstreams.map((u) => u.id ?? u.origin);
    const breakerOptions = options.breaker === false ? false : optionsObject('breaker', options.breaker);
    const throttleOptions = options.throttle === false ? false : optionsObject('throttle', options.throttle);
    // Built now, for every upstream: a bad breaker or throttle option is a ConfigError here, not at the first request.
    for (const id of this.ids) {
      const breaker = breakerOptions === false ? undefined : new CircuitBreaker({ ...breakerOptions, clock: this.clock, isFailure: countsAgainstUpstream });
      const throttle = throttleOptions === false ? undefined : new AdaptiveThrottle({ isRejection: refusedByUpstream, ...throttleOptions, clock: this.clock });
      this.guards.set(id, { breaker, throttle });
    }
    this.perUpstream = keyed(
      (id) => {
        const g = this.guards.get(id)!;
        const chain = [g.throttle, g.breaker].filter((x): x is CircuitBreaker | AdaptiveThrottle => x !== undefined);
        return chain.length === 0 ? PASS : pipeline(...chain);
      },
      { maxDomains: this.ids.length },
    );
  }

  /** Whether requests with `method` are retried. @internal */
  retries(method: string): boolean {
    return this.retryMethods.has(method) || this.retryMethods.has(method.toUpperCase());
  }

  /** Whether a response with `status` counts as a failure of its upstream (and is retried when allowed). @internal */
  failsOn(status: number): boolean {
    return this.retryStatuses.has(status);
  }

  /**
   * Sends one request: `attempt` is called once per attempt with the
   * upstream picked for it, inside that upstream's guards and the retry.
   *
   * @internal
   */
  send<T>(call: OutgoingCall, attempt: Attempt<T>): Promise<T> {
    const route = new Route(this.balancer, this.perUpstream, call, attempt);
    return (call.retryable ? this.retry : this.once).run(route.attempt, call);
  }

  /** The balancer, the retries and budget, and each upstream's breaker and throttle now. */
  stats(): HttpDependencyStats {
    return {
      balancer: this.balancer.stats(),
      retry: sum(this.retry.stats(), this.once.stats()),
      budget: this.budget.stats(),
      upstreams: this.ids.map((id) => {
        const g = this.guards.get(id)!;
        return { id, breaker: g.breaker?.stats(), throttle: g.throttle?.stats() };
      }),
    };
  }

  /** Stops the balancer's timers (ejections, health checks). Requests still route. Idempotent. */
  close(): void {
    this.balancer.close();
  }
}

/** A guard that adds nothing: for a dependency with both breaker and throttle turned off. */
const PASS: Guard = { run: (task, context) => startTask(task, context.signal) };

/**
 * The routing of one request across its attempts: each attempt picks an
 * upstream, avoiding the one the previous attempt failed on, and skips the
 * upstreams whose guards refuse it. One object per request, so the retry's
 * attempts share what the earlier ones learnt.
 */
class Route<T> {
  /** The upstream the last attempt failed on, and those whose guards refused this one; made at the first failure (most requests have none). */
  private avoid: Set<string> | undefined;

  constructor(
    private readonly balancer: Balancer<HttpUpstream>,
    private readonly perUpstream: Guard,
    private readonly call: OutgoingCall,
    private readonly send: Attempt<T>,
  ) {}

  readonly attempt = (signal: AbortSignal): Promise<T> => this.next(signal, undefined);

  /** Picks an upstream not yet refused in this attempt and sends through its guards; on a refusal, the next. */
  private next(signal: AbortSignal, refused: Map<string, unknown> | undefined): Promise<T> {
    const { balancer, call } = this;
    const upstream = balancer.pick({ priority: call.priority, avoid: this.avoid });
    if (upstream === undefined) return Promise.reject(new OverloadedError(`every upstream is saturated for priority ${String(call.priority ?? 'normal')}; shed`));
    if (refused?.has(upstream.id) === true) {
      // Only refusing upstreams are left: fail fast (principle 4) with this one's refusal (a BreakerOpenError says when it probes again); nothing was sent.
      balancer.release(upstream);
      return Promise.reject(refused.get(upstream.id));
    }
    balancer.start(upstream);
    let sent = false;
    const context: GuardContext = { key: upstream.id, signal, wait: true, priority: call.priority, deadline: call.deadline };
    return this.perUpstream
      .run((s) => {
        sent = true;
        return this.send(upstream, s);
      }, context)
      .then(
        (value) => {
          balancer.finish(upstream, true);
          return value;
        },
        (error: unknown) => {
          if (!sent) {
            // Refused by this upstream's breaker or throttle: it never saw the request, so it says nothing of it.
            balancer.release(upstream);
            (this.avoid ??= new Set()).add(upstream.id);
            return this.next(signal, (refused ?? new Map()).set(upstream.id, error));
          }
          // The caller's own abort says nothing of the upstream; an attempt cut at its timeout or the deadline does (a hung upstream answers nothing else).
          if (call.signal.aborted || isAbort(error)) balancer.release(upstream);
          else balancer.finish(upstream, !countsAgainstUpstream(error));
          // The next attempt avoids the upstream this one failed on (and only it: the refusals of this attempt may have lifted).
          if (this.avoid === undefined) this.avoid = new Set();
          else this.avoid.clear();
          this.avoid.add(upstream.id);
          throw error;
        },
      );
  }
}

/**
 * Whether an attempt's error is the upstream failing: a status in
 * `retryStatuses` (an `UpstreamStatusError`, exchange.ts, is made for those only, so what
 * is retried is what is counted: a 408 the user lists is both), a connection
 * error, an attempt cut at its `attemptTimeout` or at the deadline (as Envoy
 * counts a gateway timeout: a hung upstream, SIGSTOPped or wedged, answers
 * nothing else, and must still be found out). The caller's own abort is none.
 */
function countsAgainstUpstream(error: unknown): boolean {
  return !isAbort(error);
}

/**
 * The throttle's `isRejection` here: the upstream refused the request (a 503
 * or 429, an answer that never came in time), not the breaker inside the
 * throttle. The default would also count the breaker's `BreakerOpenError`, so
 * every call the open breaker turned away, which never reached the upstream,
 * kept the throttle rejecting after the upstream had recovered (found by the
 * retry-storm test, docs/http-retry-storm.md). Such a call counts as accepted
 * instead: the throttle has no "did not happen", and an open breaker already
 * refuses everything, so the throttle need not add to it.
 */
function refusedByUpstream(error: unknown): boolean {
  return !isRefusal(error) && (isOverloadSignal(error) || isLoadTimeout(error));
}

/**
 * Retry's `retryOn`: never a request whose response has begun to reach its
 * caller (a failure after that, the body cut or the deadline mid-stream, is
 * the caller's to see), then the user's rule, if any.
 */
function retryOnOf(user: ((error: unknown, context: GuardContext) => boolean) | undefined): (error: unknown, context: GuardContext) => boolean {
  return (error, context) => (context as Partial<OutgoingCall>).delivering !== true && (user === undefined || user(error, context));
}

function sum(a: RetryStats, b: RetryStats): RetryStats {
  return { calls: a.calls + b.calls, retries: a.retries + b.retries, budgetRefusals: a.budgetRefusals + b.budgetRefusals, abandoned: a.abandoned + b.abandoned, abandonedRunning: a.abandonedRunning + b.abandonedRunning };
}

function upstreamOf(value: unknown, i: number): HttpUpstream {
  const u = typeof value === 'string' ? { origin: value } : (optionsObject(`upstreams[${i}]`, value as HttpUpstream) as HttpUpstream);
  if (typeof u.origin !== 'string') throw new ConfigError(`upstreams[${i}].origin must be a string such as "http://127.0.0.1:8080", got ${describe(u.origin)}`);
  let url: URL;
  try {
    url = new URL(u.origin);
  } catch {
    throw new ConfigError(`upstreams[${i}] must be an origin such as "http://127.0.0.1:8080", got ${JSON.stringify(u.origin)}`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.origin !== u.origin.replace(/\/$/, '')) throw new ConfigError(`upstreams[${i}] must be an http(s) origin with no path, query or credentials, got ${JSON.stringify(u.origin)}`);
  return { ...u, origin: url.origin };
}

function methodName(m: unknown, i: number): string {
  if (typeof m !== 'string' || !/^[A-Za-z]+$/.test(m)) throw new ConfigError(`retryMethods[${i}] must be a method name, got ${describe(m)}`);
  return m.toUpperCase();
}

function statusCode(s: unknown, i: number): number {
  if (typeof s !== 'number' || !Number.isInteger(s) || s < 400 || s > 599) throw new ConfigError(`retryStatuses[${i}] must be an error status from 400 to 599, got ${describe(s)}`);
  return s;
}
