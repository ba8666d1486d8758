import assert from 'node:assert/strict';
import { clockOption, duration, integer, isInstance, optionsObject, or } from '../config.js';
import { AbortedError, ConfigError, DeadlineExceededError } from '../errors.js';
import { classify } from '../guard/classify.js';
import { deadlineOf, scopedSignal } from '../guard/deadline.js';
import { type GuardContext } from '../guard/guard.js';
import { ConcurrencyLimiter } from '../guard/limiter.js';
import { type Priority } from '../guard/priority.js';
import { type Clock } from '../time/clock.js';
import { type RequestScope } from './scope.js';

/** Options of {@link Admission}, and of damper's admission of HTTP requests (`damperAdmission`, `damperFastify`). */
export interface AdmissionOptions {
  /**
   * The limit the requests are admitted under. Default: a `ConcurrencyLimiter`
   * on its defaults and on `clock`. Pass your own to size it, to share it, or
   * to read its stats; it must be on the same clock as `clock`, because the
   * deadlines handed to it are instants on that clock.
   */
  limiter?: ConcurrencyLimiter;
  /**
   * Deadline, ms, of a request that carries none; with the caller's own, the
   * earlier of the two. Default none: a request without one waits only as
   * long as the limiter's `queueTimeout`.
   */
  timeout?: number;
  /** Seconds a shed request's caller is told to wait before it tries again (HTTP's `Retry-After`). Default 1. */
  retryAfter?: number;
  /** The clock deadlines are read and set on. Default `systemClock`. */
  clock?: Clock;
}

/**
 * Counts of an admission since it was made. The limiter's own counts (its
 * queue, its sheds by reason) are in its `stats()`: these say what became of
 * the requests, which the limiter cannot know.
 */
export interface AdmissionStats {
  /** Requests that got a slot and were handed to the server. */
  readonly admitted: number;
  /** Requests refused by the limiter (HTTP: a 503 with `Retry-After`). */
  readonly shed: number;
  /** Requests dropped before they started because their deadline passed (HTTP: a 504). */
  readonly expired: number;
  /** Requests dropped before they started because their caller went away (nothing is answered). */
  readonly gone: number;
  /** Requests whose deadline or priority could not be read (HTTP: a 400): never counted by the limiter. */
  readonly badRequests: number;
  /** Admitted requests whose work failed. */
  readonly failed: number;
}

/** One request as admission sees it, whatever carried it. */
export interface AdmissionRequest {
  /** What the limiter's events name it by (HTTP: its method and path). */
  readonly key: string;
  /** How important it is; `normal` when absent. */
  readonly priority?: Priority | undefined;
  /** The time its caller gave it, ms from now, as the caller said (a deadline header); none when it said nothing. */
  readonly remainingMs?: number | undefined;
  /** Aborts when the caller has gone (its connection closed): the request is dropped if it has not started, and its work told to stop. */
  readonly signal: AbortSignal;
}

/**
 * Why admission turned a request away: `shed` (no capacity: the caller may
 * try again after `retryAfter` seconds; HTTP 503) or `expired` (the time its
 * caller gave it ran out before it started: the caller has given up; HTTP
 * 504, not 503, because a proxy in between reads 504 as exactly that).
 */
export type Refusal = { readonly reason: 'shed'; readonly retryAfter: number } | { readonly reason: 'expired' };

/** What the server does with one request admission let through, or turned away. */
export interface Door {
  /**
   * Starts the work, in `scope`, and returns a promise that settles when it
   * is over (its response finished, or abandoned): the limiter's slot is
   * held until then, not until the handler returns, because a response that
   * streams is still the work the limit bounds. Should not throw.
   */
  serve(scope: RequestScope): PromiseLike<unknown>;
  /** Answers a request turned away. Never called for a caller seen to have gone. */
  refuse(refusal: Refusal): void;
}

const EXPIRED: Refusal = Object.freeze({ reason: 'expired' });

const NOOP = (): void => {};

/**
 * Admission of incoming requests, whatever carries them (node:http's
 * listener, Fastify's hook, the lab's simulated servers): each request
 * waits for a slot of a {@link ConcurrencyLimiter} by its priority and
 * deadline; one shed is answered at once with when to come back; one whose
 * deadline passed, or whose caller has gone, is never started; an admitted
 * one runs in a {@link RequestScope} whose signal aborts at the deadline or
 * when the caller goes, so the calls it makes carry both on.
 *
 * Overload is answered by refusing the least important work early and
 * cheaply, not by queueing everything until every caller times out (the
 * Discord 2019 herd), and work whose caller has gone is never started (the
 * Missourian 2010 servers kept serving readers who had left).
 */
