import assert from 'node:assert/strict';
import { type IncomingMessage, type ServerResponse } from 'node:http';
import { type Socket } from 'node:net';
import { AbortedError, DeadlineExceededError } from '../errors.js';
import { abortOwned, ownedSignal } from '../guard/abort.js';
import { scopedSignal, type ScopedSignal } from '../guard/deadline.js';
import { type Priority } from '../guard/priority.js';
import { type Clock } from '../time/clock.js';
import { type RequestScope } from './scope.js';

/**
 * One incoming request's way through admission, from its arrival to the end
 * of its response: whether its caller still waits, and the limiter's slot it
 * holds while it is served.
 *
 * - `waiting`: headers read, waiting for a slot (or about to get one at once).
 * - `serving`: the slot is held and the work runs. It is held until the
 *   response is over (finished, or its connection closed), not until the
 *   handler returns: a handler that streams is still doing the work the limit
 *   bounds, and a slot given back early lets more work in than the limit says.
 * - `released`: the response is over and the slot given back, once.
 * - `dropped`: never started: refused by the limiter, or its caller left.
 */
type Phase = 'waiting' | 'serving' | 'released' | 'dropped';

const LEGAL: Readonly<Record<Phase, readonly Phase[]>> = {
  waiting: ['serving', 'dropped'],
  serving: ['released'],
  released: [],
  dropped: [],
};

/** @internal */
export class Passage {
  /**
   * Aborts when the client goes away: what the limiter's queue watches. The
   * deadline is the queue's to enforce apart, so that it counts the requests
   * it held past it (an abort it would count nowhere).
   */
  readonly signal: AbortSignal;
  private phase: Phase = 'waiting';
  private readonly client = new AbortController();
  private readonly socket: Socket;
  /** The served request's signal: the client's, and the deadline's. Made when served: a queued request needs no timer of its own. */
  private caller: ScopedSignal | undefined;
  private release: (() => void) | undefined;

  constructor(
    req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly clock: Clock,
    private readonly deadline: number | undefined,
    private readonly priority: Priority | undefined,
  ) {
    // Owned: the limiter's queue and the deadline's signal watch it without a listener on it.
    this.signal = ownedSignal(this.client);
    this.socket = req.socket;
    if (res.destroyed || this.socket.destroyed) {
      this.ended();
      return;
    }
    res.once('close', this.ended);
    // The response's own 'close' is not enough: a pipelined request's response
    // is attached to the socket only when the one before it ends, and node:http
    // never closes a response it has not attached when the socket goes.
    this.socket.once('close', this.ended);
  }

  /** Whether the client went away before its response finished: nobody is left to answer. */
  get gone(): boolean {
    return this.client.signal.aborted;
  }

  /**
   * Takes the slot the limiter gave, if a caller still waits: the scope the
   * work runs in, and the promise (the limiter's task's) that holds the slot
   * until the response is over. Undefined when the client left or the deadline
   * passed: a slot free at once is taken without a look at either, and one
   * freed for a waiter is handed over a turn later.
   */
  hold(): { readonly scope: RequestScope; readonly over: Promise<void> } | undefined {
    if (this.gone || (this.deadline !== undefined && this.deadline <= this.clock.now())) return undefined;
    this.move('serving');
    this.caller = scopedSignal(this.clock, this.signal, this.deadline, () => new DeadlineExceededError("the request's deadline passed"));
    const scope: RequestScope = Object.freeze({ deadline: this.deadline, clock: this.clock, priority: this.priority, signal: this.caller.signal });
    const over = new Promise<void>((resolve) => {
      this.release = resolve;
    });
    return { scope, over };
  }

  /** The request was never started. */
  drop(): void {
    this.move('dropped');
  }

  private move(to: Phase): void {
    assert.ok(LEGAL[this.phase].includes(to), `a request's admission may not go from ${this.phase} to ${to}`);
    this.phase = to;
  }

  /** The response finished or its connection closed, whichever is heard first (both are, for most). */
  private readonly ended = (): void => {
    this.res.off('close', this.ended);
    // A keep-alive socket outlives its requests: one listener left per request would pile up on it.
    this.socket.off('close', this.ended);
    if (!this.res.writableFinished) abortOwned(this.client, new AbortedError('the client closed the connection before its response finished', undefined));
    // After the abort, which reaches the served request's signal only while it is hooked to the client's.
    this.caller?.dispose();
    if (this.phase !== 'serving') return;
    this.move('released');
    assert.ok(this.release !== undefined, 'a served request holds its slot');
    this.release();
  };
}
