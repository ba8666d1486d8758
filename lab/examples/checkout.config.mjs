// The checkout API's damper configuration, as the service ships it: the
// lab runs this very code (`damper lab check lab/examples/checkout.json
// --damper-config lab/examples/checkout.config.mjs`, docs/lab.md, "Is my
// configuration safe?"). Everything is built on the `clock` the lab hands
// over: in production it is `systemClock`. The options are what the service
// passes to `new HttpDependency(…)` (each client tier, for the tier below it)
// and to `damperAdmission(…)` (each API server), and to `new Cache(…)`.
import { CircuitBreaker, ConcurrencyLimiter, RetryBudget } from 'damper';

/** Tier 0 is the web front end, tier 1 the cart service that calls the API servers. */
const CART_TIER = 1;

export default ({ clock }) => ({
  // Each tier retries twice, from a budget of its own (10 % of its calls);
  // the cart service gives each attempt 400 ms and throttles itself when the
  // API servers refuse. No breaker on the client side.
  dependency: (tier) => ({
    retry: { maxAttempts: 3, ...(tier === CART_TIER ? { attemptTimeout: 400 } : {}) },
    budget: new RetryBudget({ clock, ratio: 0.1 }),
    breaker: false,
    ...(tier === CART_TIER ? {} : { throttle: false }),
  }),
  // Each API server admits 16 requests at once and queues 200.
  admission: () => ({ limiter: new ConcurrencyLimiter({ clock, limit: 16, maxQueue: 200 }) }),
  // Products and prices: fresh for 30 s, served stale for 5 minutes, a load
  // given 300 ms, and a breaker in front of the database.
  cache: () => ({ ttl: 30_000, staleFor: 300_000, loadTimeout: 300, guard: new CircuitBreaker({ clock }) }),
});
