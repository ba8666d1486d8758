import assert from 'node:assert/strict';
import { between, clockOption, duration, integer, optionalFunction, optionsObject, or, ordered } from '../config.js';
import { AbortedError, BreakerOpenError, LoadTimeoutError } from '../errors.js';
import { Events, type ListenerErrorOption } from '../events.js';
import { type Clock } from '../time/clock.js';
import { Backoff } from './backoff.js';
import { runAbandonable } from './abandon.js';
import { breakerRules } from './breaker-rules.js';
import { causeOf, classify, reachedDependency } from './classify.js';
import { SampledCalls } from './sampled-calls.js';
import { countsOf, slowCallMsOf, type TripReason, type TripRule } from './trip-rule.js';
import { type CallOptions, GATE, type Gate, type GuardContext, guarded, NEVER_ABORTS, NO_OPTIONS, NOT_NOW, notATask, startTask } from './guard.js';

/** Where a {@link CircuitBreaker} is. */
export type BreakerState = 'closed' | 'open' | 'half-open';

/** Why a {@link CircuitBreaker} changed state. */
export type BreakerReason =
  | TripReason
  | 'probe-failed'
  | 'probe-timeout'
  | 'open-elapsed'
  | 'probes-succeeded'
  | 'reset'
  | 'isolated';

/**
 * Typed events of a {@link CircuitBreaker}. Listeners run synchronously, after
 * the state they describe is in place; what they throw is isolated. `on`
 * returns an unsubscribe function: a breaker keeps its listeners for as long as
 * it lives, so a listener added per request (opossum's and cockatiel's
 * `MaxListenersExceededWarning` reports) must be removed by its owner.
 */
export interface BreakerEvents {
  /** A transition. `openForMs` is the interval drawn when `to` is `open` (Infinity when isolated). */
  state: (event: { from: BreakerState; to: BreakerState; reason: BreakerReason; openForMs?: number }) => void;
  /** A call refused without reaching the dependency. */
  rejected: (event: { key: string; state: 'open' | 'half-open'; retryAfterMs: number | undefined }) => void;
  /** A call counted as a failure (in the closed state or as a probe). */
  failure: (event: { key: string; error: unknown; state: 'closed' | 'half-open' }) => void;
}

/**
 * What a {@link CircuitBreaker} has seen, from {@link CircuitBreaker.stats}.
 * An operator reads in it whether the breaker is protecting the dependency or
 * the dependency's callers are paying for it: `rejected` climbing is the
 * traffic the breaker spared a failing dependency (and the callers that got
 * stale values or errors instead); `failed` over `succeeded` is what tripped
 * it; `trips` counting up while `state` flaps between open and half-open is a
 * dependency that fails its probes, not a breaker that is too eager.
 */
export interface BreakerStats {
  /** Where the breaker is now. An open breaker whose interval has passed reads `open` until the next call. */
  readonly state: BreakerState;
  /** Calls counted in the window (the rate rules' denominator; 0 when no rule keeps a window). */
  readonly calls: number;
  /** Of those, the failures. */
  readonly failures: number;
  /** Of those, the ones slower than `slowCallMs` (only counted with the slow-call rule on). */
  readonly slow: number;
  /** Failures in a row now, against `consecutiveFailures` (0 when no rule counts them). */
  readonly consecutiveFailures: number;
  /** Times the breaker opened (by a rule or a failed probe), since it was made. */
  readonly trips: number;
  /** Calls that ran and whose outcome was recorded as a success (an error `isFailure` excuses included), since it was made. */
  readonly succeeded: number;
  /** Calls that ran and counted as failures (a failed or slow or timed-out probe included), since it was made. */
  readonly failed: number;
  /**
   * Calls refused without running (open, or half-open with its probes out),
   * since it was made. A call the caller aborted, or whose outcome arrived
   * after a transition (see the epoch, on {@link CircuitBreaker}), is in none
   * of `succeeded`, `failed` and `rejected`.
   */
  readonly rejected: number;
}

