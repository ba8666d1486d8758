import { OverloadedError } from 'damper';
import { type Served } from './web-server.js';
import { type Outcome } from './service-server.js';

/**
 * How a user's call (or one attempt of it) ended in the service world, and
 * whether its answer waited for the database: one object per combination,
 * made once (a storm makes millions of them otherwise).
 */
export interface Answer {
  readonly outcome: Outcome | 'timeout';
  readonly waited: boolean;
}

const ANSWERS = new Map<string, Answer>();

export function answer(outcome: Answer['outcome'], waited: boolean): Answer {
  const id = `${outcome}:${waited}`;
  let a = ANSWERS.get(id);
  if (a === undefined) ANSWERS.set(id, (a = { outcome, waited }));
  return a;
}

export const TIMED_OUT = answer('timeout', false);

/** A server's answer that is not a value, as an error (what a balancer and a guard see): the outcome travels with it. */
export class ServiceFailure extends Error {
  constructor(readonly answer: Answer) {
    super(`server: ${answer.outcome}`);
  }
}

const FAILURES = new Map<Answer, ServiceFailure>();

export function failure(a: Answer): ServiceFailure {
  let f = FAILURES.get(a);
  if (f === undefined) FAILURES.set(a, (f = new ServiceFailure(a)));
  return f;
}

/** A served value as a balancer's upstream answers it: a hit (no database wait) or not. */
export const HIT: Served = { hit: true };
export const MISS: Served = { hit: false };

/** What a rejection of damper's stack means for the user: its server's outcome, a shed (an `OverloadedError` anywhere), or a plain failure. */
export function answerOf(error: unknown): Answer {
  if (error instanceof ServiceFailure) return error.answer;
  if (error instanceof OverloadedError) return answer('shed', false);
  return answer('error', false);
}
