import assert from 'node:assert/strict';
import { arrayOption, between, clockOption, duration, integer, optionalFunction, optionsObject, or } from '../config.js';
import { ConfigError, describe, OverloadedError } from '../errors.js';
import { causeOf, reachedDependency } from '../guard/classify.js';
import { Events, type ListenerErrorOption } from '../events.js';
import { type CallOptions, callContext, NO_OPTIONS, notATask } from '../guard/guard.js';
import { checkPriority, type Priority, priorityRank } from '../guard/priority.js';
import { type Clock, type Timer } from '../time/clock.js';
import { HealthChecker, type HealthCheckOptions, type ProbeResult } from './health.js';
import { ejectionMs, mayEject, type OutlierConfig, outlierConfig, type OutlierOptions, successRateOutliers } from './outliers.js';

/** One upstream the balancer may route to. */
export interface Upstream<U> {
  /** Unique name, used in events and snapshots. */
  readonly id: string;
  /** Relative share of traffic when all are equally loaded. Default 1; must be > 0. */
  readonly weight?: number;
  /** Most calls in flight to this upstream; beyond it calls go elsewhere or are shed. Default: the balancer's `maxOutstanding`. */
  readonly maxOutstanding?: number;
  /** What `run`'s function receives: a URL, a client, a replica, a function. */
  readonly target: U;
}

/** The upstream a call was routed to. */
export interface PickedUpstream<U> {
  readonly id: string;
  readonly target: U;
}

/** Options for {@link Balancer.pick}. */
export interface PickOptions {
  /** The call's priority, for `maxOutstanding`'s low-priority share. Default `normal`. */
  priority?: Priority | undefined;
  /**
   * Upstreams (by id) this call should not go to: the one its previous
   * attempt just failed on. Soft: an avoided upstream is picked only when no
   * other routable upstream has room, so avoiding never sheds a call that
   * could be served. A retry sent back to the upstream that just failed it
   * is a retry that most likely fails again, and it doubles that upstream's
   * load at the moment it is failing.
   */
  avoid?: ReadonlySet<string> | undefined;
}

/** Options for {@link Balancer}. */
export interface BalancerOptions<U> extends ListenerErrorOption {
  upstreams: readonly Upstream<U>[];
  /** Passive outlier detection (see {@link OutlierOptions}). */
  outliers?: OutlierOptions;
  /** Active health checks; off when absent. With them on, an ejected upstream returns only after its time *and* a passing check. */
  health?: HealthCheckOptions<U>;
  /**
   * When fewer than this share of upstreams are healthy, route to all of them,
   * ejected and unhealthy included: a detector that has gone wrong (or a
   * fleet-wide blip) must not concentrate all traffic on the few left and
   * topple them too (the Missourian's second server). Default 0.5; 0 routes
   * to all only when none is healthy.
   */
  panicThreshold?: number;
  /**
   * Slow start: a recovered upstream's share ramps linearly from
   * `slowStartMinShare` of its weight to all of it over this many ms, so a
   * server that comes back with cold caches is not handed a full share at once
   * (principle 7; after the Missourian outage every cache had expired).
   * Default 30 000; 0 disables.
   */
  slowStartMs?: number;
  /** Share of its weight a recovered upstream starts with. Default 0.1. */
  slowStartMinShare?: number;
  /** Default per-upstream limit on calls in flight. Default: none (Infinity). */
  maxOutstanding?: number;
  /**
   * Fraction of `maxOutstanding` above which `low` and `background` calls (rank
   * below `normal`) no longer go to an upstream: when every routable upstream
   * is past it they are shed with {@link OverloadedError}, while `normal` and
   * `critical` calls are shed only when every one is full. Default 0.8.
   */
  lowPriorityShare?: number;
  /**
   * Whether a rejection counts against the upstream. Default: every error.
   * Never asked, whatever it would say, for a call that did not reach the
   * upstream (`classify`, by `code`): the caller's own abort (its signal, an
   * `AbortedError`) and a refusal by a guard in `fn` (a per-upstream
   * breaker's `BreakerOpenError`, a limiter's `OverloadedError`): ejecting an
   * upstream for our own refusals would remove capacity for nothing
   * (principle 5). A call cut by a load timeout did reach it, and is passed
   * to this as its `LoadTimeoutError`: an upstream that hangs must be found out.
   */
  isFailure?: (error: unknown) => boolean;
  clock?: Clock;
}

