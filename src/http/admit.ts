import assert from 'node:assert/strict';
import { type IncomingMessage, type ServerResponse } from 'node:http';
import { clockOption, duration, integer, isInstance, or } from '../config.js';
import { AbortedError, ConfigError, DeadlineExceededError, HeaderError, OverloadedError } from '../errors.js';
import { type GuardContext } from '../guard/guard.js';
import { ConcurrencyLimiter } from '../guard/limiter.js';
import { type Priority } from '../guard/priority.js';
import { type Clock } from '../time/clock.js';
import { DEADLINE_HEADER, PRIORITY_HEADER, readPriority, readRemainingMs } from './headers.js';
import { Passage } from './passage.js';
import { type RequestScope } from './scope.js';

/**
 * Admission of incoming requests to a {@link ConcurrencyLimiter}, whatever
 * server they came through (node:http's listener, Fastify's hook): the
 * request's deadline and priority read from its headers, a slot waited for
 * by priority, and the answer when it gets none. What runs once it has one
 * is the server's (a {@link Door}).
 */

/** Options of damper's admission of incoming requests (`damperAdmission`, `damperFastify`). */
export interface AdmissionOptions {
  /**
   * The limit the requests are admitted under. Default: a `ConcurrencyLimiter`
   * on its defaults and on `clock`. Pass your own to size it, to share it, or
   * to read its stats; it must be on the same clock as `clock`, because the
   * deadlines handed to it are instants on that clock.
   */
  limiter?: ConcurrencyLimiter;
  /** The header that carries the time left before the caller's deadline, ms. Default `x-damper-deadline-ms`. */
  deadlineHeader?: string;
  /**
   * The header that carries the request's priority. Default `x-damper-priority`.
   * Any caller can send `critical`: strip it at the edge of what you trust.
   */
  priorityHeader?: string;
  /**
   * Deadline, ms, of a request that carries none; with a deadline header, the
   * earlier of the two. Default none: a request without the header waits
   * only as long as the limiter's `queueTimeout`.
   */
  timeout?: number;
  /** Seconds sent in `Retry-After` on a 503 for a shed request. Default 1. */
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
  /** Requests that got a slot and were handed to the handler. */
  readonly admitted: number;
  /** Requests refused by the limiter (a 503 with `Retry-After`). */
  readonly shed: number;
  /** Requests dropped before they started because their deadline passed (a 504). */
  readonly expired: number;
  /** Requests dropped before they started because their client went away (nothing written). */
  readonly gone: number;
  /** Requests with a deadline or priority header that could not be read (a 400): never counted by the limiter. */
  readonly badRequests: number;
  /** Admitted requests whose handler threw or rejected. */
  readonly failed: number;
}

/** How admission answers a request it turns away: a status, a short text body, and `Retry-After` in seconds when shed. @internal */
export interface Refusal {
  readonly status: 400 | 503 | 504;
  readonly body: string;
  readonly retryAfter: number | undefined;
}

/** What the server does with one request admission let through, or turned away. @internal */
export interface Door {
  /** Starts the work, in `scope`. Never throws: the slot is held until the response is over. */
  serve(scope: RequestScope): void;
  /** Writes a refusal. Called only while the client is there. */
  refuse(refusal: Refusal): void;
}

/**
 * A request whose deadline passed before it started gets a 504, not a 503:
 * the server did not refuse it for lack of capacity (retrying later would
 * help), the time its caller gave it ran out (the caller has given up, and a
 * proxy in between reads 504 as exactly that).
 */
const EXPIRED: Refusal = { status: 504, body: 'deadline passed before the request started\n', retryAfter: undefined };

/** Header names as node:http hands them over: lower case, an RFC 9110 token. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;

/** @internal */
export class Admission {
  readonly limiter: ConcurrencyLimiter;
  private readonly clock: Clock;
  private readonly deadlineHeader: string;
  private readonly priorityHeader: string;
  private readonly timeout: number | undefined;
  private readonly shed: Refusal;
  private readonly counts = { admitted: 0, shed: 0, expired: 0, gone: 0, badRequests: 0, failed: 0 };

