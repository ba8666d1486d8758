/**
 * damper: a data-access tier that cannot fall into the feedback loops of
 * Facebook 2010, Discord 2019 and the Columbia Missourian 2010.
 * See DESIGN.md for the principles each export answers to.
 */
export { Cache, type CacheEvents, type Loader, type LoaderContext, type StaleReason } from './cache/cache.js';
export { type CacheOptions, type LoadOptions } from './cache/options.js';
export { type Validator } from './cache/validate.js';
export { AbortedError, ArgumentError, ConfigError, DamperError, LoaderError, LoadTimeoutError, OverloadedError, ValidationError } from './errors.js';
export { Events } from './events.js';
export { Backoff, type BackoffOptions } from './guard/backoff.js';
export { type Guard, type GuardContext } from './guard/guard.js';
export { ConcurrencyLimiter, type ConcurrencyLimiterOptions } from './guard/limiter.js';
export { MemoryStore, type MemoryStoreOptions } from './stores/memory.js';
export { type Clock, MAX_TIMER_MS, sleep, type Timer } from './time/clock.js';
export { seededRandom } from './time/random.js';
export { createSystemClock, systemClock } from './time/system.js';
export { VirtualClock, type VirtualClockOptions } from './time/virtual.js';