/** What {@link Balancer} emits. */
export interface BalancerEvents {
  eject: (e: { id: string; reason: 'consecutive-errors' | 'success-rate'; durationMs: number; ejections: number }) => void;
  /** An ejection was due but refused by `maxEjectionShare` (or because it would have been the last upstream). */
  ejectRefused: (e: { id: string; reason: 'consecutive-errors' | 'success-rate' }) => void;
  restore: (e: { id: string; via: 'time' | 'health-check' }) => void;
  /** Entered (`active: true`) or left panic routing. */
  panic: (e: { active: boolean; healthy: number; total: number }) => void;
  health: (e: { id: string } & ProbeResult) => void;
}

/** One upstream's state, for tests and dashboards. */
export interface UpstreamSnapshot {
  readonly id: string;
  readonly weight: number;
  /** `ejected`: by outlier detection, time not up; `awaiting-check`: time up, waiting for a passing health check; `unhealthy`: failing active checks. */
  readonly state: 'healthy' | 'ejected' | 'awaiting-check' | 'unhealthy';
  readonly outstanding: number;
  readonly maxOutstanding: number;
  readonly ejections: number;
  /** When the current ejection ends (clock ms), if ejected. */
  readonly ejectedUntil: number | undefined;
  /** Share of its weight the upstream gets now: < 1 during slow start. */
  readonly share: number;
  readonly consecutiveErrors: number;
  /** The last passing health check was slow (answered after `slowMs`). */
  readonly slow: boolean;
}

/** The balancer's state as a whole. */
export interface BalancerSnapshot {
  readonly panic: boolean;
  readonly upstreams: readonly UpstreamSnapshot[];
}

/**
 * What a {@link Balancer} is doing, from {@link Balancer.stats}. An operator
 * reads in it whether the fleet is whole: `panic` true means the detector has
 * taken out so many upstreams that traffic goes to all of them again (principle
 * 5: never concentrate load on the few left); an upstream's `ejections`
 * climbing is one that keeps failing; `unavailable` rising is calls shed
 * because every upstream was saturated (`maxOutstanding`), which is overload
 * answered by shedding rather than by a queue.
 */
export interface BalancerStats {
  /** Routing to every upstream now, ejected and unhealthy ones included (see `panicThreshold`). */
  readonly panic: boolean;
  /** Calls routed to an upstream (`run` and `pick`), since the balancer was made. */
  readonly picks: number;
  /** Calls refused because no upstream was routable for their priority (all saturated), since the balancer was made. */
  readonly unavailable: number;
  /** Every upstream, in the order given. */
  readonly upstreams: readonly {
    readonly id: string;
    /** Calls in flight to it now. */
    readonly inFlight: number;
    /** Ejected by outlier detection now (its time not up, or awaiting a passing health check). */
    readonly ejected: boolean;
    /** Inside its slow-start ramp now: it gets less than its weight's share. */
    readonly slowStart: boolean;
    /** Times it was ejected, since the balancer was made (the snapshot's `ejections` is the backoff multiplier, which decays). */
    readonly ejections: number;
    /** Its state now, as in {@link UpstreamSnapshot}: `unhealthy` is failing active health checks. */
    readonly state: UpstreamSnapshot['state'];
    /** Share of its weight it gets now: < 1 during slow start. */
    readonly share: number;
  }[];
}

type UpstreamState = UpstreamSnapshot['state'];

/**
 * The moves an upstream's state may make; {@link Balancer} asserts each one.
 * Ejection dominates: while ejected, the checker's verdict is read only when
 * the upstream comes back, so an ejected upstream whose probes crossed
 * `unhealthyThreshold` meanwhile returns `unhealthy`.
 */