/** Options for {@link CircuitBreaker}. Every rule names the outage it is for. */
export interface CircuitBreakerOptions extends ListenerErrorOption {
  /**
   * When the closed breaker opens: one {@link TripRule} or several (the first
   * to say so trips it). Default: the rules the seven options below describe,
   * a {@link ConsecutiveFailuresRule}, and a {@link FailureRateRule} and a
   * {@link SlowCallRateRule} when their thresholds are below 1. Give rules for
   * a question those options cannot ask (a rule of your own, a failure rate
   * over two windows), or to say in one place what trips the breaker; giving
   * `trip` and any of the seven is a `ConfigError` (one of them would be
   * silently ignored). Each rule belongs to this breaker alone.
   */
  trip?: TripRule | readonly TripRule[];
  /**
   * Trip after this many failures in a row (a {@link ConsecutiveFailuresRule}). Default 5. The fast rule: a
   * dependency that is down fails every call, and waiting for a rate over a
   * whole window would send it `window` ms of full traffic first.
   */
  consecutiveFailures?: number;
  /**
   * Length of the sliding time window for the rate rules, ms. Default 10 000.
   * Counts are kept in `windowBuckets` fixed buckets, so memory does not grow
   * with traffic (no per-call records), and a bucket older than the window is
   * dropped as time moves on.
   */
  window?: number;
  /** Buckets in the window; `window / windowBuckets` must be a whole number of ms. Default 10. */
  windowBuckets?: number;
  /**
   * Calls the window must hold before a rate rule may trip. Default 20. One
   * failure out of one call is a 100 % failure rate (opossum #217): without a
   * floor, a quiet service trips on its first error.
   */
  minimumCalls?: number;
  /**
   * Trip when failures / calls in the window exceed this (a {@link FailureRateRule}). Default 0.5; 1 turns
   * the rule off. Catches a dependency that fails often but not always, which
   * the consecutive rule never sees (one success resets it).
   */
  failureRateThreshold?: number;
  /**
   * Trip when calls slower than `slowCallMs` / calls in the window exceed this
   * (a {@link SlowCallRateRule}). Default 1 (off). Slow is how overload starts (Missourian 2010: the server
   * that hung was slow long before it was dead); shedding calls before they
   * time out keeps threads and sockets for work that can succeed.
   */
  slowCallRateThreshold?: number;
  /** A call taking at least this long is slow, ms. Default 5 000. Only read when the slow-call rule is on. */
  slowCallMs?: number;
  /**
   * How long the breaker stays open before it admits probes, ms. Default 5 000.
   * Each interval is jittered by ±`jitter` with the clock's random source, so a
   * fleet whose breakers opened together does not probe together, and grows ×2
   * on each consecutive trip without a close, up to `maxOpenFor`: a dependency
   * that keeps failing its probes is probed less and less (principle 3).
   */
  openFor?: number;
  /** Cap on the open interval, ms. Default 60 000. */
  maxOpenFor?: number;
  /** Spread of the open interval, a fraction. Default 0.2. */
  jitter?: number;
  /**
   * Calls admitted in the half-open state; all must succeed to close, any
   * failure reopens. Default 1. Everyone else is refused at once: the
   * half-open burst (opossum #119, #819) sends a recovering dependency the
   * full load that just broke it.
   */
  halfOpenProbes?: number;
  /**
   * Time limit on each probe, ms. Default 5 000. On expiry the probe's signal
   * aborts and it counts as a failure, so a probe that never settles cannot
   * hold the breaker half-open forever (resilience4j #935).
   */
  probeTimeout?: number;
  /**
   * Which errors count against the dependency. An error for which it returns
   * false counts as a success (the dependency answered; e.g. a 404). Default:
   * every error except an invalid value (`classify` says `invalid`: a bad
   * value is not an unhealthy dependency: tripping on it would cut every key
   * off a database because one row is bad, while the cache already keeps the
   * last good value and backs the key off).
   *
   * Never counted at all, whatever this returns, as `classify` judges them (by
   * `code`, so a second copy of damper's errors are judged alike): the
   * caller's own abort (its signal aborted, an `AbortedError`), and a refusal
   * by a guard inside this one (`BreakerOpenError` of a nested breaker,
   * `OverloadedError` of a limiter): a refusal never reached the dependency.
   * A load cut by its hard timeout did, and is passed to this as its
   * `LoadTimeoutError`.
   */
  isFailure?: (error: unknown) => boolean;
  clock?: Clock;
}

type State =
  | { readonly name: 'closed' }
  | { readonly name: 'open'; readonly until: number; readonly interval: number }
  | { readonly name: 'half-open'; admitted: number; succeeded: number };

const CLOSED: State = Object.freeze({ name: 'closed' });

/** The duration passed to rules when no rule reads durations (none sets `slowCallMs`): calls are not timed then. */
const UNTIMED = Number.NaN;

