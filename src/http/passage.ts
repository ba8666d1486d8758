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
  /** What the work started for this request sees: its deadline, priority, and a signal that aborts when its caller has gone. */
  readonly scope: RequestScope;
  private phase: Phase = 'waiting';
  /** Aborted when the client goes away; the scope's signal also aborts at the deadline. */
  private readonly client = new AbortController();
  private readonly caller: ScopedSignal;
  private readonly socket: Socket;
  private release: (() => void) | undefined;

  constructor(req: IncomingMessage, private readonly res: ServerResponse, clock: Clock, deadline: number | undefined, priority: Priority | undefined) {
    // Owned: the limiter's queue and the deadline's signal watch it without a listener on it.
    const client = ownedSignal(this.client);
    this.caller = scopedSignal(clock, client, deadline, () => new DeadlineExceededError('the request\'s deadline passed'));
    this.scope = Object.freeze({ deadline, clock, priority, signal: this.caller.signal });
    this.socket = req.socket;
    if (res.destroyed || this.socket.destroyed) {
      this.over();
      return;
    }
    res.once('close', this.over);
    // The response's own 'close' is not enough: a pipelined request's response
    // is attached to the socket only when the one before it ends, and node:http
    // never closes a response it has not attached when the socket goes.
    this.socket.once('close', this.over);
  }

  /** Whether the client went away before its response finished: nobody is left to answer. */
  get gone(): boolean {
    return this.client.signal.aborted;
  }

  /** Takes the slot the limiter gave: the returned promise, the limiter's task, settles when the response is over. */
  hold(): Promise<void> {
    this.move('serving');
    return new Promise<void>((resolve) => {
      this.release = resolve;
    });
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
  private readonly over = (): void => {
    this.res.off('close', this.over);
    // A keep-alive socket outlives its requests: one listener left per request would pile up on it.
    this.socket.off('close', this.over);
    this.caller.dispose();
    if (!this.res.writableFinished) abortOwned(this.client, new AbortedError('the client closed the connection before its response finished', undefined));
    if (this.phase !== 'serving') return;
    this.move('released');
    assert.ok(this.release !== undefined, 'a served request holds its slot');
    this.release();
  };
}