const LEGAL: Readonly<Record<UpstreamState, readonly UpstreamState[]>> = {
  healthy: ['ejected', 'unhealthy'],
  // Routed to in panic, an upstream failing its checks can fail calls too.
  unhealthy: ['healthy', 'ejected'],
  // Without active checks its time is enough; with them it waits for a passing probe.
  ejected: ['healthy', 'awaiting-check'],
  'awaiting-check': ['healthy', 'unhealthy'],
};

/** Internal, mutable state of one upstream. Exposed to callers only as {@link PickedUpstream}. */
class Slot<U> implements PickedUpstream<U> {
  outstanding = 0;
  state: UpstreamState = 'healthy';
  /** The ejection backoff's multiplier: decays while the upstream stays in. */
  ejections = 0;
  /** Ejections since the balancer was made. */
  timesEjected = 0;
  ejectedUntil = 0;
  restoredAt = 0;
  ejectionTimer: Timer | undefined = undefined;
  slowStartFrom = 0;
  slowStartUntil = 0;
  consecutiveErrors = 0;
  successes = 0;
  volume = 0;
  constructor(
    readonly index: number,
    readonly id: string,
    readonly target: U,
    readonly weight: number,
    readonly maxOutstanding: number,
  ) {}
}

const MAX_DRAWS = 16;
const NORMAL = priorityRank('normal');
const defaultIsFailure = (): boolean => true;

/** Out by outlier detection: its time not up, or up and awaiting a passing probe. */
function isEjected(s: Slot<unknown>): boolean {
  return s.state === 'ejected' || s.state === 'awaiting-check';
}

/**
 * Client-side load balancing over a set of upstreams that answers principle 5
 * (slow is not dead; never eject the last server) and principle 7 (cold is a
 * state to manage), both learnt from the Columbia Missourian's March 2010
 * outage.
 *
 * - **Picking**: power of two choices: two candidates drawn at random in
 *   proportion to their weights (× their slow-start share), the one with
 *   fewer calls in flight per unit of weight wins. A slow upstream holds its
 *   calls longer, so it loses these comparisons and gets less traffic without
 *   ever being judged dead. The pick allocates nothing and sorts nothing: weighted draws use an alias table rebuilt only when the set of routable upstreams changes.
 * - **Outliers** (passive): consecutive errors and a success rate below the
 *   other upstreams' eject for a time that grows with repeated ejections,
 *   within a strict `maxEjectionShare`, never the last upstream. Slowness
 *   never ejects.
 * - **Panic**: below `panicThreshold` healthy, route to all.
 * - **Health checks** (active, optional): tell no answer from a slow answer.
 * - **Overload**: with `maxOutstanding`, when every routable upstream is
 *   saturated, calls are shed by priority with {@link OverloadedError} rather
 *   than queued until everything times out.
 */
export class Balancer<U> {
  readonly events: Events<BalancerEvents>;
  private readonly slots: Slot<U>[];
  private readonly outliers: OutlierConfig;
  private readonly health: HealthChecker<U> | undefined;
  private readonly panicThreshold: number;
  private readonly slowStartMs: number;
  private readonly slowStartMinShare: number;
  private readonly lowPriorityShare: number;
  private readonly isFailure: (error: unknown) => boolean;
  private readonly clock: Clock;
  /** The upstreams picks draw from: the healthy ones, or all in panic. */
  private routable: Slot<U>[] = [];
  /** Walker's alias table over the routable upstreams' weights (built on change, read on every pick). */
  private aliasProb = new Float64Array(0);
  private alias = new Uint32Array(0);
  private uniform = true;
  private panicking = false;
  /**
   * When the last routable upstream's slow start ends; 0 when none ramps, and
   * then a pick reads no clock. Derived with the alias table; the first pick
   * past it zeroes it, so no timer has to.
   */
  private rampingUntil = 0;
  private windowStart: number;
  private closed = false;
  private picks = 0;
  private unavailable = 0;