/** Every legal transition; anything else is a bug, and asserted. */
const LEGAL: Readonly<Record<BreakerState, readonly BreakerState[]>> = {
  closed: ['open', 'closed'],
  open: ['half-open', 'open', 'closed'],
  'half-open': ['open', 'closed'],
};

const OUT_SUCCESS = 0;
const OUT_FAILURE = 1;
const OUT_IGNORED = 2;
/** How a call counts: for the dependency, against it, or not at all. */
type Verdict = typeof OUT_SUCCESS | typeof OUT_FAILURE | typeof OUT_IGNORED;

function defaultIsFailure(error: unknown): boolean {
  return classify(error) !== 'invalid';
}

/**
 * A circuit breaker: when a dependency is failing, stop calling it for a
 * while and fail fast instead (principle 4, degrade don't redirect). The
 * cache serves stale values meanwhile; the dependency gets the quiet it needs
 * to recover rather than a retry storm (Discord 2019, where a breaker bug let
 * a thundering herd through to the database, which then flapped).
 *
 * - **Closed**: calls pass. It trips when one of its {@link TripRule}s says
 *   so: by default on `consecutiveFailures` failures in a row, or when, with
 *   at least `minimumCalls` calls in the last `window` ms, the failure rate or
 *   the slow-call rate exceeds its threshold (option `trip` for other rules).
 * - **Open**: calls are refused at once with {@link BreakerOpenError} (with
 *   `retryAfterMs`) and the task is never called. No timer runs: the breaker
 *   turns half-open on the first call after the interval, so 10 000 idle
 *   breakers cost no timers (opossum #809: a timer per breaker).
 * - **Half-open**: exactly `halfOpenProbes` calls are admitted, each under
 *   `probeTimeout`; all others are refused at once, never queued behind a hung
 *   probe. All probes succeeding closes; any failure reopens, for a longer,
 *   jittered interval.
 *
 * Every transition bumps an epoch; a call remembers the epoch it started in,
 * and its outcome is dropped if the breaker has moved on since, so a slow call
 * from before a trip can neither close the breaker nor count as a probe
 * (brakes #10; resilience4j #646, #674: illegal transitions from late results).
 *
 * The closed path is built to cost little over the bare call: no allocation
 * when the call has no abortable signal and the slow-call rule is off, no
 * timer, one clock read when the outcome is recorded.
 */
export class CircuitBreaker implements Gate {
  /** @internal */
  readonly [GATE] = true as const;
  // The settings of the default rules (what the options said, or their defaults); with `trip`, unused.
  readonly consecutiveFailures: number;
  readonly window: number;
  readonly windowBuckets: number;
  readonly minimumCalls: number;
  readonly failureRateThreshold: number;
  readonly slowCallRateThreshold: number;
  readonly slowCallMs: number;
  readonly openFor: number;
  readonly maxOpenFor: number;
  readonly jitter: number;
  readonly halfOpenProbes: number;
  readonly probeTimeout: number;
  private readonly isFailure: (error: unknown) => boolean;
  private readonly clock: Clock;
  private readonly backoff: Backoff;
  private readonly events: Events<BreakerEvents>;
  /** When the closed breaker opens (see {@link TripRule}). */
  private readonly rules: readonly TripRule[];
  /** Calls at least this long are slow, for the rules that count them; undefined when none does, and calls are not timed. */
  private readonly slowAt: number | undefined;

  private current: State = CLOSED;
  /** Bumped on every transition; outcomes of calls from an older epoch are dropped. */
  private epoch = 0;
  /** Trips since the breaker last closed: the exponent of the open interval. */
  private trips = 0;
  // Cumulative counters for stats(): one increment where each event happens.
  private tripsTotal = 0;
  private succeeded = 0;
  private failed = 0;
  private rejected = 0;

  // Outcome handlers shared by every plain call of the current closed epoch:
  // built once per transition so the hot path allocates no closure.
  private closedOk: (value: unknown) => void = () => {};
  private closedErr: (error: unknown) => void = () => {};

