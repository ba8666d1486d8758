import { arrayOption, optionsObject, or } from '../../config.js';
import { ConfigError, describe } from '../../errors.js';
import { errorCode, isAbort } from '../../guard/classify.js';
import { Dependency, type DependencyCall, type DependencyOptions, type DependencyStats } from '../../service/dependency.js';
import { DEADLINE_HEADER, headerNameOption, PRIORITY_HEADER } from '../headers.js';
import { UPSTREAM_STATUS } from './upstream-status.js';

/** One upstream of an {@link HttpDependency}: an origin (`http://10.0.0.7:8080`), and its share. */
export interface HttpUpstream {
  /** `scheme://host[:port]`, no path: what the request's own origin is replaced by. */
  readonly origin: string;
  /** Name in events, stats and snapshots. Default: the origin. */
  readonly id?: string;
  /** Relative share of traffic. Default 1. */
  readonly weight?: number;
  /** Most requests in flight to it; beyond it requests go elsewhere or are shed. Default: the balancer's. */
  readonly maxOutstanding?: number;
}

/**
 * Options for {@link HttpDependency}: a {@link Dependency}'s (its retry and
 * budget, breaker, throttle, balancer, timeout, priority, breaker reach), with
 * origins for upstreams and what HTTP adds. Its judge of an attempt is built
 * from `retryStatuses`, not given.
 */
export interface HttpDependencyOptions extends Omit<DependencyOptions<HttpUpstream>, 'upstreams' | 'countsAgainst'> {
  /** The servers that serve this dependency: origins, or {@link HttpUpstream}s. At least one. */
  upstreams: readonly (string | HttpUpstream)[];
  /**
   * Methods retried. Default the idempotent ones of RFC 9110: GET, HEAD,
   * OPTIONS, TRACE, PUT, DELETE. A POST is sent once unless listed here: a
   * retried POST that had reached the server does its work twice.
   */
  retryMethods?: readonly string[];
  /**
   * Response statuses that count as the upstream failing the request, retried
   * (within the budget, elsewhere when another upstream is routable) and
   * counted against it. Default 500, 502, 503, 504 and 429. When no retry
   * follows, the last such response is what the caller receives: it is an
   * answer, not an exception.
   */
  retryStatuses?: readonly number[];
  /** Header the deadline is sent in, as the ms left. Default {@link DEADLINE_HEADER}. */
  deadlineHeader?: string;
  /** Header the priority is sent in. Default {@link PRIORITY_HEADER}. */
  priorityHeader?: string;
}

/** What an {@link HttpDependency} has done, from {@link HttpDependency.stats}. */
export type HttpDependencyStats = DependencyStats;

/** One request as the dependency's guards see it. @internal */
export type OutgoingCall = DependencyCall;

const IDEMPOTENT = ['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE'];
const RETRY_STATUSES = [500, 502, 503, 504, 429];

/**
 * A {@link Dependency} reached over HTTP: its upstreams are origins, and
 * what HTTP adds is read from the request: whether it may be retried (its
 * method, a body that can be sent again), which response statuses count as
 * the upstream failing (`retryStatuses`: those are retried *and* counted
 * against the upstream, one judgement for both), and the headers a deadline
 * and a priority travel in. Shared by every request to the dependency
 * however it is sent: an undici interceptor (`damperInterceptor`) or
 * `damperFetch`. The guards and their order are {@link Dependency}'s.
 */
export class HttpDependency extends Dependency<HttpUpstream> {
  readonly deadlineHeader: string;
  readonly priorityHeader: string;
  private readonly retryMethods: ReadonlySet<string>;
  private readonly retryStatuses: ReadonlySet<number>;