  constructor(balancerOptions: BalancerOptions<U>) {
    if (balancerOptions === undefined) throw new ConfigError('Balancer needs options with its upstreams');
    const options = optionsObject('Balancer options', balancerOptions);
    this.events = new Events<BalancerEvents>(optionalFunction('onListenerError', options.onListenerError));
    const list = arrayOption('upstreams', options.upstreams, 'a non-empty array');
    if (list.length === 0) throw new ConfigError('upstreams must be a non-empty array: a balancer over nothing cannot route');
    const defaultMax = or(options.maxOutstanding, Infinity);
    if (defaultMax !== Infinity) integer('maxOutstanding', defaultMax, 1);
    const seen = new Set<string>();
    this.slots = list.map((entry, i) => {
      const u = optionsObject(`upstreams[${i}]`, entry) as Upstream<U>;
      if (typeof u.id !== 'string' || u.id === '') throw new ConfigError(`upstreams[${i}].id must be a non-empty string`);
      if (seen.has(u.id)) throw new ConfigError(`upstreams[${i}].id "${u.id}" is a duplicate: ids name upstreams in events and snapshots`);
      seen.add(u.id);
      const weight = or(u.weight, 1);
      if (typeof weight !== 'number' || !Number.isFinite(weight) || weight <= 0) throw new ConfigError(`upstreams[${i}].weight must be a finite number > 0, got ${describe(weight)}`);
      const max = or(u.maxOutstanding, defaultMax);
      if (max !== Infinity) integer(`upstreams[${i}].maxOutstanding`, max, 1);
      return new Slot(i, u.id, u.target, weight, max);
    });
    this.outliers = outlierConfig(options.outliers);
    this.panicThreshold = between('panicThreshold', or(options.panicThreshold, 0.5), 0, 1);
    this.slowStartMs = duration('slowStartMs', or(options.slowStartMs, 30_000), { timer: true });
    this.slowStartMinShare = between('slowStartMinShare', or(options.slowStartMinShare, 0.1), 0, 1);
    if (this.slowStartMinShare === 0 && this.slowStartMs > 0) throw new ConfigError('slowStartMinShare must be > 0: an upstream with no share would never be sent the traffic that warms it');
    this.lowPriorityShare = between('lowPriorityShare', or(options.lowPriorityShare, 0.8), 0, 1);
    optionalFunction('isFailure', options.isFailure);
    this.isFailure = options.isFailure ?? defaultIsFailure;
    this.clock = clockOption('clock', options.clock);
    this.windowStart = this.clock.now();
    this.health =
      options.health === undefined
        ? undefined
        : new HealthChecker(
            options.health,
            this.slots.map((s) => s.target),
            this.clock,
            (i, r) => this.onProbe(i, r),
          );
    this.rebuild();
    this.health?.start();
  }

  /** True while fewer than `panicThreshold` of the upstreams are healthy and picks go to all of them. */
  get panic(): boolean {
    return this.panicking;
  }

  /**
   * Picks an upstream, runs `fn` on it and records the outcome. Rejects with
   * {@link OverloadedError} at once, without calling `fn`, when every
   * routable upstream is saturated for the call's priority. A rejection
   * that did not reach the upstream (see `isFailure`) counts neither way.
   */
  async run<T>(fn: (target: U, signal: AbortSignal) => Promise<T>, options?: CallOptions): Promise<T> {
    if (typeof fn !== 'function') throw notATask('Balancer', fn);
    // Checked before a slot is chosen: a slip of the caller's is no failure of an upstream.
    const { priority, signal } = options === undefined ? NO_OPTIONS : callContext(options);
    const slot = this.route(priorityRank(priority), undefined);
    if (slot === undefined) throw new OverloadedError(`balancer: every upstream is saturated for priority ${String(priority ?? 'normal')}; shed`);
    slot.outstanding++;
    let value: T;
    try {
      value = await fn(slot.target, signal);
    } catch (error) {
      slot.outstanding--;
      if (reachedDependency(error, signal) && this.isFailure(causeOf(error, signal))) this.record(slot, false);
      throw error;
    }
    slot.outstanding--;
    this.record(slot, true);
    return value;
  }

