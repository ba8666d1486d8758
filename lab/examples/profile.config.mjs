// The profile service's damper configuration, as the service ships it: the
// lab runs this very code (`damper lab lab/examples/profile.json
// --damper-config lab/examples/profile.config.mjs`; docs/lab.md, "Redis
// slow behind two retrying tiers"). Everything is built on the `clock` the
// lab hands over: in production it is `systemClock`.
//
// One setting differs from the library's defaults, and it is the one this
// outage needs: the shared tier's timeout. Redis answers in about 1 ms here;
// the default of 250 ms lets a Redis at 200 ms hold a server's worker for
// every read of a profile not in memory. At 50 ms (still 50 times the usual
// round trip), a slow Redis is a timeout, its breaker opens after three, and
// the reads go to memory, stale values, and PostgreSQL within the origin
// budget instead.
export default () => ({
  cache: () => ({ shared: { timeout: 50 } }),
});