  constructor(dependencyOptions: HttpDependencyOptions) {
    if (dependencyOptions === undefined) throw new ConfigError('HttpDependency needs options with its upstreams');
    const options = optionsObject('HttpDependency options', dependencyOptions);
    const upstreams = arrayOption('upstreams', options.upstreams, 'a non-empty array of origins').map((u, i) => upstreamOf(u, i));
    if (upstreams.length === 0) throw new ConfigError('upstreams must be a non-empty array of origins: a dependency served by nothing cannot be called');
    const retryStatuses = new Set(arrayOption('retryStatuses', options.retryStatuses ?? RETRY_STATUSES, 'an array of status codes').map((s, i) => statusCode(s, i)));
    const { retryMethods, deadlineHeader, priorityHeader } = options;
    super({
      ...withoutHttpFields(options as HttpDependencyOptions),
      upstreams: upstreams.map((u) => ({ id: u.id ?? u.origin, target: u, ...(u.weight === undefined ? {} : { weight: u.weight }), ...(u.maxOutstanding === undefined ? {} : { maxOutstanding: u.maxOutstanding }) })),
      countsAgainst: (error) => failedUpstream(error, retryStatuses),
    });
    this.retryStatuses = retryStatuses;
    this.retryMethods = new Set(arrayOption('retryMethods', retryMethods ?? IDEMPOTENT, 'an array of method names').map((m, i) => methodName(m, i)));
    this.deadlineHeader = headerNameOption('deadlineHeader', or(deadlineHeader, DEADLINE_HEADER));
    this.priorityHeader = headerNameOption('priorityHeader', or(priorityHeader, PRIORITY_HEADER));
  }

  /** Whether requests with `method` are retried. @internal */
  retries(method: string): boolean {
    return this.retryMethods.has(method) || this.retryMethods.has(method.toUpperCase());
  }

  /** Whether a response with `status` counts as a failure of its upstream (and is retried when allowed). @internal */
  failsOn(status: number): boolean {
    return this.retryStatuses.has(status);
  }
}

/** The options a `Dependency` takes, of an `HttpDependency`'s: all but its upstreams and what HTTP adds. */
function withoutHttpFields(options: HttpDependencyOptions): Omit<DependencyOptions<HttpUpstream>, 'upstreams' | 'countsAgainst'> {
  const core: Partial<HttpDependencyOptions> = { ...options };
  for (const field of ['upstreams', 'retryMethods', 'retryStatuses', 'deadlineHeader', 'priorityHeader'] as const) delete core[field];
  return core;
}

/**
 * HttpDependency's judge of an attempt's error, built from `retryStatuses`:
 * a response whose status is listed (an `UpstreamStatusError`, exchange.ts),
 * a connection error, an attempt cut at its `attemptTimeout` or at the
 * deadline (as Envoy counts a gateway timeout: a hung upstream, SIGSTOPped or
 * wedged, answers nothing else). The caller's own abort is none. A status
 * not listed never rejects an attempt: it is an answer. So what is retried
 * is what is counted (a 408 the user lists is both).
 */
function failedUpstream(error: unknown, retryStatuses: ReadonlySet<number>): boolean {
  // By code, not class: an UpstreamStatusError of another copy of damper is judged alike.
  if (errorCode(error) === UPSTREAM_STATUS) return retryStatuses.has((error as { status?: unknown }).status as number);
  return !isAbort(error);
}

function upstreamOf(value: unknown, i: number): HttpUpstream {
  const u = typeof value === 'string' ? { origin: value } : (optionsObject(`upstreams[${i}]`, value as HttpUpstream) as HttpUpstream);
  if (typeof u.origin !== 'string') throw new ConfigError(`upstreams[${i}].origin must be a string such as "http://127.0.0.1:8080", got ${describe(u.origin)}`);
  let url: URL;
  try {
    url = new URL(u.origin);
  } catch {
    throw new ConfigError(`upstreams[${i}] must be an origin such as "http://127.0.0.1:8080", got ${JSON.stringify(u.origin)}`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.origin !== u.origin.replace(/\/$/, '')) throw new ConfigError(`upstreams[${i}] must be an http(s) origin with no path, query or credentials, got ${JSON.stringify(u.origin)}`);
  return { ...u, origin: url.origin };
}

function methodName(m: unknown, i: number): string {
  if (typeof m !== 'string' || !/^[A-Za-z]+$/.test(m)) throw new ConfigError(`retryMethods[${i}] must be a method name, got ${describe(m)}`);
  return m.toUpperCase();
}

function statusCode(s: unknown, i: number): number {
  if (typeof s !== 'number' || !Number.isInteger(s) || s < 400 || s > 599) throw new ConfigError(`retryStatuses[${i}] must be an error status from 400 to 599, got ${describe(s)}`);
  return s;
}