  /**
   * Picks an upstream without running anything, for callers that manage the
   * call themselves (an HTTP client's dispatch): they report it with
   * {@link start} and then {@link finish} or {@link release}. Undefined when
   * every routable upstream is saturated for the call's priority.
   */
  pick(options?: PickOptions): PickedUpstream<U> | undefined {
    if (options === undefined) return this.route(NORMAL, undefined);
    if (typeof options !== 'object' || options === null) throw new ConfigError(`pick options must be an object, got ${describe(options)}`);
    const { priority, avoid } = options;
    if (avoid !== undefined && !(avoid instanceof Set)) throw new ConfigError('pick options: avoid must be a Set of upstream ids');
    return this.route(priorityRank(checkPriority('priority', priority)), avoid === undefined || avoid.size === 0 ? undefined : avoid);
  }

  /** Marks a call to `picked` as started (counts toward its outstanding calls). */
  start(picked: PickedUpstream<U>): void {
    this.slotOf(picked).outstanding++;
  }

  /**
   * Whether the upstreams whose breakers are open (`breakersOpen`, by id)
   * may be out of service at once with those the balancer has out already
   * (ejected, or failing their health checks): within `maxEjectionShare`,
   * and never all of them (principle 5). The bound of the per-upstream
   * breakers of a `Dependency`, which take an upstream out as surely as an
   * ejection does, counted as the balancer's own ejections count (`eject`):
   * a hung server out by its health checks and a breaker open on the last
   * one, which sheds because it carries everything, are two out of two,
   * and the breaker then takes the site down (the Missourian's second
   * server; measured in docs/lab.md, "Real runs").
   */
  mayBeOut(breakersOpen: ReadonlySet<string>): boolean {
    // A count was its argument until the bound counted the upstreams already out: say so rather than read every one as closed.
    if (!(breakersOpen instanceof Set)) throw new ConfigError(`mayBeOut(breakersOpen): a Set of upstream ids, got ${describe(breakersOpen)}`);
    let out = 0;
    for (const s of this.slots) if (s.state !== 'healthy' || breakersOpen.has(s.id)) out++;
    return out === 0 || mayEject(out - 1, this.slots.length, this.outliers.maxEjectionShare);
  }

  /** Marks a call to `picked` as finished, `ok` or failed, and records the outcome. */
  finish(picked: PickedUpstream<U>, ok: boolean): void {
    const slot = this.slotOf(picked);
    slot.outstanding = Math.max(0, slot.outstanding - 1);
    this.record(slot, ok);
  }

  /**
   * Marks a call to `picked` as ended without an outcome that says anything
   * about the upstream: its caller left, or a guard in front of it refused it
   * before it was sent. It no longer counts as outstanding, and it counts
   * neither for nor against the upstream (as `run` treats the caller's abort).
   */
  release(picked: PickedUpstream<U>): void {
    const slot = this.slotOf(picked);
    slot.outstanding = Math.max(0, slot.outstanding - 1);
  }

  /** The state of every upstream, in the order given. */
  snapshot(): BalancerSnapshot {
    const now = this.clock.now();
    return { panic: this.panicking, upstreams: this.slots.map((s) => this.upstreamSnapshot(s, now)) };
  }

  /** What it has routed and refused since it was made, and each upstream now (see {@link BalancerStats}). */
  stats(): BalancerStats {
    const now = this.clock.now();
    return {
      panic: this.panicking,
      picks: this.picks,
      unavailable: this.unavailable,
      upstreams: this.slots.map((s) => {
        const { id, outstanding, state, share } = this.upstreamSnapshot(s, now);
        return { id, inFlight: outstanding, ejected: isEjected(s), slowStart: share < 1, ejections: s.timesEjected, state, share };
      }),
    };
  }

  /** Stops health checks and cancels every timer (ejections, probes). Calls still route, as they stand, at full share. Idempotent. */
  close(): void {
    this.closed = true;
    this.health?.close();
    for (const s of this.slots) {
      s.ejectionTimer?.cancel();
      s.ejectionTimer = undefined;
    }
    // Nothing changes state after close, so rebuild never derives this again.
    this.rampingUntil = 0;
  }

