import { type IncomingMessage, type ServerResponse } from 'node:http';
import { or } from '../../config.js';
import { ConfigError, HeaderError } from '../../errors.js';
import { type Priority } from '../../guard/priority.js';
import { Admission, type AdmissionOptions, type Refusal } from '../../service/admission.js';
import { type RequestScope } from '../../service/scope.js';
import { DEADLINE_HEADER, headerNameOption, PRIORITY_HEADER, readPriority, readRemainingMs } from '../headers.js';
import { Passage } from './passage.js';

/**
 * {@link Admission} for HTTP requests, whatever server they came through
 * (node:http's listener, Fastify's hook): the deadline and priority read
 * from the request's headers, the client's going away read from its
 * connection, and admission's answers written as statuses.
 */

/** Options of damper's admission of HTTP requests (`damperAdmission`, `damperFastify`): {@link AdmissionOptions} and the headers. */
export interface HttpAdmissionOptions extends AdmissionOptions {
  /** The header that carries the time left before the caller's deadline, ms. Default `x-damper-deadline-ms`. */
  deadlineHeader?: string;
  /**
   * The header that carries the request's priority. Default `x-damper-priority`.
   * Any caller can send `critical`: strip it at the edge of what you trust.
   */
  priorityHeader?: string;
}

/** How a request turned away is answered: a status, a short text body, and `Retry-After` in seconds when shed. @internal */
export interface HttpRefusal {
  readonly status: 400 | 503 | 504;
  readonly body: string;
  readonly retryAfter: number | undefined;
}

/** What the server does with one request admission let through, or turned away. @internal */
export interface HttpDoor {
  /** Starts the work, in `scope`. Never throws: the slot is held until the response is over. */
  serve(scope: RequestScope): void;
  /** Writes a refusal. Never called for a client seen to have left. */
  refuse(refusal: HttpRefusal): void;
}

const EXPIRED: HttpRefusal = { status: 504, body: 'deadline passed before the request started\n', retryAfter: undefined };

/** @internal */
export class HttpAdmission {
  readonly admission: Admission;
  private readonly deadlineHeader: string;
  private readonly priorityHeader: string;
  private readonly shed: HttpRefusal;

  /** `options` already read by `optionsObject`, under the caller's name. */
  constructor(options: Partial<HttpAdmissionOptions>) {
    const { deadlineHeader, priorityHeader, ...core } = options;
    this.admission = new Admission(core);
    this.deadlineHeader = headerNameOption('deadlineHeader', or(deadlineHeader, DEADLINE_HEADER));
    this.priorityHeader = headerNameOption('priorityHeader', or(priorityHeader, PRIORITY_HEADER));
    if (this.deadlineHeader === this.priorityHeader) throw new ConfigError(`deadlineHeader and priorityHeader must differ, both are ${this.deadlineHeader}`);
    const retryAfter = or(options.retryAfter, 1);
    this.shed = { status: 503, body: `overloaded; retry after ${retryAfter} s\n`, retryAfter };
  }

  /** Admits `req`, or turns it away: through `door` either way, unless its client has gone. */
  admit(req: IncomingMessage, res: ServerResponse, door: HttpDoor): void {
    const asked = this.read(req);
    if (asked instanceof HeaderError) {
      // Refused before the limiter sees it: a malformed header is the caller's slip, not load.
      this.admission.badRequest();
      door.refuse({ status: 400, body: `${asked.message}\n`, retryAfter: undefined });
      return;
    }
    const passage = new Passage(req, res);
    this.admission.admit(
      { key: keyOf(req), priority: asked.priority, remainingMs: asked.remaining, signal: passage.signal },
      {
        serve: (scope) => {
          const over = passage.serve();
          door.serve(scope);
          return over;
        },
        refuse: (refusal: Refusal) => {
          passage.drop();
          door.refuse(refusal.reason === 'shed' ? this.shed : EXPIRED);
        },
      },
    );
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
