import { type AdmissionOptions, type Clock, ConcurrencyLimiter, type DependencyOptions, onAbort, type Priority, type Refusal, type VirtualClock } from 'damper';
import { type DamperSettings } from '../damper-config.js';
import { type Watch } from '../judge/damper-gauges.js';
import { admittedServer, damperTiers, type Host, type HostProcess } from './damper-tiers.js';
import { type HealthShape } from '../schema/common.js';
import { type Answer, answer, answerOf, belowOutcome, failure, shedFailure } from './service-answers.js';
import { type Job, type Server } from './service-server.js';
import type { ServiceScenario } from './service.js';
import { type ServiceTiers, tierSettings } from './service-tiers.js';

/** A user's request through damper's side of the service world: its key, priority and deadline (an instant). */
export type DamperSend = (key: string, priority: Priority, deadline: number) => Promise<Answer>;

/**
 * damper's side of the service world, as a service ships it (damper-tiers.ts):
 *
 * - each server admits through an `Admission` whose limiter admits
 *   `admissionLimit` requests at once (default: the workers) and queues
 *   the server's `maxQueue`, under the configuration's `admission(i)`;
 *   a shed request is a 503 with `Retry-After`, one past its deadline a 504;
 * - each client tier is a `Dependency` under the configuration's
 *   `dependency(t)`: with `tiers`, `count` of them, each making its own
 *   retries + 1 attempts (`tiers.each`), else the populations' most, with its
 *   own attempt timeout, else none but the innermost's `attemptTimeoutMs`;
 *   without, one: the users' own client, one attempt
 *   per call (the populations retry as the scenario says), cut at the
 *   user's timeout. The innermost balances over the servers, with liveness
 *   checks on the scenario's `balancer` (interval, timeout, fall and rise:
 *   a hung server fails them, a slow one passes) when it has one.
 *
 * A tier with servers of its own (`tiers.each[t].servers`, `hosts[t]`)
 * runs on them, each behind an `Admission` with the lab's options (a
 * configuration module's `admission(i)` is the scenario's servers'): the
 * tier above balances over them, and a worker is held while the tier makes
 * its calls below.
 *
 * An invalid value is an answer (a 200 whose body is wrong), not a failure.
 * Each tier's `Retry` (`tier=t`) and each server's limiter (`server=i`; a
 * tier's server's `tier=t, server=i`) are instrumented through `watch`.
 * `arrived` is told of each attempt that reaches a server, before its
 * admission: admitted or shed, it is load.
 */
export function damperService(
  clock: VirtualClock,
  servers: readonly Server[],
  scenario: ServiceScenario,
  settings: DamperSettings,
  watch: Watch,
  arrived?: () => void,
  hosts: readonly (readonly Server[] | undefined)[] = [],
): { send: DamperSend; close(): void } {
  const admitted = servers.map((server, i) =>
    admittedServer<Answer>(
      clock,
      settings,
      i,
      damperServerAdmission(scenario, clock),
      (key, scope, ok, fail) =>
        server.submit({
          key,
          priority: scope.priority ?? 'normal',
          abandoned: () => scope.signal.aborted,
          done: settle(ok, fail),
        }),
      refused,
      (admission) => watch(admission.limiter, { server: i }),
      processOf(server),
    ),
  );
  const { tiers } = scenario;
  const layers = tiers?.count ?? 1;
  const balancer = scenario.balancer === undefined ? undefined : liveness(servers, scenario.balancer);
  const options = (t: number) => damperTierOptions(scenario, t);
  const ownHosts = hosts.map((pool, t) => (pool === undefined ? undefined : tierHosts(clock, pool, tiers!, t, watch)));
  const chain = damperTiers<number, Answer>(clock, { layers, servers: servers.map((_, i) => i), options, hosts: (t) => ownHosts[t], ...(balancer === undefined ? {} : { balancer }) }, settings, watch);
  return {
    send: (key, priority, deadline) =>
      chain.call(
        (i, signal) => {
          arrived?.();
          return admitted[i]!(key, priority, signal, undefined);
        },
        key,
        deadline,
        priority,
      ),
    close: () => chain.close(),
  };
}

/**
 * The lab's own options of client tier `t`'s `Dependency` (a configuration
 * module's `dependency(t)` is laid over them): with `tiers`, the tier's own
 * retries + 1 attempts (`tiers.each`), else the populations' most (one
 * Dependency serves them all), its own attempt timeout, else the
 * innermost's, and its hedge; without, one attempt (the populations retry
 * as the scenario says). Shared by the simulation and the real runner
 * (src/lab/real), so both deploy the same tiers.
 */
