import type { Dispatcher } from 'undici';
import { isInstance } from '../../config.js';
import { HttpDependency, type HttpDependencyOptions } from './http-dependency.js';
import { Exchange } from './exchange.js';

/**
 * An undici interceptor that sends every request through an
 * {@link HttpDependency}: `new Agent().compose(damperInterceptor({ upstreams }))`.
 * The request's origin names the service; the upstream the balancer picks
 * serves it (so compose it on an `Agent`, which keeps a pool per origin).
 *
 * It takes the place of undici's `retry` interceptor, and must not be
 * composed with it: that one retries every failure up to `maxRetries` times
 * with no budget, which is the retry storm damper exists to stop (a 3-retry
 * policy at each of two tiers sends 16 attempts to the bottom one for every
 * request while it is slow).
 *
 * Pass an `HttpDependency` to share its budget, breakers and balancer with a
 * `damperFetch` or another dispatcher; pass options to make one for this
 * interceptor alone. Upgrades and `CONNECT` pass through untouched: they are
 * not requests that can be retried or timed.
 */
export function damperInterceptor(dependency: HttpDependency | HttpDependencyOptions): Dispatcher.DispatcherComposeInterceptor {
  const d = isInstance(dependency, HttpDependency) ? dependency : new HttpDependency(dependency);
  return (dispatch) =>
    function damper(options, handler) {
      if (options.upgrade !== undefined && options.upgrade !== null) return dispatch(options, handler);
      if (options.method === 'CONNECT') return dispatch(options, handler);
      new Exchange(d, dispatch, options, handler).start();
      return true;
    };
}
