import assert from 'node:assert/strict';
import type { Dispatcher } from 'undici';
import { type PickedUpstream } from '../../balance/balancer.js';
import { AbortedError, DamperError } from '../../errors.js';
import { abortOwned, onAbort, ownedSignal } from '../../guard/abort.js';
import { isRefusal } from '../../guard/classify.js';
import { deadlineOf } from '../../guard/deadline.js';
import { NEVER_ABORTS } from '../../guard/guard.js';
import { type Priority } from '../../guard/priority.js';
import { headerValues, readPriority, readRemainingMs, readRetryAfterMs, type RequestHeaders, withHeaders, writePriority, writeRemainingMs } from '../headers.js';
import { type HttpDependency, type HttpUpstream, type OutgoingCall } from './http-dependency.js';
import { UpstreamStatusError } from './upstream-status.js';

type Controller = Dispatcher.DispatchController;
type Handler = Dispatcher.DispatchHandler;
type Headers = Parameters<NonNullable<Handler['onResponseStart']>>[2];

/** Bytes of a held error response kept while `Retry` decides; beyond it the upstream is paused. 503 bodies are small. */
const HOLD_BYTES = 64 * 1024;

/**
 * One request sent through an {@link HttpDependency} by the undici
 * interceptor: the controller its caller's handler holds for the whole
 * request, and the attempts behind it.
 *
 * The caller's handler sees one request: `onRequestStart` once, then one
 * response or one error, whatever was retried underneath. An attempt's
 * response is delivered as it streams when its status is an answer; when its
 * status counts as the upstream failing (a 503), the response is *held*
 * while `Retry` decides: discarded if a retry follows, delivered as the answer
 * if none does. So a caller never sees half of a response that was then
 * retried, and never gets an exception where the upstream gave an answer.
 */
export class Exchange implements Controller {
  /**
   * The request's own signal, aborted by `abort`, made only when something
   * must watch it (see {@link arm}): most requests never need one. Owned
   * (aborted through `abortOwned` only), so the attempts watch it with no
   * event listener: a listener added and removed per request cost ~15 µs on
   * Node 20.
   */
  private own: { readonly controller: AbortController; readonly signal: AbortSignal } | undefined;
  /** The attempt whose response is reaching the caller. */
  private current: AttemptHandler | undefined;
  /** The attempt whose failing response is held while Retry decides. */
  private held: AttemptHandler | undefined;
  /** The attempts sent and not over: one, or a hedged pair. */
  private readonly live = new Set<AttemptHandler>();
  private pausedByCaller = false;
  private state: 'waiting' | 'delivering' | 'done' = 'waiting';
  private call: OutgoingCall | undefined;
  /** The priority to send on, when the request does not carry its own header. */
  private sentPriority: Priority | undefined;

  constructor(
    private readonly dependency: HttpDependency,
    private readonly dispatch: Dispatcher.Dispatch,
    private readonly options: Dispatcher.DispatchOptions,
    private readonly handler: Handler,
  ) {}

  get aborted(): boolean {
    return this.own?.signal.aborted === true;
  }

  get paused(): boolean {
    return this.pausedByCaller;
  }

  get reason(): Error | null {
    return this.own?.signal.aborted === true ? asError(this.own.signal.reason) : null;
  }

  abort(reason: Error): void {
    const bare = this.own === undefined;
    abortOwned(this.arm().controller, reason);
    // An attempt of a bare call was given no signal to watch: it is ended here.
    if (bare) for (const attempt of this.live) attempt.callerAborted();
  }

  /**
   * Arms the request: its own signal, made now if it was not, and from then on the
   * call's too ({@link Dependency.arm}). A bare call (`Dependency.bare`: no
   * deadline, no attempt timeout, no hedge, no request being served) starts
   * without it, so a request that succeeds at its first attempt makes none;
   * it is made when the caller aborts, or when the first attempt fails,
   * before anything but that attempt could have read the call's signal
   * (`Retry`'s backoff and the next attempt watch it).
   */
  arm(): { readonly controller: AbortController; readonly signal: AbortSignal } {
    if (this.own !== undefined) return this.own;
    const controller = new AbortController();
    const own = (this.own = { controller, signal: ownedSignal(controller) });
    if (this.call !== undefined) this.dependency.arm(this.call, own.signal);
    return own;
  }

  pause(): void {
    this.pausedByCaller = true;
    this.current?.controller?.pause();
  }

  resume(): void {
    this.pausedByCaller = false;
    this.current?.controller?.resume();
  }