export class Admission {
  readonly limiter: ConcurrencyLimiter;
  readonly clock: Clock;
  private readonly timeout: number | undefined;
  private readonly shed: Refusal;
  private readonly counts = { admitted: 0, shed: 0, expired: 0, gone: 0, badRequests: 0, failed: 0 };

  constructor(admissionOptions?: AdmissionOptions) {
    const options = optionsObject('Admission options', admissionOptions);
    this.clock = clockOption('clock', options.clock);
    if (options.limiter !== undefined && !isInstance(options.limiter, ConcurrencyLimiter)) throw new ConfigError('limiter must be a ConcurrencyLimiter');
    this.limiter = options.limiter ?? new ConcurrencyLimiter({ clock: this.clock });
    // Zero would answer every request without a deadline of its own as expired.
    this.timeout = options.timeout === undefined ? undefined : duration('timeout', options.timeout, { timer: true, positive: true });
    this.shed = Object.freeze({ reason: 'shed', retryAfter: integer('retryAfter', or(options.retryAfter, 1), 0) });
  }

  /** See {@link AdmissionStats}. */
  stats(): AdmissionStats {
    return { ...this.counts };
  }

  /** The server tells of an admitted request whose work failed. */
  failed(): void {
    this.counts.failed++;
  }

  /** The server tells of a request it refused before admission because what it carried could not be read. */
  badRequest(): void {
    this.counts.badRequests++;
  }

  /** Admits `request`, or turns it away: through `door` either way, unless its caller has gone. */
  admit(request: AdmissionRequest, door: Door): void {
    const remaining = earlier(request.remainingMs, this.timeout);
    if (remaining !== undefined && remaining <= 0) {
      // Answered before anything is held for it: no slot (which the limiter's fast path would take without reading the deadline).
      this.counts.expired++;
      door.refuse(EXPIRED);
      return;
    }
    const deadline = remaining === undefined ? undefined : this.clock.now() + remaining;
    const context: GuardContext = { key: request.key, priority: request.priority, deadline, signal: request.signal, wait: true };
    this.limiter.run(() => this.start(request, deadline, door), context).then(undefined, (error: unknown) => this.dropped(request, door, error));
  }

  /**
   * The limiter's task: hands the request over in its scope, and holds its
   * slot until the work is over. A slot free at once is taken without a
   * look at the caller or the deadline, and one freed for a waiter is handed
   * over a turn later: so both are checked here.
   */
  private start(request: AdmissionRequest, deadline: number | undefined, door: Door): Promise<void> {
    if (request.signal.aborted || (deadline !== undefined && deadline <= this.clock.now())) return Promise.reject(new AbortedError("the request's caller had gone when its slot came", undefined));
    this.counts.admitted++;
    // The caller's own signal serves as the scope's when it already aborts by
    // the deadline (none, or a signal damper made for an attempt in this
    // process, whose deadline it carries): no second controller and timer.
    const inherited = deadlineOf(request.signal);
    const covered = deadline === undefined || (inherited !== undefined && inherited <= deadline);
    const caller = covered ? undefined : scopedSignal(this.clock, request.signal, deadline, () => new DeadlineExceededError("the request's deadline passed"));
    const scope: RequestScope = Object.freeze({ deadline, clock: this.clock, priority: request.priority, signal: caller?.signal ?? request.signal });
    let over: PromiseLike<unknown>;
    try {
      over = door.serve(scope);
    } catch (error) {
      over = Promise.reject(error);
    }
    // The slot is given back whatever the work's end: the door counts its own failures.
    if (caller === undefined) return Promise.resolve(over).then(NOOP, NOOP);
    return Promise.resolve(over).then(
      () => caller.dispose(),
      () => caller.dispose(),
    );
  }

  /** The request never started: refused by the limiter, or its caller left. */
  private dropped(request: AdmissionRequest, door: Door, error: unknown): void {
    if (request.signal.aborted) {
      // The caller has gone: there is no one to answer.
      this.counts.gone++;
      return;
    }
    const outcome = classify(error);
    if (outcome === 'shed') {
      this.counts.shed++;
      door.refuse(this.shed);
      return;
    }
    // The limiter's deadline, or the task's refusal when the deadline came with the slot: the caller's abort is handled above.
    assert.ok(outcome === 'aborted' || outcome === 'deadline', `a request is refused by overload, deadline or abort only, got ${String(error)}`);
    this.counts.expired++;
    door.refuse(EXPIRED);
  }
}

/** The sooner of two times left, either of which may be none. */
function earlier(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  return b === undefined ? a : Math.min(a, b);
}
