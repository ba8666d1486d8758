import { classify } from 'damper';
import { type Source } from './origin-waits.js';
import { type BelowOutcome, type Outcome } from './service-server.js';

/**
 * How a user's call (or one attempt of it) ended in the service world, and
 * where its answer came from: one object per combination,
 * made once (a storm makes millions of them otherwise).
 */
export interface Answer {
  readonly outcome: Outcome | 'timeout';
  readonly source: Source;
}

const ANSWERS = new Map<string, Answer>();

export function answer(outcome: Answer['outcome'], source: Source): Answer {
  const id = `${outcome}:${source}`;
  let a = ANSWERS.get(id);
  if (a === undefined) ANSWERS.set(id, (a = { outcome, source }));
  return a;
}

export const TIMED_OUT = answer('timeout', 'cache');

/**
 * A server's answer that is not a value, as an error (what a balancer and a
 * guard see): the outcome travels with it, and the HTTP status a real
 * server would answer with (500 for an error; 503 when it sheds or refuses,
 * with the `Retry-After` its admission sends; 504 for work dropped past its
 * deadline), which damper's guards read as damper/http's do: a 503 is an
 * overload signal (the throttle backs off, the balancer does not eject).
 */
export class ServiceFailure extends Error {
  readonly status: number;

  constructor(
    readonly answer: Answer,
    readonly retryAfterMs?: number,
  ) {
    super(`server: ${answer.outcome}`);
    this.status = STATUS[answer.outcome];
  }
}

const STATUS: Readonly<Record<Answer['outcome'], number>> = { ok: 200, invalid: 200, error: 500, shed: 503, refused: 503, dropped: 504, timeout: 504 };

const FAILURES = new Map<Answer, ServiceFailure>();

export function failure(a: Answer): ServiceFailure {
  let f = FAILURES.get(a);
  if (f === undefined) FAILURES.set(a, (f = new ServiceFailure(a)));
  return f;
}

const SHED = new Map<number, ServiceFailure>();

/** A server's admission shed the request: a 503 with `Retry-After: seconds`. One instance per value. */
export function shedFailure(seconds: number): ServiceFailure {
  let f = SHED.get(seconds);
  if (f === undefined) SHED.set(seconds, (f = new ServiceFailure(answer('shed', 'cache'), seconds * 1000)));
  return f;
}

/** What a rejection of damper's stack means for the user: its server's outcome, a shed (an `OverloadedError` anywhere), or a plain failure. */
export function answerOf(error: unknown): Answer {
  if (error instanceof ServiceFailure) return error.answer;
  // By the error's code: a refusal by any copy of damper (the client's balancer, a limiter) is a shed.
  if (classify(error) === 'shed') return answer('shed', 'cache');
  return answer('error', 'cache');
}

/**
 * A call's answer as a client tier's server hands it on to its own caller:
 * a value, an invalid one (a 200 whose body is wrong), an overload (the 503
 * of a shed or a refusal below), or an error (a 500, a timeout).
 */
export function belowOutcome(a: Answer): BelowOutcome {
  switch (a.outcome) {
    case 'ok':
    case 'invalid':
    case 'shed':
      return a.outcome;
    case 'refused':
      return 'shed';
    default:
      return 'error';
  }
}
