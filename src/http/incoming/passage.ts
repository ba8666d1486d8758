import assert from 'node:assert/strict';
import { type IncomingMessage, type ServerResponse } from 'node:http';
import { type Socket } from 'node:net';
import { AbortedError } from '../../errors.js';
import { abortOwned, ownedSignal } from '../../guard/abort.js';

/**
 * One incoming node:http request's way through admission, from its arrival
 * to the end of its response: whether its client still waits, and when the
 * work admission holds a slot for is over.
 *
 * - `waiting`: headers read, waiting for a slot (or about to get one at once).
 * - `serving`: admitted. The slot is held until the response is over
 *   (finished, or its connection closed), not until the handler returns: a
 *   handler that streams is still doing the work the limit bounds, and a
 *   slot given back early lets more work in than the limit says.
 * - `released`: the response is over and the slot given back, once.
 * - `dropped`: never started: refused, or its client left.
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
  /** Aborts when the client goes away: what admission's limiter, and then the request's scope, watch. */
  readonly signal: AbortSignal;
  private phase: Phase = 'waiting';
  private readonly client = new AbortController();
  private readonly socket: Socket;
  private release: (() => void) | undefined;

  constructor(
    req: IncomingMessage,
    private readonly res: ServerResponse,
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

  /** The request is admitted: settles when its response is over, which gives its slot back. */
  serve(): Promise<void> {
    this.move('serving');
    return new Promise<void>((resolve) => {
      this.release = resolve;
    });
  }

  /** The request was turned away before it started. */
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
    if (this.phase !== 'serving') return;
    this.move('released');
    assert.ok(this.release !== undefined, 'a served request holds its slot');
    this.release();
  };
}