  /** Tells the caller's handler the request has started, reads what the call carries, and sends it. */
  start(): void {
    this.handler.onRequestStart?.(this, {});
    let call: OutgoingCall;
    try {
      call = this.call = this.readCall();
    } catch (error) {
      this.fail(error);
      return;
    }
    if (this.own === undefined && !this.dependency.bare(call)) this.arm();
    this.dependency.send(call, this.attempt).then(undefined, this.failed);
  }

  /**
   * The call's deadline, priority and signal: the request's own headers (the
   * caller's explicit word), else the incoming request being served, else the
   * dependency's defaults (`Dependency.callOf`); the earlier deadline wins.
   */
  private readCall(): OutgoingCall {
    const { dependency, options } = this;
    const [deadlineValue, priorityValue] = headerValues(options.headers as RequestHeaders, dependency.deadlineHeader, dependency.priorityHeader);
    const ownMs = readRemainingMs(dependency.deadlineHeader, deadlineValue);
    const ownPriority = readPriority(dependency.priorityHeader, priorityValue);
    // Aborted already (in the handler's onRequestStart), the call starts with the signal; else it starts bare when it can.
    const call = dependency.callOf(ownMs === undefined ? undefined : dependency.clock.now() + ownMs, ownPriority, this.own?.signal ?? NEVER_ABORTS, dependency.retries(options.method) && replayable(options.body));
    if (ownPriority === undefined) this.sentPriority = call.priority;
    return call;
  }

  /** One attempt to `upstream`: settles when its outcome is known (see {@link AttemptHandler}). */
  private readonly attempt = (upstream: PickedUpstream<HttpUpstream>, signal: AbortSignal): Promise<void> => {
    // A retry is being sent: the failing response held for the last attempt will not be the answer.
    // (A hedge is sent while the first attempt is out, never after it failed: nothing is held then.)
    this.discardHeld();
    return new Promise<void>((resolve, reject) => {
      const { dependency, options } = this;
      const attempt = new AttemptHandler(this, upstream, signal, resolve, reject);
      this.live.add(attempt);
      attempt.watch();
      const set: [string, string][] = [];
      // The time left for this attempt: the earlier of the deadline and its own timeout.
      const until = signal === NEVER_ABORTS ? undefined : deadlineOf(signal);
      if (until !== undefined) set.push([dependency.deadlineHeader, writeRemainingMs(until - dependency.clock.now())]);
      if (this.sentPriority !== undefined) set.push([dependency.priorityHeader, writePriority(this.sentPriority)]);
      try {
        // Nothing to add (no deadline, no priority): the caller's headers go as they are, uncopied.
        this.dispatch(set.length === 0 ? { ...options, origin: upstream.target.origin } : { ...options, origin: upstream.target.origin, headers: withHeaders(options.headers as RequestHeaders, set) }, attempt);
      } catch (error) {
        attempt.onResponseError(undefined, asError(error));
      }
    });
  };

  /** Whether a response with `status` is held as the upstream's failure rather than delivered. */
  holds(status: number): boolean {
    return this.state === 'waiting' && this.dependency.failsOn(status);
  }

  /** Whether another attempt's response already reaches the caller: the other of a hedged pair has lost. */
  get answered(): boolean {
    return this.state !== 'waiting';
  }

  /** `attempt` is over (delivered, failed, discarded): it no longer needs to be cancelled. */
  over(attempt: AttemptHandler): void {
    this.live.delete(attempt);
  }

  hold(attempt: AttemptHandler): void {
    // Of a hedged pair that both failed, the later failure is the answer if no retry follows (it is what Retry is given).
    if (this.held !== undefined) this.discardHeld();
    this.held = attempt;
  }

  /** The response of `attempt` starts to reach the caller: from here on nothing is retried, and the other of a hedged pair is cancelled. */
  deliverStart(attempt: AttemptHandler, status: number, headers: Headers, message: string | undefined): void {
    assert(this.state === 'waiting', 'one response per request');
    this.state = 'delivering';
    this.current = attempt;
    if (this.held !== attempt) this.discardHeld();
    for (const other of this.live) if (other !== attempt) other.cancel();
    if (this.call !== undefined) this.call.delivering = true;
    if (this.pausedByCaller) attempt.controller?.pause();
    this.handler.onResponseStart?.(this, status, headers, message);
  }

  deliverData(chunk: Buffer): void {
    this.handler.onResponseData?.(this, chunk);
  }

  deliverEnd(trailers: Headers): void {
    if (this.state === 'done') return;
    this.state = 'done';
    this.handler.onResponseEnd?.(this, trailers);
  }

  private readonly failed = (error: unknown): void => this.fail(error);

