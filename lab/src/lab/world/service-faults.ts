import type { ServiceFault, ServiceScenario } from './service.js';

/**
 * What the service world's faults make of its parts at one instant, derived
 * from the faults active then and nothing else: the world applies it at each
 * fault event (and the load at each step, for a ramp), and the best possible
 * (src/lab/judge/best-possible.ts) reads the same numbers, so the bound and the
 * run can never disagree about what a fault does.
 */
export interface ServiceState {
  /** Per server: service time × `slowdown`, the share of workers and cores it keeps, whether it hangs. */
  readonly servers: readonly { readonly slowdown: number; readonly keep: number; readonly hung: boolean }[];
  /** Per cache node (with `cache.nodes`): round trips × `slow`, the share of throughput it keeps, whether it is stopped, or killed. */
  readonly cacheNodes: readonly { readonly slow: number; readonly keep: number; readonly hung: boolean; readonly down: boolean }[];
  /** The database's service time ×. */
  readonly databaseSlowdown: number;
  /** Every population's rate (open loop) and users (closed loop) ×. */
  readonly load: number;
}

/** The state made by `active` faults at `t` (s). */
export function serviceState(scenario: ServiceScenario, active: Iterable<ServiceFault>, t: number): ServiceState {
  const servers = Array.from({ length: scenario.servers.count }, () => ({ slowdown: 1, keep: 1, hung: false }));
  const cacheNodes = Array.from({ length: scenario.cache?.nodes?.count ?? 0 }, () => ({ slow: 1, keep: 1, hung: false, down: false }));
  let databaseSlowdown = 1;
  let load = 1;
  const each = (list: readonly number[] | undefined, apply: (s: (typeof servers)[number]) => void): void => {
    for (const i of list ?? servers.keys()) apply(servers[i]!);
  };
  const eachNode = (list: readonly number[] | undefined, apply: (s: (typeof cacheNodes)[number]) => void): void => {
    for (const i of list ?? cacheNodes.keys()) apply(cacheNodes[i]!);
  };
  for (const f of active) {
    switch (f.kind) {
      case 'capacity-drop':
        each(f.servers, (s) => (s.keep *= f.factor));
        break;
      case 'slowdown':
        if (f.target === 'database') databaseSlowdown *= f.factor;
        else if (f.target === 'cache') eachNode(f.nodes, (n) => (n.slow *= f.factor));
        else each(f.servers, (s) => (s.slowdown *= f.factor));
        break;
      case 'degrade-cache':
        eachNode(f.nodes, (n) => (n.keep *= f.factor));
        break;
      case 'hang-cache':
        eachNode(f.nodes, (n) => (n.hung = true));
        break;
      case 'kill-cache':
        eachNode(f.nodes, (n) => (n.down = true));
        break;
      case 'degrade-servers':
        each(f.servers, (s) => (s.slowdown /= f.factor));
        break;
      case 'hang':
        servers[f.server]!.hung = true;
        break;
      case 'load-spike':
        load *= f.factor;
        break;
      case 'load-ramp':
        load *= rampAt(f.profile, t - f.startS);
        break;
      case 'invalid-value':
      case 'cache-flush':
      case 'eject-cache':
      case 'cut-traffic':
      case 'restart':
        // Events, not states: the world acts on their start (and the invalid value's fix, the replacements' joining, at their end).
        break;
    }
  }
  return { servers, cacheNodes, databaseSlowdown, load };
}

/** A load ramp's factor `s` seconds after its start: linear between its points, the last held. */
export function rampAt(profile: readonly (readonly [number, number])[], s: number): number {
  let before = profile[0]!;
  for (const p of profile) {
    if (p[0] > s) return before[1] + ((p[1] - before[1]) * (s - before[0])) / (p[0] - before[0]);
    before = p;
  }
  return before[1];
}

/** The cache nodes out of the ring at `t` (s): ejected, their replacements not yet joined. */
export function ejectedAt(scenario: ServiceScenario, t: number): ReadonlySet<number> {
  return new Set(activeAt(scenario, t).flatMap((f) => (f.kind === 'eject-cache' ? f.nodes : [])));
}

/** The faults of `scenario` active at `t` (s). */
export function activeAt(scenario: ServiceScenario, t: number): ServiceFault[] {
  return scenario.faults.filter((f) => f.startS <= t && t < f.endS);
}