  constructor(breakerOptions?: CircuitBreakerOptions) {
    const options = optionsObject('CircuitBreaker options', breakerOptions);
    this.events = new Events<BreakerEvents>(optionalFunction('onListenerError', options.onListenerError));
    this.consecutiveFailures = integer('consecutiveFailures', or(options.consecutiveFailures, 5), 1);
    // Checked here whether or not a rate rule is made from them: a bad window is a slip either way.
    const sampling = new SampledCalls(options);
    this.window = sampling.window;
    this.windowBuckets = sampling.windowBuckets;
    this.minimumCalls = sampling.minimumCalls;
    this.failureRateThreshold = between('failureRateThreshold', or(options.failureRateThreshold, 0.5), 0, 1);
    this.slowCallRateThreshold = between('slowCallRateThreshold', or(options.slowCallRateThreshold, 1), 0, 1);
    this.slowCallMs = duration('slowCallMs', or(options.slowCallMs, 5_000), { positive: true });
    this.openFor = duration('openFor', or(options.openFor, 5_000), { positive: true, timer: true });
    this.maxOpenFor = duration('maxOpenFor', or(options.maxOpenFor, 60_000), { positive: true, timer: true });
    ordered('openFor', this.openFor, 'maxOpenFor', this.maxOpenFor);
    this.jitter = between('jitter', or(options.jitter, 0.2), 0, 0.9);
    this.halfOpenProbes = integer('halfOpenProbes', or(options.halfOpenProbes, 1), 1);
    this.probeTimeout = duration('probeTimeout', or(options.probeTimeout, 5_000), { positive: true, timer: true });
    optionalFunction('isFailure', options.isFailure);
    this.isFailure = options.isFailure ?? defaultIsFailure;
    this.clock = clockOption('clock', options.clock);
    this.backoff = new Backoff({ base: this.openFor, max: this.maxOpenFor, factor: 2, jitter: this.jitter });
    this.rules = breakerRules(options, this, this.clock);
    this.slowAt = slowCallMsOf(this.rules);
    this.bindClosedHandlers();
  }

  /** Where the breaker is. An open breaker whose interval has passed still reads `open` until the next call moves it to half-open. */
  get state(): BreakerState {
    return this.current.name;
  }

  /** What the window holds now and what the breaker has done since it was made (see {@link BreakerStats}). */
  stats(): BreakerStats {
    return {
      state: this.current.name,
      ...countsOf(this.rules),
      trips: this.tripsTotal,
      succeeded: this.succeeded,
      failed: this.failed,
      rejected: this.rejected,
    };
  }

  /** Subscribes; returns the unsubscribe function. */
  on<K extends keyof BreakerEvents>(event: K, listener: BreakerEvents[K]): () => void {
    return this.events.on(event, listener);
  }

  off<K extends keyof BreakerEvents>(event: K, listener: BreakerEvents[K]): void {
    this.events.off(event, listener);
  }

  /** Runs `fn` through the breaker outside the cache: `breaker.execute((signal) => fetch(url, { signal }))`. */
  execute<T>(fn: (signal: AbortSignal) => Promise<T>, options?: CallOptions): Promise<T> {
    return options === undefined ? this.run(fn, NO_OPTIONS) : guarded(this, fn, options);
  }

  /** Closes the breaker and forgets all counts (an operator's override, or after a deploy that fixed the cause). */
  reset(): void {
    this.transition(CLOSED, 'reset');
  }

  /**
   * Opens the breaker until {@link reset}: every call is refused (an operator
   * cutting traffic to a dependency, as Facebook had to in 2010, but without
   * taking the dependency's other clients down with it).
   */
  isolate(): void {
    this.transition({ name: 'open', until: Number.POSITIVE_INFINITY, interval: Number.POSITIVE_INFINITY }, 'isolated');
  }

