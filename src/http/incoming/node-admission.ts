import { type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import { optionalFunction, optionsObject } from '../../config.js';
import { ConfigError, describe } from '../../errors.js';
import { type ConcurrencyLimiter } from '../../guard/limiter.js';
import { type AdmissionStats } from '../../service/admission.js';
import { HttpAdmission, type HttpAdmissionOptions, type HttpDoor, type HttpRefusal } from './http-admission.js';
import { type RequestScope, runInRequestScope } from '../../service/scope.js';

/**
 * A node:http request listener in front of a handler: each request waits for
 * a slot of a `ConcurrencyLimiter`, by priority, is refused with a 503 when
 * the limiter sheds it, and is dropped before it starts when its caller has
 * gone (see src/service/admission.ts and docs/http-incoming.md).
 */

/**
 * A handler behind {@link damperAdmission}: node:http's, with the request's
 * {@link RequestScope}, which is also `currentRequestScope()` inside it and
 * in everything it calls. It should stop when `scope.signal` aborts (the
 * deadline passed or the client left), and pass the signal on to its own calls.
 */
export type AdmittedHandler = (req: IncomingMessage, res: ServerResponse, scope: RequestScope) => void | Promise<unknown>;

/** Options of {@link damperAdmission}: those of every admission, and what to tell of a handler's failure. */
export interface DamperAdmissionOptions extends HttpAdmissionOptions {
  /**
   * Told of what an admitted handler threw or rejected with, after the 500
   * (or the reset of a response already begun) was sent: the failure is
   * answered, and this is where it is logged. What it throws is dropped: it
   * must not leave the request's slot unaccounted for. Default: a process
   * warning (code `DAMPER_HANDLER_ERROR`) the first time a handler fails, so
   * a failing handler is never silent, and never a flood of warnings.
   */
  onError?: (error: unknown, req: IncomingMessage) => void;
}

/** The listener {@link damperAdmission} makes, with what it counts and the limiter it admits through. */
export type AdmissionListener = ((req: IncomingMessage, res: ServerResponse) => void) & {
  /** See {@link AdmissionStats}. */
  stats(): AdmissionStats;
  /** The limiter requests are admitted through (yours, or the one made for you): its `stats()` say how full it is. */
  readonly limiter: ConcurrencyLimiter;
};

/**
 * Admission control for a node:http server: `http.createServer(damperAdmission({ limiter }, handler))`.
 *
 * Overload is answered by refusing the least important work early and
 * cheaply, not by queueing everything until every caller times out (the
 * Discord 2019 herd), and work whose caller has gone is never started (the
 * Missourian 2010 servers kept serving readers who had left):
 *
 * - a deadline or priority header that cannot be read gets a 400, before the
 *   limiter sees the request;
 * - the deadline is now plus the time left in the header (or `timeout`, or the
 *   earlier of both); none left gets a 504 at once;
 * - the request waits for a slot with its priority and deadline; a shed one
 *   gets a 503 with `Retry-After`, one whose deadline passed while it waited a
 *   504, one whose client left nothing (there is no one to write to);
 * - an admitted request's handler runs inside `runInRequestScope`, so the
 *   outgoing calls it makes carry its deadline and priority on; its slot is
 *   held until the response is over; a handler that fails before the headers
 *   went out gets a 500, one that fails after has its response reset.
 *
 * Throws {@link ConfigError} for bad options or a handler that is not a function.
 */
export function damperAdmission(options: DamperAdmissionOptions, handler: AdmittedHandler): AdmissionListener {
  const read = optionsObject('damperAdmission options', options);
  const onError = optionalFunction('onError', read.onError) ?? warnOnce();
  const http = new HttpAdmission(read);
  const { admission } = http;
  if (typeof handler !== 'function') throw new ConfigError('damperAdmission: handler must be a function');
  const listener = (req: IncomingMessage, res: ServerResponse): void => http.admit(req, res, new HandlerDoor(admission, handler, onError, req, res));
  return Object.assign(listener, { stats: () => admission.stats(), limiter: admission.limiter });
}

/** One request's way into its handler, and its answers when it gets none. */
class HandlerDoor implements HttpDoor {
  constructor(
    private readonly admission: { failed(): void },
    private readonly handler: AdmittedHandler,
    private readonly onError: NonNullable<DamperAdmissionOptions['onError']>,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
  ) {}

  serve(scope: RequestScope): void {
    let result: unknown;
    try {
      result = runInRequestScope(scope, () => this.handler(this.req, this.res, scope));
    } catch (error) {
      this.failed(error);
      return;
    }
    // A thenable of another library is awaited as a promise is.
    if (result !== undefined) Promise.resolve(result).then(undefined, (error: unknown) => this.failed(error));
  }

  refuse(refusal: HttpRefusal): void {
    write(this.res, refusal.status, refusal.body, refusal.retryAfter);
  }

  private failed(error: unknown): void {
    this.admission.failed();
    const { res } = this;
    if (!res.headersSent) {
      // The handler's own headers (a content-encoding, a length) do not describe the error's body.
      for (const name of res.getHeaderNames()) res.removeHeader(name);
      write(res, 500, 'internal error\n', undefined);
    } else if (!res.writableEnded) {
      // Half a response cannot become an error, and ending it would pass a
      // truncated body for a whole one: the reset tells the client it failed,
      // and the connection's close gives the slot back.
      res.destroy();
    }
    try {
      this.onError(error, this.req);
    } catch {
      // The logger failed too: nothing is left to tell, and the admission must go on.
    }
  }
}

/** The default `onError`. */
function warnOnce(): (error: unknown) => void {
  let warned = false;
  return (error) => {
    if (warned) return;
    warned = true;
    process.emitWarning(`a handler behind damperAdmission failed (answered with a 500; set onError to see every failure): ${describe(error)}`, { code: 'DAMPER_HANDLER_ERROR' });
  };
}

/** A short text response; nothing when the client has gone. */
function write(res: ServerResponse, status: number, body: string, retryAfter: number | undefined): void {
  if (res.destroyed) return;
  // nosniff: a 400's body quotes a little of what the caller sent.
  const headers: OutgoingHttpHeaders = { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), 'x-content-type-options': 'nosniff' };
  if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter);
  res.writeHead(status, headers).end(body);
}