export function damperTierOptions(scenario: ServiceScenario, t: number): Omit<DependencyOptions<unknown>, 'upstreams' | 'clock' | 'balancer'> {
  const { tiers } = scenario;
  if (tiers === undefined) return { retry: { maxAttempts: 1 } };
  const own = scenario.clients.map((p) => tierSettings(tiers, t, p));
  const { attemptTimeoutMs: attemptTimeout, hedgeAfterMs } = own[0]!;
  return {
    retry: { maxAttempts: 1 + Math.max(...own.map((s) => s.retries)), ...(attemptTimeout === undefined ? {} : { attemptTimeout }) },
    // The tier hedges as the scenario says, as the library hedges: from the retry budget, to another upstream only.
    ...(hedgeAfterMs === undefined ? {} : { hedge: { after: hedgeAfterMs } }),
  };
}

/**
 * The lab's own options of a server's `Admission` (a configuration module's
 * `admission(i)` is laid over them): a limiter admitting `admissionLimit`
 * requests at once (default: the workers) with the server's `maxQueue`
 * behind it. Shared by the simulation and the real runner.
 */
export function damperServerAdmission(scenario: ServiceScenario, clock: Clock): Omit<AdmissionOptions, 'clock'> {
  const { workers, maxQueue, admissionLimit } = scenario.servers;
  return { limiter: new ConcurrencyLimiter({ clock, limit: admissionLimit ?? workers, maxQueue }) };
}

/** A server's outcome, settled as damper's guards read it: a value or an invalid one answers, anything else fails with its status. */
function settle(ok: (a: Answer) => void, fail: (error: unknown) => void): NonNullable<Job['done']> {
  return (outcome, source) => (outcome === 'ok' || outcome === 'invalid' ? ok(answer(outcome, source)) : fail(failure(answer(outcome, source))));
}

/**
 * The process a server and its admission run in: a hung one reads, sheds and
 * answers nothing (a SIGSTOP stops the whole process, damperAdmission with
 * it); a restart closes the connections of what it held, as it resets the
 * requests its workers held.
 */
function processOf(server: Server): HostProcess {
  return { whenRunning: (run, reset) => server.whenRunning(run, reset), closed: () => failure(answer('refused', 'cache')) };
}

/** An admission's refusal, as the server answers it: a 503 with `Retry-After` when shed, a 504 past the deadline. */
function refused(refusal: Refusal): unknown {
  return refusal.reason === 'shed' ? shedFailure(refusal.retryAfter) : failure(answer('dropped', 'cache'));
}

/**
 * The servers tier `t` runs on, each behind an `Admission` (the lab's
 * options: the tier's `admissionLimit`, else its workers, and its queue):
 * an admitted attempt waits for a worker, which makes the tier's call below
 * on the attempt's scope and holds the worker until it ends.
 */
function tierHosts(clock: VirtualClock, pool: readonly Server[], tiers: ServiceTiers, t: number, watch: Watch): readonly Host<Answer>[] {
  const shape = tiers.each![t]!.servers!;
  return pool.map((server, i) =>
    admittedServer<Answer, (signal: AbortSignal) => Promise<Answer>>(
      clock,
      {},
      i,
      { limiter: new ConcurrencyLimiter({ clock, limit: shape.admissionLimit ?? shape.workers, maxQueue: shape.maxQueue }) },
      (key, scope, ok, fail, below) =>
        server.submit({
          key,
          priority: scope.priority ?? 'normal',
          abandoned: () => scope.signal.aborted,
          below: (then) =>
            below(scope.signal).then(
              (a) => then(belowOutcome(a), a.source),
              (error: unknown) => {
                const a = answerOf(error);
                then(belowOutcome(a), a.source);
              },
            ),
          done: settle(ok, fail),
        }),
      refused,
      (admission) => watch(admission.limiter, { tier: t, server: i }),
    ),
  );
}

/** The balancer's liveness checks on the scenario's health shape: a hung server never answers one. */
function liveness(servers: readonly Server[], shape: HealthShape): NonNullable<DependencyOptions<number>['balancer']> {
  return livenessChecks(shape, (i, signal) => (servers[i]!.hung ? new Promise((_, reject) => onAbort(signal, () => reject(signal.reason))) : Promise.resolve()));
}

/**
 * The innermost tier's balancer options for the scenario's `balancer`:
 * `check` every `intervalS`, a failure past `timeoutMs`, out after `fall`
 * failures and back after `rise` passes. damper checks liveness (a process
 * that answers at all), not response time: slow is not dead (principle 5).
 * Shared by the simulation (a hung server never answers) and the real
 * runner (an HTTP check a SIGSTOPped process never answers).
 */
export function livenessChecks<U>(shape: HealthShape, check: (target: U, signal: AbortSignal) => Promise<void>): NonNullable<DependencyOptions<U>['balancer']> {
  return { health: { check, interval: shape.intervalS * 1000, timeout: shape.timeoutMs, unhealthyThreshold: shape.fall, healthyThreshold: shape.rise } };
}