  /**
   * The request failed for good (`send` rejected, or the body broke): the
   * held response if that is the answer, else the error. A response still
   * held is the last answer any upstream gave: no attempt was sent after it
   * (sending one discards it). So when the retry that would have replaced it
   * was refused here (the breaker it just opened, a throttle, every upstream
   * saturated), the caller gets that answer, not the local refusal: a 503
   * the upstream really sent says more than "circuit open". The caller's own
   * abort is reported as such.
   */
  fail(error: unknown): void {
    if (this.state === 'done') return;
    const held = this.held;
    if (held !== undefined && !this.aborted && (held.error === error || isRefusal(error))) {
      this.held = undefined;
      held.release();
      return;
    }
    this.discardHeld();
    this.state = 'done';
    // The caller who aborted hears their own reason back, as from undici itself.
    const reported = this.reason ?? asError(error);
    // Mid-body (the deadline or an abort cut the stream): the attempt's connection is torn down too.
    this.current?.controller?.abort(reported);
    this.handler.onResponseError?.(this, reported);
  }

  private discardHeld(): void {
    const held = this.held;
    if (held === undefined) return;
    this.held = undefined;
    held.discard();
  }
}

/**
 * The handler of one attempt: undici's callbacks for one dispatch to one
 * upstream. Its promise (the attempt, as the guards and `Retry` see it)
 * resolves when a delivered response has ended, and rejects with the
 * attempt's error, or with an {@link UpstreamStatusError} at the headers of a
 * response that counts as the upstream failing, which is then held.
 */
class AttemptHandler implements Handler {
  controller: Controller | undefined;
  error: UpstreamStatusError | undefined;
  private phase: 'sending' | 'held' | 'delivering' | 'over' = 'sending';
  private status = 0;
  private headers: Headers = {};
  private message: string | undefined;
  private readonly chunks: Buffer[] = [];
  private bytes = 0;
  private ending: { readonly trailers: Headers } | { readonly error: Error } | undefined;
  /** Why the attempt was over before undici started it: the reason its dispatch is aborted with when undici does. */
  private endedBy: Error | undefined;
  private unsubscribe: () => void = NOOP;

  constructor(
    private readonly exchange: Exchange,
    private readonly upstream: PickedUpstream<HttpUpstream>,
    private readonly signal: AbortSignal,
    private readonly resolve: () => void,
    private readonly reject: (error: unknown) => void,
  ) {}

  /**
   * Watches the attempt's signal (its timeout, the deadline, the caller's
   * abort) from the moment it is dispatched. undici starts a request
   * (`onRequestStart`, the controller that can abort it) only once it has a
   * connection, and hears no abort before (nodejs/undici#386): a request
   * waiting for a connection to a server slow to accept (frozen, its accept
   * queue full) would outlive its timeout and its deadline by the connect
   * timeout, 10 s by default, every call in the limiter's count and nothing
   * counted against the upstream meanwhile. Seen as a jam in the lab's real
   * runs (issue 30): users' calls ending seconds after their timeout.
   */
  watch(): void {
    const signal = this.signal;
    // The first attempt of a bare call: only its caller can end it, through the exchange (`callerAborted`).
    if (signal === NEVER_ABORTS) return;
    this.unsubscribe = onAbort(signal, () => this.walkAway(asError(signal.reason)));
  }

  onRequestStart(controller: Controller): void {
    this.controller = controller;
    if (this.phase === 'over') {
      // Over before undici started it: walked away from while it waited for a connection, or the other of a hedged pair answered first.
      controller.abort(this.endedBy!);
      return;
    }
    if (this.signal === NEVER_ABORTS) {
      if (this.exchange.aborted) this.callerAborted();
      return;
    }
    if (this.signal.aborted) controller.abort(asError(this.signal.reason));
  }

  /** The caller aborted a bare call while this, its first attempt, was out: the dispatch ends with the caller's reason. */
  callerAborted(): void {
    if (this.signal === NEVER_ABORTS) this.walkAway(this.exchange.reason!);
  }

  /**
   * The attempt's time is up (or its caller left): a started dispatch is
   * aborted, and undici's error ends the attempt; one undici has not started
   * (still waiting for a connection) ends now, and is aborted when undici
   * starts it (`onRequestStart`).
   */
  private walkAway(reason: Error): void {
    if (this.controller !== undefined) {
      this.controller.abort(reason);
      return;
    }
    if (this.phase !== 'sending') return;
    this.phase = 'over';
    this.endedBy = reason;
    this.unsubscribe();
    this.exchange.over(this);
    this.failed(reason);
  }

