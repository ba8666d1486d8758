import { performance } from 'node:perf_hooks';

// Bound at load, before any simulated run can forbid real time: measuring how
// fast the lab runs is the one legitimate use of the wall clock around it.
const wallNow = performance.now.bind(performance);

/**
 * Wall-clock elapsed time, for reporting speed (simulated requests per second)
 * and nothing else. Library code never uses it to decide anything.
 */
export function stopwatch(): () => number {
  const start = wallNow();
  return () => wallNow() - start;
}
