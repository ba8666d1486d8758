import { type ServiceScenario } from '../schema/service.js';
import { RealRunError } from './real-error.js';

/**
 * The longest real run, s: three runs per variant of a scenario must fit a
 * working session (six of them: 18 minutes), and a run's last minutes say
 * little that its first three do not (issue 30).
 */
export const MAX_REAL_S = 180;

/**
 * Which parts of a scenario the real runner builds today, checked before
 * anything starts: a part it cannot build is refused in one line naming it,
 * never run without it (a real run that leaves out the cache tier would be
 * compared with a simulation that has one).
 *
 * Built: open- and closed-loop populations, client tiers (retries, backoff,
 * attempt timeouts), servers (workers, queue, service time, slowdown with
 * what they hold, admission limit, processor sharing on `cores`), the
 * balancer with its health checks (origin-picker.ts), a database
 * (PostgreSQL, postgres.ts) behind any number of servers sharing its bound
 * (pgbouncer.ts), the work of rendering a loaded row (`missService`), the
 * cache in the servers' memory (scope server), the tier's one cache in a
 * process of its own in front of every server, a cache tier on nodes (redis-servers behind their
 * pacers on the simulation's ring: redis-ring.ts, node-pacer.ts), each
 * population's own keys, and the faults `slowdown` (servers, database,
 * cache nodes), `capacity-drop`, `degrade-servers`, `degrade-cache`,
 * `eject-cache`, `hang` (SIGSTOP; then resume or restart), `restart`,
 * `load-spike` and `load-ramp` (open loop), `invalid-value`, `cache-flush`;
 * an operator's action done always, not on a condition.
 */
export function realPlanProblems(scenario: ServiceScenario): string[] {
  const problems: string[] = [];
  const not = (what: string): void => void problems.push(`${scenario.name}: ${what} is not run on real processes yet`);
  if (scenario.durationS > MAX_REAL_S)
    problems.push(`${scenario.name}: runs ${scenario.durationS} s, and a real run is at most ${MAX_REAL_S} s: cut it (--duration) or shorten it (--time-scale)`);
  if (scenario.servers.databaseConnections !== undefined) not('a server’s own pool of database connections (servers.databaseConnections)');
  const nodes = scenario.cache?.nodes;
  if (nodes?.connections !== undefined) not('a pool of connections to the cache nodes (cache.nodes.connections)');
  if (nodes !== undefined && nodes.latency.kind !== 'constant') not('a cache node round trip drawn per call (cache.nodes.latency: the real round trip stands for a constant one)');
  // The row's render is a server's work, on its workers or cores; the tier's one cache loads in a process of its own.
  if (cacheTierApart(scenario) && scenario.servers.missService !== undefined) not('the render of a loaded row (servers.missService) behind the tier’s one cache (cache.scope tier without cache.nodes)');
  if (scenario.network.hopDelay.kind !== 'constant' || scenario.network.hopDelay.ms !== 0) not('a network delay (network.hopDelay)');
  scenario.tiers?.each?.forEach((t, i) => {
    if (t.servers !== undefined) not(`a tier's own servers (tiers.each[${i}].servers)`);
    if (t.hedgeAfterMs !== undefined) not(`hedging (tiers.each[${i}].hedgeAfterMs)`);
    if (t.timerTickMs !== undefined) not(`a modelled timer tick (tiers.each[${i}].timerTickMs): a real client has its own`);
  });
  scenario.clients.forEach((p, i) => {
    if (p.tiers !== undefined && i > 0) not(`per-population tier settings beside another population (clients[${i}].tiers)`);
  });
  const closed = scenario.clients.some((p) => p.closed !== undefined);
  scenario.faults.forEach((f, i) => {
    const at = `faults[${i}] (${f.kind})`;
    if ('when' in f && f.when === 'unhealthy') not(`an operator's conditional action (${at}.when)`);
    switch (f.kind) {
      case 'load-spike':
      case 'load-ramp':
        if (closed) not(`a load change on a closed-loop population (${at})`);
        break;
      case 'hang':
      case 'restart':
      case 'slowdown':
      case 'capacity-drop':
      case 'degrade-servers':
      case 'degrade-cache':
      case 'eject-cache':
      case 'invalid-value':
      case 'cache-flush':
        break;
      default:
        not(`the fault ${at}`);
    }
  });
  return problems;
}

/**
 * Whether the scenario's cache tier is the tier's one cache (`cache.scope:
 * tier` without nodes), which a real run holds in a process of its own that
 * every server reads through (cache-tier-process.ts): the simulation has one
 * for all its servers, and it outlives any of them.
 */
export function cacheTierApart(scenario: ServiceScenario): boolean {
  return scenario.database !== undefined && scenario.cache !== undefined && scenario.cache.scope !== 'server' && scenario.cache.nodes === undefined;
}

/** Throws the first of {@link realPlanProblems}, with how many more there are. */
export function checkRealPlan(scenario: ServiceScenario): void {
  const problems = realPlanProblems(scenario);
  if (problems.length > 0) throw new RealRunError(problems.length === 1 ? problems[0]! : `${problems[0]!} (and ${problems.length - 1} more: ${problems.slice(1).join('; ')})`);
}
