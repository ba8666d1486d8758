import { type Balancer, type PickedUpstream } from '../balance/balancer.js';
import { OverloadedError } from '../errors.js';
import { classify, isAbort, isOverloadSignal } from '../guard/classify.js';
import { enterGates, type Gate, type GuardContext, leaveGates, runNested, startTask } from '../guard/guard.js';
import { type Clock } from '../time/clock.js';
import { type Hedging } from './hedge.js';
import { type DependencyCall, type UpstreamGates } from './dependency.js';

/** One attempt: send the call to `upstream`, on `signal`; settle when its outcome is known. */
export type Attempt<U, T> = (upstream: PickedUpstream<U>, signal: AbortSignal) => Promise<T>;

/**
 * The routing of one call across its attempts: each attempt picks an
 * upstream, avoiding the one the previous attempt failed on, and skips the
 * upstreams whose guards refuse it. One object per call, so the retry's
 * attempts share what the earlier ones learnt.
 *
 * @internal
 */
export class Route<U, T> {
  /** The upstream the last attempt failed on, and those whose guards refused this one; made at the first failure (most calls have none). */
  private avoid: Set<string> | undefined;
  /** The upstreams this call waits on now, kept only when it may be hedged: a hedge never goes to one of them. */
  private readonly trying: Set<string> | undefined;

  constructor(
    private readonly balancer: Balancer<U>,
    /** Each upstream's gates (its throttle, then its breaker), by id. */
    private readonly gatesOf: ReadonlyMap<string, UpstreamGates>,
    private readonly call: DependencyCall,
    private readonly attemptAt: Attempt<U, T>,
    private readonly countsAgainst: (error: unknown) => boolean,
    /** The dependency's hedging, for a call that may be repeated; none otherwise. */
    private readonly hedging: Hedging | undefined,
    private readonly clock: Clock,
  ) {
    this.trying = hedging === undefined ? undefined : new Set();
  }

  readonly attempt = (signal: AbortSignal): Promise<T> => (this.hedging === undefined ? this.next(signal, undefined) : this.hedging.race(signal, this));

  /** The first of a hedged pair: an attempt as any other. */
  first(signal: AbortSignal): Promise<T> {
    return this.next(signal, undefined);
  }

  /**
   * The hedge: to an upstream this call is not waiting on, through its
   * guards; a local refusal ends the hedge (it is not sent elsewhere).
   * Undefined when no other upstream is routable.
   */
  second(signal: AbortSignal): Promise<T> | undefined {
    const trying = this.trying!;
    const upstream = this.balancer.pick({ priority: this.call.priority, avoid: this.avoid === undefined ? trying : new Set([...this.avoid, ...trying]) });
    if (upstream === undefined) return undefined;
    if (trying.has(upstream.id)) {
      this.balancer.release(upstream);
      return undefined;
    }
    return this.send(upstream, this.gatesOf.get(upstream.id)!.all, signal, FINAL);
  }

  /** Picks an upstream not yet refused in this attempt and sends through its guards; on a refusal, the next. */
  private next(signal: AbortSignal, refused: Map<string, unknown> | undefined): Promise<T> {
    const { balancer, call } = this;
    const upstream = balancer.pick({ priority: call.priority, avoid: this.avoid });
    if (upstream === undefined) return Promise.reject(new OverloadedError(`every upstream is saturated for priority ${String(call.priority ?? 'normal')}; shed`));
    const gates = this.gatesOf.get(upstream.id)!;
    if (refused?.has(upstream.id) !== true) return this.send(upstream, gates.all, signal, refused);
    // Every upstream left refused this attempt. Open breakers take upstreams
    // out as surely as ejection does, so they are held to its bound: past
    // it (the only upstream, or every one), the attempt goes through the
    // upstream's throttle alone, which sheds in proportion to what the
    // upstream still serves. A breaker on the last capacity would turn a
    // brownout into an outage (principle 5; docs/lab.md, retry-storm).
    if (gates.pastBreaker !== undefined && classify(refused.get(upstream.id)) === 'breaker-open' && !balancer.mayBeOut(openBreakers(refused))) return this.send(upstream, gates.pastBreaker, signal, FINAL);
    // Fail fast (principle 4) with this one's refusal (a BreakerOpenError says when it probes again); nothing was sent.
    balancer.release(upstream);
    return Promise.reject(refused.get(upstream.id));
  }

  /**
   * Sends through `gates`, the upstream's (or all but its breaker). The
   * route enters and leaves them itself, in the one reaction it has on the
   * attempt anyway: while they all admit at once (a closed breaker, a
   * throttle that refused nothing), an attempt costs no guard a promise or a
   * closure. A local refusal tries the next upstream, `refused` holding this
   * attempt's refusals so far; with `FINAL` it is the attempt's end.
   */
  private send(upstream: PickedUpstream<U>, gates: readonly Gate[], signal: AbortSignal, refused: Map<string, unknown> | undefined | typeof FINAL): Promise<T> {
    const { balancer, call, trying } = this;
    balancer.start(upstream);
    let sent = false;
    let started = 0;
    const begin = (s: AbortSignal): Promise<T> => {
      sent = true;
      if (trying !== undefined) {
        trying.add(upstream.id);
        started = this.clock.now();
      }
      return this.attemptAt(upstream, s);
    };
    const context: GuardContext = { key: upstream.id, signal, wait: true, priority: call.priority, deadline: call.deadline };
    const tokens: number[] = [];
    const entered = enterGates(gates, context, tokens);
    // A gate that cannot admit at once (a breaker not closed, a throttle shedding) decides in its own run, nested inside those entered.
    const outcome = entered === gates.length ? startTask(begin, signal) : runNested(gates, entered, begin, context);
    return outcome.then(
      (value) => {
        leaveGates(gates, tokens, entered, context, true, undefined);
        trying?.delete(upstream.id);
        balancer.finish(upstream, true);
        this.hedging?.record(this.clock.now() - started);
        return value;
      },
      (error: unknown) => {
        leaveGates(gates, tokens, entered, context, false, error);
        trying?.delete(upstream.id);
        if (!sent) {
          // Refused by this upstream's breaker or throttle: it never saw the call, so it says nothing of it.
          balancer.release(upstream);
          if (refused === FINAL) throw error;
          (this.avoid ??= new Set()).add(upstream.id);
          return this.next(signal, (refused ?? new Map()).set(upstream.id, error));
        }
        // The caller's own abort says nothing of the upstream; an attempt cut at its timeout or the deadline does (a hung upstream answers nothing else).
        if (call.signal.aborted || isAbort(error)) balancer.release(upstream);
        // An upstream that sheds (a 503 or 429) is alive and protecting itself: its breaker and throttle answer that, the balancer's ejection does not (principle 5: overload is answered by shedding, not by removing capacity).
        else balancer.finish(upstream, !this.countsAgainst(error) || isOverloadSignal(error));
        // The next attempt avoids the upstream this one failed on (and only it: the refusals of this attempt may have lifted).
        if (this.avoid === undefined) this.avoid = new Set();
        else this.avoid.clear();
        this.avoid.add(upstream.id);
        throw error;
      },
    );
  }
}

/** The upstreams of an attempt's refusals whose breakers were open, by id. */
function openBreakers(refused: ReadonlyMap<string, unknown>): ReadonlySet<string> {
  const open = new Set<string>();
  for (const [id, error] of refused) if (classify(error) === 'breaker-open') open.add(id);
  return open;
}

/** A refusal that is final: the pass past a bounded breaker, and a hedge, are not sent elsewhere. */
const FINAL = 'final';