  private upstreamSnapshot(s: Slot<U>, now: number): UpstreamSnapshot {
    return {
      id: s.id,
      weight: s.weight,
      state: s.state,
      outstanding: s.outstanding,
      maxOutstanding: s.maxOutstanding,
      ejections: s.ejections,
      ejectedUntil: isEjected(s) ? s.ejectedUntil : undefined,
      share: this.share(s, now),
      consecutiveErrors: s.consecutiveErrors,
      slow: this.health?.slow(s.index) ?? false,
    };
  }

  /** {@link choose}, counted: every call that asks for an upstream is a pick or an unavailable. */
  private route(rank: number, avoid: ReadonlySet<string> | undefined): Slot<U> | undefined {
    const slot = avoid === undefined ? this.choose(rank) : (this.chooseAvoiding(rank, avoid) ?? this.choose(rank));
    if (slot === undefined) this.unavailable++;
    else this.picks++;
    return slot;
  }

  private slotOf(picked: PickedUpstream<U>): Slot<U> {
    if (!(picked instanceof Slot) || this.slots[picked.index] !== picked) throw new ConfigError('not an upstream picked by this balancer');
    return picked as Slot<U>;
  }

  /** Share of its weight `s` gets at `now`: ramps from slowStartMinShare to 1. */
  private share(s: Slot<U>, now: number): number {
    if (now >= s.slowStartUntil) return 1;
    const min = this.slowStartMinShare;
    return min + ((1 - min) * (now - s.slowStartFrom)) / this.slowStartMs;
  }

  /** Draws one routable upstream in proportion to weight × slow-start share. */
  private draw(now: number): Slot<U> {
    const routable = this.routable;
    const n = routable.length;
    const clock = this.clock;
    let slot: Slot<U> = routable[0]!;
    for (let tries = 0; tries < MAX_DRAWS; tries++) {
      // Walker's alias method: one random number, O(1), whatever the weights.
      const u = clock.random() * n;
      let i = Math.floor(u);
      if (i >= n) i = n - 1;
      if (!this.uniform && u - i >= this.aliasProb[i]!) i = this.alias[i]!;
      slot = routable[i]!;
      // Slow start by rejection: accepted with probability = its share.
      if (this.rampingUntil === 0 || now >= slot.slowStartUntil || clock.random() < this.share(slot, now)) return slot;
    }
    return slot;
  }

  /** Power of two choices, then saturation and priority: undefined means shed. */
  private choose(rank: number): Slot<U> | undefined {
    const routable = this.routable;
    const now = this.rampingUntil === 0 ? 0 : this.rampingNow();
    if (routable.length === 1) return this.available(routable[0]!, rank) ? routable[0] : this.scan(rank);
    const a = this.draw(now);
    const b = this.draw(now);
    // Load per unit of weight; ties go to the first draw, so idle traffic follows the weights.
    const first = b.outstanding * a.weight < a.outstanding * b.weight ? b : a;
    const second = first === a ? b : a;
    if (this.available(first, rank)) return first;
    if (this.available(second, rank)) return second;
    return this.scan(rank);
  }

  private available(s: Slot<U>, rank: number): boolean {
    if (s.maxOutstanding === Infinity) return true;
    return s.outstanding < (rank < NORMAL ? Math.max(1, Math.floor(s.maxOutstanding * this.lowPriorityShare)) : s.maxOutstanding);
  }

  /**
   * {@link choose} among the upstreams not in `avoid`: each of the two draws
   * is drawn again while it lands on an avoided one (bounded), then the scan
   * skips them. Undefined when none outside `avoid` has room; the caller then
   * falls back to all. Off the common path: only a retry avoids.
   */
  private chooseAvoiding(rank: number, avoid: ReadonlySet<string>): Slot<U> | undefined {
    const now = this.rampingUntil === 0 ? 0 : this.rampingNow();
    const a = this.drawAvoiding(now, avoid);
    const b = a === undefined ? undefined : this.drawAvoiding(now, avoid);
    if (a !== undefined && b !== undefined) {
      const first = b.outstanding * a.weight < a.outstanding * b.weight ? b : a;
      if (this.available(first, rank)) return first;
      const second = first === a ? b : a;
      if (this.available(second, rank)) return second;
    }
    return this.scan(rank, avoid);
  }

