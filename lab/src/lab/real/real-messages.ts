/**
 * What the runner asks of each process of a real run, and what each answers
 * (`ProcessGroup.request` and `joinGroup`'s handlers, ipc.ts): one place
 * for the protocols, so the two ends cannot drift apart. Time is wall-clock
 * ms (wall-clock.ts); figures are counted from the run's time zero.
 */
import { type Row } from '../world/database.js';

/** What a process counted over the run. */
export interface ProcessReport {
  /**
   * The origin's load, by second from time zero: without a database, the
   * innermost caller's (the users', or the innermost tier's) requests to the
   * servers; with one, each server's queries to it.
   */
  readonly sent?: readonly number[];
  /** Users: every call as [sent ms, ended ms, 1 good | 0 bad], flat, ms from time zero. */
  readonly calls?: readonly number[];
  /** The process's guards' stats at the end (damper), for the record. */
  readonly stats?: unknown;
}

/**
 * A server or a client tier: ready when it listens; told time zero (faults
 * are scheduled from it), and whether it is the run's first process in its
 * place or a new one (a restart: its memory starts empty); asked for its
 * report.
 */
export interface ListenerProtocol {
  readonly ready: { readonly port: number };
  readonly requests: {
    readonly start: { readonly request: { readonly zeroMs: number; readonly life: 'first' | 'restarted' }; readonly reply: null };
    readonly report: { readonly request: object; readonly reply: ProcessReport };
  };
}

/**
 * A server: a listener that also holds its part of the cache tier in its
 * memory (cache.scope server, or the one in-process cache of a tier of one
 * server): the write path pushes a freshly written row into it (an invalid
 * value's start), a cache flush empties it.
 */
export interface ServerProcessProtocol {
  readonly ready: ListenerProtocol['ready'];
  readonly requests: ListenerProtocol['requests'] & {
    readonly push: { readonly request: { readonly key: string; readonly row: Row }; readonly reply: null };
    /** Puts its data tier back in the steady state the run starts from; answered once done, before time zero. */
    readonly prewarm: { readonly request: object; readonly reply: null };
    readonly flush: { readonly request: object; readonly reply: null };
  };
}

/**
 * The cache nodes' pacers (cache-nodes-process.ts): ready once every one
 * listens; told time zero, from which they apply the faults done to the
 * nodes (a slowdown, a degradation, an ejection); asked how many commands
 * each node served.
 */
export interface CacheNodesProtocol {
  readonly ready: null;
  readonly requests: {
    readonly start: ListenerProtocol['requests']['start'];
    readonly report: { readonly request: object; readonly reply: { readonly served: readonly number[] } };
  };
}

/**
 * The users (the load generator): `warm` sends unmeasured traffic for a few
 * seconds and answers when it has all ended, with how much of it was good;
 * `run` sends the scenario's calls from time zero to the horizon and
 * answers when every call sent has ended.
 */
export interface UsersProtocol {
  readonly ready: null;
  readonly requests: {
    readonly warm: { readonly request: { readonly seconds: number }; readonly reply: { readonly calls: number; readonly good: number } };
    readonly run: { readonly request: { readonly zeroMs: number }; readonly reply: null };
    readonly report: { readonly request: object; readonly reply: ProcessReport };
  };
}
