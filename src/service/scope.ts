import { AsyncLocalStorage } from 'node:async_hooks';
import { type Priority } from '../guard/priority.js';
import { type Clock } from '../time/clock.js';

/**
 * What an incoming request tells the calls made while serving it: when its
 * caller stops waiting, and how important it is. damper's admission
 * (`damperAdmission`) sets it around the handler; the outgoing interceptor
 * reads it, so the deadline the first tier was given is the one the last tier
 * works to (a retry storm's fuel is work done for callers that have gone:
 * OSDI'22, "Metastable failures in the wild"). Other frameworks set it with
 * {@link runInRequestScope}.
 */
export interface RequestScope {
  /** The instant on `clock` after which the caller no longer waits; undefined for none. */
  readonly deadline: number | undefined;
  /** The clock `deadline` is on: a reader on another clock converts through the time left. */
  readonly clock: Clock;
  /** The request's priority; `normal` when undefined. */
  readonly priority: Priority | undefined;
  /** Aborts when the caller has gone: the deadline passed, or the client closed the connection. */
  readonly signal: AbortSignal;
}

const storage = new AsyncLocalStorage<RequestScope>();

/** The scope of the incoming request being served, if any. */
export function currentRequestScope(): RequestScope | undefined {
  return storage.getStore();
}

/** Runs `fn` with `scope` as the request being served: calls made from it, however deep, see it. */
export function runInRequestScope<T>(scope: RequestScope, fn: () => T): T {
  return storage.run(scope, fn);
}