  private drawAvoiding(now: number, avoid: ReadonlySet<string>): Slot<U> | undefined {
    for (let tries = 0; tries < MAX_DRAWS; tries++) {
      const s = this.draw(now);
      if (!avoid.has(s.id)) return s;
    }
    return undefined;
  }

  /** The overloaded case only: the least loaded upstream with room for this priority, if any, outside `avoid`. */
  private scan(rank: number, avoid?: ReadonlySet<string>): Slot<U> | undefined {
    let best: Slot<U> | undefined;
    for (const s of this.routable) {
      if (!this.available(s, rank) || avoid?.has(s.id) === true) continue;
      if (best === undefined || s.outstanding / s.maxOutstanding < best.outstanding / best.maxOutstanding) best = s;
    }
    return best;
  }

  /** The clock, and zeroes {@link rampingUntil} once every ramp is over. */
  private rampingNow(): number {
    const now = this.clock.now();
    if (now >= this.rampingUntil) this.rampingUntil = 0;
    return now;
  }

  /** Moves `s` to `to`, asserting the move is one {@link LEGAL} allows. */
  private transition(s: Slot<U>, to: UpstreamState): void {
    assert.ok(LEGAL[s.state].includes(to), `illegal upstream transition ${s.state} → ${to} (${s.id})`);
    s.state = to;
  }

  /** Recomputes the routable set, its weights and when its ramps end, after any change of state or slow start. Not on the pick path. */
  private rebuild(): void {
    const healthy = this.slots.filter((s) => s.state === 'healthy');
    const panic = healthy.length === 0 || healthy.length < this.panicThreshold * this.slots.length;
    this.routable = panic ? this.slots.slice() : healthy;
    this.buildAlias();
    this.rampingUntil = 0;
    for (const s of this.routable) this.rampingUntil = Math.max(this.rampingUntil, s.slowStartUntil);
    if (panic !== this.panicking) {
      this.panicking = panic;
      this.events.emit('panic', { active: panic, healthy: healthy.length, total: this.slots.length });
    }
  }

  /** Vose's construction of the alias table: O(n), on state changes only. */
  private buildAlias(): void {
    const r = this.routable;
    const n = r.length;
    let sum = 0;
    this.uniform = true;
    for (const s of r) {
      sum += s.weight;
      if (s.weight !== r[0]!.weight) this.uniform = false;
    }
    const prob = new Float64Array(n);
    const alias = new Uint32Array(n);
    const scaled = r.map((s) => (s.weight * n) / sum);
    const small: number[] = [];
    const large: number[] = [];
    scaled.forEach((p, i) => (p < 1 ? small : large).push(i));
    while (small.length > 0 && large.length > 0) {
      const l = small.pop()!;
      const g = large.pop()!;
      prob[l] = scaled[l]!;
      alias[l] = g;
      scaled[g] = scaled[g]! + scaled[l]! - 1;
      (scaled[g]! < 1 ? small : large).push(g);
    }
    for (const i of large) prob[i] = 1;
    for (const i of small) prob[i] = 1;
    this.aliasProb = prob;
    this.alias = alias;
  }

  private record(s: Slot<U>, ok: boolean): void {
    const sr = this.outliers.successRate;
    if (sr !== undefined) {
      const now = this.clock.now();
      if (now - this.windowStart >= sr.interval) this.evaluateSuccessRates(now);
      s.volume++;
      if (ok) s.successes++;
    }
    if (ok) {
      s.consecutiveErrors = 0;
      return;
    }
    s.consecutiveErrors++;
    const limit = this.outliers.consecutiveErrors;
    if (limit > 0 && s.consecutiveErrors >= limit && !isEjected(s)) this.eject(s, 'consecutive-errors');
  }