  run<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
    if (typeof task !== 'function') return Promise.reject(notATask('CircuitBreaker', task));
    if (this.current === CLOSED) {
      const p = startTask(task, context.signal);
      // The outcome is observed by a reaction registered before the caller's,
      // so it is recorded before the caller resumes, and the caller's promise
      // is the task's own (no extra tick, no extra promise on its path).
      if ((context === NO_OPTIONS || (context.signal === NEVER_ABORTS && context.key === '')) && this.slowAt === undefined) p.then(this.closedOk, this.closedErr);
      else this.observe(p, context);
      return p;
    }
    return this.runNotClosed(task, context);
  }

  /**
   * The closed path for a call with a key or an abortable signal (the error
   * handler must tell the caller's abort from a failure: one closure per call),
   * or with slow-call tracking (the start time: two).
   */
  private observe(p: Promise<unknown>, context: GuardContext): void {
    if (this.slowAt !== undefined) {
      this.observeTimed(p, context);
      return;
    }
    const epoch = this.epoch;
    p.then(this.closedOk, (error: unknown) => {
      if (epoch === this.epoch) this.recordClosed(this.judge(error, context.signal), UNTIMED, context.key, error);
    });
  }

  /** {@link observe} for rules that read durations: the start time too. */
  private observeTimed(p: Promise<unknown>, context: GuardContext): void {
    const epoch = this.epoch;
    const start = this.clock.now();
    p.then(
      () => {
        if (epoch === this.epoch) this.recordClosed(OUT_SUCCESS, this.clock.now() - start, context.key, undefined);
      },
      (error: unknown) => {
        if (epoch === this.epoch) this.recordClosed(this.judge(error, context.signal), this.clock.now() - start, context.key, error);
      },
    );
  }

  private closedSuccess(): void {
    this.succeeded++;
    // count(OUT_SUCCESS, UNTIMED) written out: this is the hot path.
    const rules = this.rules;
    let reason: TripReason | undefined;
    for (let i = 0; i < rules.length; i++) {
      const said = rules[i]!.success(UNTIMED);
      reason ??= said;
    }
    if (reason !== undefined) this.trip(reason);
  }

  /**
   * Admits a call at once while closed; its token is the epoch, so an outcome
   * from before a transition is dropped, as on the nested path (`pipeline`
   * uses this; see `Gate`). Slow-call tracking needs the start time too: not
   * a token's worth, so the call takes `run`.
   *
   * @internal
   */
  enter(_context: GuardContext): number {
    return this.current === CLOSED && this.slowAt === undefined ? this.epoch : NOT_NOW;
  }

  /** @internal */
  leave(token: number, context: GuardContext, ok: boolean, error: unknown): void {
    if (token !== this.epoch) return;
    if (ok) this.closedSuccess();
    else this.recordClosed(this.judge(error, context.signal), UNTIMED, context.key, error);
  }

  private bindClosedHandlers(): void {
    const epoch = this.epoch;
    // The success handler is the hot path, written out rather than through recordClosed: no verdict to branch on.
    this.closedOk = () => {
      if (epoch === this.epoch) this.closedSuccess();
    };
    this.closedErr = (error: unknown) => {
      if (epoch === this.epoch) this.recordClosed(this.judge(error, NEVER_ABORTS), UNTIMED, '', error);
    };
  }

  private judge(error: unknown, signal: AbortSignal): Verdict {
    // A call the caller left, or that a guard inside this breaker refused,
    // never reached the dependency: it says nothing of it (a load cut by its
    // hard timeout did reach it, and did not answer: classifyCall).
    if (!reachedDependency(error, signal)) return OUT_IGNORED;
    let failed: boolean;
    try {
      failed = this.isFailure(causeOf(error, signal));
    } catch {
      failed = true;
    }
    return failed ? OUT_FAILURE : OUT_SUCCESS;
  }

  /** A call that ran while closed ended: `ms` is its duration, {@link UNTIMED} when no rule reads durations. */
  private recordClosed(outcome: Verdict, ms: number, key: string, error: unknown): void {
    if (outcome === OUT_IGNORED) return;
    if (outcome === OUT_SUCCESS) {
      this.succeeded++;
    } else {
      assert.equal(this.current, CLOSED);
      this.failed++;
      if (this.events.has('failure')) this.events.emit('failure', { key, error, state: 'closed' });
    }
    this.count(outcome, ms);
  }

  /**
   * Tells every rule of the call, then trips for the first that said so: all
   * count the call, so none misses the one that tripped another (the order of
   * the rules is the order their reasons win).
   */
  private count(outcome: typeof OUT_SUCCESS | typeof OUT_FAILURE, ms: number): void {
    const rules = this.rules;
    let reason: TripReason | undefined;
    for (let i = 0; i < rules.length; i++) {
      const said = outcome === OUT_SUCCESS ? rules[i]!.success(ms) : rules[i]!.failure(ms);
      reason ??= said;
    }
    if (reason !== undefined) this.trip(reason);
  }

  private trip(reason: BreakerReason): void {
    this.trips++;
    this.tripsTotal++;
    const interval = this.backoff.delay(this.trips, () => this.clock.random());
    this.transition({ name: 'open', until: this.clock.now() + interval, interval }, reason);
  }

  /** The one place where the state changes. */
  private transition(to: State, reason: BreakerReason): void {
    const from = this.current;
    assert.ok(LEGAL[from.name].includes(to.name), `illegal breaker transition ${from.name} → ${to.name} (${reason})`);
    this.current = to;
    this.epoch++;
    if (to.name === 'closed') {
      this.trips = 0;
      for (const rule of this.rules) rule.reset();
      this.bindClosedHandlers();
    }
    if (this.events.has('state')) {
      this.events.emit('state', to.name === 'open' ? { from: from.name, to: to.name, reason, openForMs: to.interval } : { from: from.name, to: to.name, reason });
    }
  }

  private runNotClosed<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
    let s = this.current;
    if (s.name === 'open') {
      const now = this.clock.now();
      if (now < s.until) return this.refuse(context.key, 'open', s.until === Number.POSITIVE_INFINITY ? undefined : s.until - now);
      s = { name: 'half-open', admitted: 0, succeeded: 0 };
      this.transition(s, 'open-elapsed');
    }
    assert.equal(s.name, 'half-open');
    if (s.name !== 'half-open' || s.admitted >= this.halfOpenProbes) return this.refuse(context.key, 'half-open', undefined);
    if (context.signal.aborted) return Promise.reject(new AbortedError(`call for key "${context.key}" aborted before it started`, context.signal.reason));
    return this.probe(task, context, s);
  }

  private refuse<T>(key: string, state: 'open' | 'half-open', retryAfterMs: number | undefined): Promise<T> {
    this.rejected++;
    if (this.events.has('rejected')) this.events.emit('rejected', { key, state, retryAfterMs });
    const why = state === 'open' ? (retryAfterMs === undefined ? 'isolated' : `open for another ${Math.ceil(retryAfterMs)} ms`) : `half-open with its ${this.halfOpenProbes} probe(s) taken`;
    return Promise.reject(new BreakerOpenError(`circuit breaker ${why}: call for key "${key}" refused`, retryAfterMs));
  }

  /**
   * One half-open probe, under `probeTimeout`: its signal aborts at the limit
   * or with the caller, and the probe is walked away from then (through
   * {@link runAbandonable}), so a probe whose task never settles cannot hold
   * the breaker half-open (resilience4j #935), nor one whose caller left.
   */
  private probe<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext, s: { admitted: number }): Promise<T> {
    s.admitted++;
    const epoch = this.epoch;
    const { key } = context;
    const start = this.clock.now();
    let left = false;
    const probe = runAbandonable(task, {
      clock: this.clock,
      parent: context.signal,
      at: start + this.probeTimeout,
      timeout: () => new LoadTimeoutError(key, this.probeTimeout, 'load'),
      aborted: (reason) => new AbortedError(`probe for key "${key}" left by its caller`, reason),
      // Past the limit the dependency did not answer (a failure); a caller who left says nothing of it, and its slot goes to the next.
      onAbandon: (error, timedOut) => {
        left = true;
        this.probeOutcome(epoch, timedOut && !context.signal.aborted ? OUT_FAILURE : OUT_IGNORED, 'probe-timeout', key, error);
      },
    });
    probe.then(
      () => {
        const slow = this.slowAt !== undefined && this.clock.now() - start >= this.slowAt;
        this.probeOutcome(epoch, slow ? OUT_FAILURE : OUT_SUCCESS, 'probe-failed', key, undefined);
      },
      (error: unknown) => {
        // A probe walked away from was judged when it was left (onAbandon).
        if (!left) this.probeOutcome(epoch, this.judge(error, context.signal), 'probe-failed', key, error);
      },
    );
    return probe;
  }

  private probeOutcome(epoch: number, outcome: Verdict, reason: BreakerReason, key: string, error: unknown): void {
    // A probe from an earlier half-open period (the breaker was reset or
    // isolated meanwhile) decides nothing.
    if (epoch !== this.epoch) return;
    const s = this.current;
    assert.equal(s.name, 'half-open');
    if (s.name !== 'half-open') return;
    if (outcome === OUT_IGNORED) {
      // The caller gave up: its slot goes to the next caller.
      s.admitted--;
      assert.ok(s.admitted >= s.succeeded);
    } else if (outcome === OUT_FAILURE) {
      this.failed++;
      if (this.events.has('failure')) this.events.emit('failure', { key, error, state: 'half-open' });
      this.trip(reason);
    } else {
      s.succeeded++;
      this.succeeded++;
      assert.ok(s.succeeded <= s.admitted && s.admitted <= this.halfOpenProbes);
      if (s.succeeded === this.halfOpenProbes) this.transition(CLOSED, 'probes-succeeded');
    }
  }
}
