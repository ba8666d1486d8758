import type { Dispatcher, fetch as undiciFetch, RequestInfo, RequestInit, Response } from 'undici';
import { hasMethods, isInstance, optionsObject } from '../../config.js';
import { ConfigError } from '../../errors.js';
import { HttpDependency, type HttpDependencyOptions } from './http-dependency.js';
import { damperInterceptor } from './interceptor.js';
import { missingPeer } from '../../peer.js';

/** Options for {@link damperFetch}. */
export interface DamperFetchOptions {
  /**
   * The undici dispatcher the requests go out on, the interceptor composed
   * over it. Default: an `Agent` of the fetch's own, made at its first
   * request and closed by `close()`.
   */
  dispatcher?: Dispatcher;
}

/** A `fetch` whose requests go through an {@link HttpDependency}. */
export interface DamperFetch {
  (input: RequestInfo, init?: RequestInit): Promise<Response>;
  /** The dependency its requests go through: its `stats()`, its budget. */
  readonly dependency: HttpDependency;
  /** Closes the agent it made (not a dispatcher it was given) and stops the dependency's timers. */
  close(): Promise<void>;
}

/**
 * `fetch` through damper: undici's own `fetch`, on a dispatcher with
 * {@link damperInterceptor} composed over it, so the calls an application
 * writes as `fetch('http://orders/api/1')` are balanced over the dependency's
 * upstreams, retried under its budget and given its deadline. The URL's
 * origin names the service; the upstream picked serves it.
 *
 * undici is loaded at the first request, so `damper/http`'s server side runs
 * without it. A request whose body is a stream (every body `fetch` sends is
 * one) is sent once: it cannot be read twice.
 */
export function damperFetch(dependency: HttpDependency | HttpDependencyOptions, fetchOptions?: DamperFetchOptions): DamperFetch {
  const d = isInstance(dependency, HttpDependency) ? dependency : new HttpDependency(dependency);
  const options = optionsObject('damperFetch options', fetchOptions);
  const given = options.dispatcher;
  if (given !== undefined && !hasMethods(given, ['dispatch', 'compose'])) throw new ConfigError('dispatcher must be an undici Dispatcher (an Agent, say)');
  const interceptor = damperInterceptor(d);
  let ready: Promise<{ readonly fetch: typeof undiciFetch; readonly dispatcher: Dispatcher; readonly owned: Dispatcher | undefined }> | undefined;
  const load = (): NonNullable<typeof ready> =>
    (ready ??= import('undici').catch((error: unknown) => Promise.reject(missingPeer(error, 'damperFetch', 'undici'))).then((undici) => {
      const base = given ?? new undici.Agent();
      return { fetch: undici.fetch, dispatcher: base.compose(interceptor), owned: given === undefined ? base : undefined };
    }));
  const fetch = (async (input: RequestInfo, init?: RequestInit): Promise<Response> => {
    const { fetch, dispatcher } = await load();
    return fetch(input, { ...init, dispatcher });
  }) as DamperFetch;
  Object.defineProperty(fetch, 'dependency', { value: d, enumerable: true });
  fetch.close = async () => {
    d.close();
    if (ready === undefined) return;
    const { owned } = await ready;
    await owned?.close();
  };
  return fetch;
}