  /** Closes one success-rate interval: ejects the outliers, starts a new interval. Lazily, at the first outcome after it ends. */
  private evaluateSuccessRates(now: number): void {
    const sr = this.outliers.successRate!;
    const slots = this.slots;
    const outliers = successRateOutliers(
      slots.map((s) => s.successes),
      slots.map((s) => (isEjected(s) ? 0 : s.volume)),
      sr,
    );
    // Worst first, so the share cap keeps the most useful upstreams in.
    outliers.sort((x, y) => slots[x]!.successes / slots[x]!.volume - slots[y]!.successes / slots[y]!.volume);
    for (const s of slots) {
      s.successes = 0;
      s.volume = 0;
    }
    this.windowStart = now;
    for (const i of outliers) if (!isEjected(slots[i]!)) this.eject(slots[i]!, 'success-rate');
  }

  private eject(s: Slot<U>, reason: 'consecutive-errors' | 'success-rate'): void {
    if (this.closed) return;
    let out = 0;
    for (const x of this.slots) if (x.state !== 'healthy') out++;
    // An upstream already failing its health checks counts as out: ejecting it too takes nothing more away.
    if (s.state === 'healthy' && !mayEject(out, this.slots.length, this.outliers.maxEjectionShare)) {
      this.events.emit('ejectRefused', { id: s.id, reason });
      return;
    }
    const now = this.clock.now();
    // The multiplier decays by one per base time spent in service, so an old ejection is forgiven.
    const forgiven = s.ejections === 0 ? 0 : Math.floor((now - s.restoredAt) / this.outliers.baseEjectionMs);
    s.ejections = Math.max(0, s.ejections - forgiven) + 1;
    s.timesEjected++;
    const ms = ejectionMs(s.ejections, this.outliers);
    this.transition(s, 'ejected');
    s.ejectedUntil = now + ms;
    s.consecutiveErrors = 0;
    this.endSlowStart(s);
    s.ejectionTimer = this.clock.setTimer(() => {
      s.ejectionTimer = undefined;
      if (this.health === undefined) this.restore(s, 'time');
      else this.transition(s, 'awaiting-check');
    }, ms);
    this.rebuild();
    this.events.emit('eject', { id: s.id, reason, durationMs: ms, ejections: s.ejections });
  }

  private restore(s: Slot<U>, via: 'time' | 'health-check'): void {
    if (this.closed) return;
    // As healthy as the checker's thresholds say: a passing probe ends an ejection, not a run of failed checks.
    this.transition(s, this.health === undefined || this.health.healthy(s.index) ? 'healthy' : 'unhealthy');
    s.restoredAt = this.clock.now();
    s.consecutiveErrors = 0;
    this.beginSlowStart(s);
    this.rebuild();
    this.events.emit('restore', { id: s.id, via });
  }

  /** Every caller rebuilds after it, which derives {@link rampingUntil} anew. */
  private beginSlowStart(s: Slot<U>): void {
    if (this.slowStartMs === 0 || this.closed) return;
    const now = this.clock.now();
    s.slowStartFrom = now;
    s.slowStartUntil = now + this.slowStartMs;
  }

  private endSlowStart(s: Slot<U>): void {
    s.slowStartUntil = 0;
  }

  private onProbe(i: number, r: ProbeResult): void {
    const s = this.slots[i]!;
    if (this.closed) return;
    if (s.state === (r.healthy ? 'unhealthy' : 'healthy')) {
      // The checker's thresholds were crossed (an ejected upstream is judged when it comes back): one back from failing checks warms up like one back from ejection.
      this.transition(s, r.healthy ? 'healthy' : 'unhealthy');
      if (r.healthy) this.beginSlowStart(s);
      else this.endSlowStart(s);
      this.rebuild();
    }
    if (r.ok && s.state === 'awaiting-check') this.restore(s, 'health-check');
    this.events.emit('health', { id: s.id, ...r });
  }
}