  onResponseStart(controller: Controller, status: number, headers: Headers, message?: string): void {
    this.controller = controller;
    if (this.phase === 'over') {
      controller.abort(new AbortedError(`the attempt to upstream ${this.upstream.id} was over before its response`, undefined));
      return;
    }
    if (status < 200) return; // 1xx informational: the response is yet to come.
    if (this.signal.aborted || this.exchange.aborted) {
      // Walked away from (its timeout, the deadline, the caller): a late answer is no answer.
      controller.abort(this.exchange.reason ?? asError(this.signal.reason));
      return;
    }
    if (this.exchange.answered) {
      // The other of a hedged pair is already answering: this one lost.
      this.cancel();
      return;
    }
    if (this.exchange.holds(status)) {
      this.phase = 'held';
      this.status = status;
      this.headers = headers;
      this.message = message;
      this.error = new UpstreamStatusError(status, this.upstream.id, readRetryAfterMs(headers['retry-after'], headers.date));
      this.unsubscribe();
      this.exchange.hold(this);
      this.failed(this.error);
      return;
    }
    this.phase = 'delivering';
    this.exchange.deliverStart(this, status, headers, message);
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    if (this.phase === 'delivering') this.exchange.deliverData(chunk);
    else if (this.phase === 'held') {
      this.chunks.push(chunk);
      this.bytes += chunk.length;
      if (this.bytes > HOLD_BYTES) controller.pause();
    }
  }

  onResponseEnd(_controller: Controller, trailers: Headers): void {
    if (this.phase === 'held') {
      this.ending = { trailers };
      return;
    }
    if (this.phase !== 'delivering') return;
    this.phase = 'over';
    this.unsubscribe();
    this.exchange.over(this);
    this.exchange.deliverEnd(trailers);
    this.resolve();
  }

  onResponseError(_controller: Controller | undefined, error: Error): void {
    if (this.phase === 'held') {
      this.ending = { error };
      return;
    }
    const was = this.phase;
    this.phase = 'over';
    this.unsubscribe();
    this.exchange.over(this);
    if (was === 'delivering') this.exchange.fail(error);
    if (was !== 'over') this.failed(error);
  }

  /**
   * Rejects the attempt. The first attempt of a bare call makes the
   * request's signal first (`Exchange.arm`), so `Retry`'s backoff and the
   * next attempt have one to watch; and when its caller aborted it, says so
   * (an `AbortedError`), so no guard counts it against the upstream.
   */
  private failed(error: unknown): void {
    if (this.signal === NEVER_ABORTS) {
      if (this.exchange.aborted) error = new AbortedError(`the request to upstream ${this.upstream.id} was aborted by its caller`, this.exchange.reason);
      else this.exchange.arm();
    }
    this.reject(error);
  }

  /** The other of a hedged pair answered: end this one, its connection and its promise. */
  cancel(): void {
    if (this.phase === 'over' || this.phase === 'delivering') return;
    const error = new AbortedError(`the attempt to upstream ${this.upstream.id} lost to the other of a hedged pair`, undefined);
    this.phase = 'over';
    this.endedBy = error;
    this.unsubscribe();
    this.exchange.over(this);
    this.chunks.length = 0;
    this.controller?.abort(error);
    this.reject(error);
  }

  /** The held response is the answer: replay what arrived, then let the rest stream. */
  release(): void {
    assert(this.phase === 'held', 'only a held response is released');
    this.phase = 'delivering';
    this.exchange.deliverStart(this, this.status, this.headers, this.message);
    for (const chunk of this.chunks.splice(0)) this.exchange.deliverData(chunk);
    const ending = this.ending;
    if (ending === undefined) {
      this.controller?.resume();
      return;
    }
    this.phase = 'over';
    if ('trailers' in ending) this.exchange.deliverEnd(ending.trailers);
    else this.exchange.fail(ending.error);
  }

  /** A retry replaces the held response: drop it, and its connection if it is still streaming. */
  discard(): void {
    const streaming = this.ending === undefined;
    this.phase = 'over';
    this.exchange.over(this);
    this.chunks.length = 0;
    if (streaming) this.controller?.abort(new AbortedError(`the response of upstream ${this.upstream.id} was discarded: a retry was sent`, undefined));
  }
}

const NOOP = (): void => {};

/** Whether a request body can be sent again: none, or bytes; a stream is read once. */
function replayable(body: unknown): boolean {
  return body === undefined || body === null || typeof body === 'string' || body instanceof Uint8Array;
}

function asError(reason: unknown): Error {
  if (reason instanceof Error) return reason;
  return new DamperError('ABORTED', `aborted: ${String(reason)}`);
}
