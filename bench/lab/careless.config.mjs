// The careless configuration of issue 29's new user, for the production
// scenario of the lab's benchmark (bench/lab/production.json): every client
// tier makes 10 attempts, with a retry budget that never runs out and a
// breaker that never opens, and the cache serves nothing stale (no stale
// window). Everything else keeps the lab's settings. Its stuck cells are the
// slowest the lab simulates, which is why the benchmark times it.
import { RetryBudget } from 'damper';

export default ({ clock }) => ({
  dependency: () => ({
    retry: { maxAttempts: 10 },
    budget: new RetryBudget({ clock, ratio: 1, minPerSecond: 1e9 }),
    breaker: false,
  }),
  cache: () => ({ staleFor: 0 }),
});
