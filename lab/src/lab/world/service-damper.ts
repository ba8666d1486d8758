import { Balancer, type BalancerOptions, ConcurrencyLimiter, DeadlineGuard, type Guard, onAbort, OverloadedError, pipeline, type Priority, type VirtualClock } from 'damper';
import { balancerOptions, type DamperSettings } from '../damper-config.js';
import { damperTier } from './client-tiers.js';
import { type Population } from '../scenario.js';
import { type HealthShape } from './front-door.js';
import { answer, failure, HIT, MISS, ServiceFailure } from './service-answers.js';
import { roundRobin } from './service-naive.js';
import { type Server } from './service-server.js';
import { type Served } from './web-server.js';
import type { ServiceScenario } from './service.js';

/** Sends one attempt for `key` to the servers under `signal` (the attempt's timeout and the call's deadline). */
export type DamperFront = (key: string, priority: Priority, signal: AbortSignal) => Promise<Served>;

const UPSTREAM_TIMEOUT = new ServiceFailure(answer('timeout', false));

/**
 * Server `i` behind its admission guard: the configuration's `admission(i)`,
 * or the lab's `ConcurrencyLimiter` of `admissionLimit` (default: the
 * workers) with the server's queue length, damper's queue timeout, CoDel and
 * adaptive LIFO. The attempt's signal travels with the request, so the
 * server drops work nobody waits for.
 */
function admitted(clock: VirtualClock, server: Server, scenario: ServiceScenario, guard: Guard): DamperFront {
  return (key, priority, signal) =>
    guard.run(
      (s) =>
        new Promise<Served>((resolve, reject) =>
          server.submit({ key, priority, abandoned: () => s.aborted, done: (outcome, waited) => (outcome === 'ok' ? resolve(waited ? MISS : HIT) : reject(failure(answer(outcome, waited)))) }),
        ),
      { key, signal, wait: true, priority },
    );
}

/** The lab's admission guard of a server. */
function defaultAdmission(clock: VirtualClock, scenario: ServiceScenario): Guard {
  const { workers, maxQueue, admissionLimit } = scenario.servers;
  return new ConcurrencyLimiter({ clock, limit: admissionLimit ?? workers, maxQueue });
}

/**
 * damper's front: round robin, or the library's `Balancer` over the servers
 * with the lab's options (power of two choices, liveness checks with the
 * scenario's interval, timeout, fall and rise: a hung server fails them, a
 * slow one passes; a shed request is not held against a server; its
 * defaults for max ejection share, panic threshold and slow start) under the
 * configuration's `balancer()`; `clock` and `upstreams` are the world's. An
 * attempt the caller abandons counts against the server it went to.
 */
export function damperFront(clock: VirtualClock, servers: readonly Server[], scenario: ServiceScenario, settings: DamperSettings): { front: DamperFront; close(): void } {
  const fronts = servers.map((server, i) => admitted(clock, server, scenario, settings.admission?.(i) ?? defaultAdmission(clock, scenario)));
  const shape = scenario.balancer;
  if (shape === undefined) {
    const pick = roundRobin(fronts);
    return { front: (key, priority, signal) => pick()(key, priority, signal), close() {} };
  }
  const balancer = new Balancer<number>(balancerOptions(settings, labBalancer(servers, shape), { clock, upstreams: servers.map((_, i) => ({ id: `server${i}`, target: i })) }));
  const front: DamperFront = (key, priority, signal) =>
    balancer.run(
      (i) =>
        new Promise<Served>((resolve, reject) => {
          const stop = onAbort(signal, () => reject(UPSTREAM_TIMEOUT));
          fronts[i]!(key, priority, signal).then(
            (served) => (stop(), resolve(served)),
            (error: unknown) => (stop(), reject(error)),
          );
        }),
      { priority },
    );
  return { front, close: () => balancer.close() };
}

function labBalancer(servers: readonly Server[], shape: HealthShape): Omit<BalancerOptions<number>, 'upstreams'> {
  return {
    health: {
      check: (i, signal) => (servers[i]!.hung ? new Promise((_, reject) => onAbort(signal, () => reject(signal.reason))) : Promise.resolve()),
      interval: shape.intervalS * 1000,
      timeout: shape.timeoutMs,
      unhealthyThreshold: shape.fall,
      healthyThreshold: shape.rise,
    },
    isFailure: (error) => !(error instanceof OverloadedError),
  };
}

/**
 * damper's stack of client tiers, outermost first: the configuration's
 * `client(t)` for each tier, or the lab's own (as retry-storm's): a real
 * `Retry` per tier with a `RetryBudget` of its own and the populations'
 * most retries, the innermost with the attempt timeout and behind an
 * `AdaptiveThrottle`. Without tiers, a `DeadlineGuard` per population gives
 * each call the user's timeout as its signal, so the servers drop work whose
 * user has gone.
 */
export function damperStack(clock: VirtualClock, scenario: ServiceScenario, settings: DamperSettings): (population: Population) => Guard {
  const { tiers } = scenario;
  if (tiers === undefined) {
    const byPopulation = new Map(scenario.clients.map((p) => [p, new DeadlineGuard({ clock, timeout: p.timeoutMs })]));
    return (p) => byPopulation.get(p)!;
  }
  const maxAttempts = 1 + Math.max(...scenario.clients.map((p) => p.retries));
  const guards: Guard[] = [];
  for (let t = 0; t < tiers.count; t++) guards.push(settings.client?.(t) ?? damperTier(clock, { layers: tiers.count, maxAttempts, attemptTimeoutMs: tiers.attemptTimeoutMs }, t));
  const stack = pipeline(...guards);
  return () => stack;
}
