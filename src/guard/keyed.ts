import { integer, optionalFunction, optionsObject, or } from '../config.js';
import { ConfigError } from '../errors.js';
import { checkGuard, type Guard, type GuardContext, notATask } from './guard.js';

/** Options for {@link keyed}. */
export interface KeyedOptions {
  /**
   * Maps a call's key to its failure domain (a shard, an upstream, a tenant).
   * Default: the key itself.
   */
  domain?: (key: string) => string;
  /**
   * Most domains kept; beyond it, the least recently used domain's guard is
   * dropped (and a fresh one made if it comes back). Bounds memory when keys
   * are unbounded. Default 1024.
   */
  maxDomains?: number;
}

/**
 * One guard per failure domain, so one failing shard trips its own breaker,
 * spends its own retry budget and fills its own limiter, and the others go on
 * (Discord 2019: a few degraded cache nodes must not take the healthy ones
 * down with them). `make` builds a domain's guard the first time it is seen.
 *
 * @example
 * const perShard = keyed(() => new CircuitBreaker({ clock }), { domain: (key) => shardOf(key) });
 */
export function keyed(make: (domain: string) => Guard, keyedOptions?: KeyedOptions): Guard & { readonly domains: number } {
  if (typeof make !== 'function') throw new ConfigError('keyed(make): make must be a function returning a Guard');
  const options = optionsObject('keyed options', keyedOptions);
  const domainOf = optionalFunction('domain', options.domain) ?? ((key: string) => key);
  const max = integer('maxDomains', or(options.maxDomains, 1024), 1);
  // A Map keeps insertion order: re-inserting on use makes its first entry the least recently used.
  const guards = new Map<string, Guard>();
  const guardOf = (key: string): Guard => {
    const domain = domainOf(key);
    if (typeof domain !== 'string') throw new ConfigError(`keyed: domain(key) must return a string, got ${typeof domain}`);
    let guard = guards.get(domain);
    if (guard === undefined) {
      guard = checkGuard(`keyed: make("${domain}")`, make(domain));
      if (guards.size >= max) guards.delete(guards.keys().next().value as string);
    } else {
      guards.delete(domain);
    }
    guards.set(domain, guard);
    return guard;
  };
  return {
    get domains() {
      return guards.size;
    },
    run<T>(task: (signal: AbortSignal) => Promise<T>, context: GuardContext): Promise<T> {
      // Before a domain's guard is made or moved in the LRU: a bad call changes nothing.
      if (typeof task !== 'function') return Promise.reject(notATask('keyed', task));
      let guard: Guard;
      try {
        guard = guardOf(context.key);
      } catch (error) {
        // `domain` or `make` threw, or made no Guard: the caller's promise says so; nothing was stored.
        return Promise.reject(error);
      }
      return guard.run(task, context);
    },
  };
}
