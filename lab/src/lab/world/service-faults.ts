import type { ServiceFault, ServiceScenario } from './service.js';

/**
 * What the service world's faults make of its parts at one instant, derived
 * from the faults active then and nothing else: the world applies it at each
 * fault event (and the load at each step, for a ramp), and the best possible
 * (src/lab/best-possible.ts) reads the same numbers, so the bound and the
 * run can never disagree about what a fault does.
 */
export interface ServiceState {
  /** Per server: service time × `slowdown`, the share of workers and cores it keeps, whether it hangs. */
  readonly servers: readonly { readonly slowdown: number; readonly keep: number; readonly hung: boolean }[];
  /** The database's service time ×. */
  readonly databaseSlowdown: number;
  /** Every population's rate (open loop) and users (closed loop) ×. */
  readonly load: number;
}

/** The state made by `active` faults at `t` (s). */
export function serviceState(scenario: ServiceScenario, active: Iterable<ServiceFault>, t: number): ServiceState {
  const servers = Array.from({ length: scenario.servers.count }, () => ({ slowdown: 1, keep: 1, hung: false }));
  let databaseSlowdown = 1;
  let load = 1;
  const each = (list: readonly number[] | undefined, apply: (s: (typeof servers)[number]) => void): void => {
    for (const i of list ?? servers.keys()) apply(servers[i]!);
  };
  for (const f of active) {
    switch (f.kind) {
      case 'capacity-drop':
        each(f.servers, (s) => (s.keep *= f.factor));
        break;
      case 'slowdown':
        if (f.target === 'database') databaseSlowdown *= f.factor;
        else each(f.servers, (s) => (s.slowdown *= f.factor));
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
        // Events, not states: the world acts on their start (and the invalid value's fix at its end).
        break;
    }
  }
  return { servers, databaseSlowdown, load };
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

/** The faults of `scenario` active at `t` (s). */
export function activeAt(scenario: ServiceScenario, t: number): ServiceFault[] {
  return scenario.faults.filter((f) => f.startS <= t && t < f.endS);
}