  /** `options` already read by `optionsObject`, under the caller's name. */
  constructor(options: Partial<AdmissionOptions>) {
    this.clock = clockOption('clock', options.clock);
    if (options.limiter !== undefined && !isInstance(options.limiter, ConcurrencyLimiter)) throw new ConfigError('limiter must be a ConcurrencyLimiter');
    this.limiter = options.limiter ?? new ConcurrencyLimiter({ clock: this.clock });
    this.deadlineHeader = headerName('deadlineHeader', or(options.deadlineHeader, DEADLINE_HEADER));
    this.priorityHeader = headerName('priorityHeader', or(options.priorityHeader, PRIORITY_HEADER));
    if (this.deadlineHeader === this.priorityHeader) throw new ConfigError(`deadlineHeader and priorityHeader must differ, both are ${this.deadlineHeader}`);
    // Zero would answer every request without a deadline header with a 504.
    this.timeout = options.timeout === undefined ? undefined : duration('timeout', options.timeout, { timer: true, positive: true });
    const retryAfter = integer('retryAfter', or(options.retryAfter, 1), 0);
    this.shed = { status: 503, body: `overloaded; retry after ${retryAfter} s\n`, retryAfter };
  }

  /** See {@link AdmissionStats}. */
  stats(): AdmissionStats {
    return { ...this.counts };
  }

  /** The server tells of an admitted request whose work failed. */
  failed(): void {
    this.counts.failed++;
  }

  /** Admits `req`, or turns it away: through `door` either way, unless its client has gone. */
  admit(req: IncomingMessage, res: ServerResponse, door: Door): void {
    const asked = this.read(req);
    if (asked instanceof HeaderError) {
      // Refused before the limiter sees it: a malformed header is the caller's slip, not load.
      this.counts.badRequests++;
      door.refuse({ status: 400, body: `${asked.message}\n`, retryAfter: undefined });
      return;
    }
    const remaining = earlier(asked.remaining, this.timeout);
    if (remaining === 0) {
      // A free slot is taken without reading the deadline (the limiter's fast path): this one is read here.
      this.counts.expired++;
      door.refuse(EXPIRED);
      return;
    }
    const deadline = remaining === undefined ? undefined : this.clock.now() + remaining;
    const passage = new Passage(req, res, this.clock, deadline, asked.priority);
    const context: GuardContext = { key: keyOf(req), priority: asked.priority, deadline, signal: passage.signal, wait: true };
    this.limiter.run(() => this.start(passage, door), context).then(undefined, (error: unknown) => this.dropped(passage, door, error));
  }

  private read(req: IncomingMessage): { remaining: number | undefined; priority: Priority | undefined } | HeaderError {
    // Distinct: node:http joins a repeated x- header with commas, which would read as a malformed value, not as sent twice.
    const headers = req.headersDistinct;
    try {
      return { remaining: readRemainingMs(this.deadlineHeader, headers[this.deadlineHeader]), priority: readPriority(this.priorityHeader, headers[this.priorityHeader]) };
    } catch (error) {
      if (error instanceof HeaderError) return error;
      throw error;
    }
  }

  /** The limiter's task: hands the request over, and holds its slot until the response is over. */
  private start(passage: Passage, door: Door): Promise<void> {
    const served = passage.hold();
    if (served === undefined) return Promise.reject(new AbortedError("the request's caller had gone when its slot came", undefined));
    this.counts.admitted++;
    door.serve(served.scope);
    return served.over;
  }

  /** The request never started: refused by the limiter, or its caller left. */
  private dropped(passage: Passage, door: Door, error: unknown): void {
    passage.drop();
    if (passage.gone) {
      // The socket is closed: there is no one to write to.
      this.counts.gone++;
      return;
    }
    if (error instanceof OverloadedError) {
      this.counts.shed++;
      door.refuse(this.shed);
      return;
    }
    // The limiter's deadline, or the task's refusal when the deadline came with the slot: the client's abort is handled above.
    assert.ok(error instanceof DeadlineExceededError || error instanceof AbortedError, `a request is refused by overload, deadline or abort only, got ${String(error)}`);
    this.counts.expired++;
    door.refuse(EXPIRED);
  }
}

/**
 * What the limiter's events and messages name the request by: its method and
 * path. Not the query string, which can carry tokens into logs.
 */
function keyOf(req: IncomingMessage): string {
  const url = req.url ?? '';
  const query = url.indexOf('?');
  return `${req.method ?? 'GET'} ${query === -1 ? url : url.slice(0, query)}`;
}

/** The sooner of two times left, either of which may be none. */
function earlier(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  return b === undefined ? a : Math.min(a, b);
}

function headerName(name: string, value: unknown): string {
  if (typeof value !== 'string' || !TOKEN.test(value.toLowerCase())) throw new ConfigError(`${name} must be a header name (an HTTP token), got ${typeof value === 'string' ? JSON.stringify(value.slice(0, 40)) : typeof value}`);
  return value.toLowerCase();
}
