import { Admission, type AdmissionOptions, deadlineOf, Dependency, type DependencyCallOptions, type DependencyOptions, onAbort, type Priority, type Refusal, type RequestScope, type VirtualClock } from 'damper';
import { admissionOptions, type DamperSettings, dependencyOptions } from '../damper-config.js';
import { type Watch } from '../judge/damper-gauges.js';

/**
 * damper's side of a world with client tiers and servers, built as a
 * service ships it: each client tier calls the tier below through a
 * `Dependency` (the innermost over the servers), each server admits its
 * requests through an `Admission`. The lab adds no guard of its own: what
 * runs is the library's composition (retry under a budget, the balancer, a
 * throttle and breaker per upstream, deadlines), wired to simulated I/O.
 */

/** An attempt's way to `server`: the attempt's signal travels with it, as a connection does. */
export type ToServer<S, A> = (server: S, signal: AbortSignal) => Promise<A>;

/** A user's call for `key` down the tiers, given how an attempt reaches a server, its deadline (an instant) and priority. */
export type TiersCall<S, A> = (toServer: ToServer<S, A>, key: string, deadline: number | undefined, priority: Priority | undefined) => Promise<A>;

/**
 * A server a client tier runs on, behind its admission: takes an attempt
 * at the tier (its key, priority and signal) and, once a worker serves it,
 * makes the tier's call below on the scope's signal (`below`), then does
 * its own work and answers.
 */
export type Host<A> = (key: string, priority: Priority | undefined, signal: AbortSignal, below: (signal: AbortSignal) => Promise<A>) => Promise<A>;

/** The shape of damper's client tiers, from the scenario. */
export interface DamperTiersShape<S, A> {
  /** Client tiers (1: the users' own client calls the servers). */
  readonly layers: number;
  /** The servers the innermost tier balances over, as the balancer's targets. */
  readonly servers: readonly S[];
  /** The lab's own options of tier `tier`'s `Dependency` but its balancer's, under the configuration's `dependency(tier)`. */
  readonly options: (tier: number) => Omit<DependencyOptions<unknown>, 'upstreams' | 'clock' | 'balancer'>;
  /** The lab's own options of the innermost tier's balancer over the servers. */
  readonly balancer?: NonNullable<DependencyOptions<S>['balancer']>;
  /** The servers tier t runs on, when it has its own (never tier 0: the users' client); the tier above balances over them. */
  readonly hosts?: (tier: number) => readonly Host<A>[] | undefined;
}

/** A call's options with only the fields given, set one by one rather than spread from `{}`s: every simulated request makes one. */
function callOptions(deadline: number | undefined, priority: Priority | undefined, signal: AbortSignal | undefined): DependencyCallOptions {
  const options: { deadline?: number; priority?: Priority; signal?: AbortSignal } = {};
  if (deadline !== undefined) options.deadline = deadline;
  if (priority !== undefined) options.priority = priority;
  if (signal !== undefined) options.signal = signal;
  return options;
}

/**
 * Client tiers 0 (the outermost) … `layers - 1`, each a `Dependency`: tier
 * t's one upstream is tier t + 1, whose call it makes inside its attempt
 * with the attempt's deadline and signal (what damper/http sends in a header
 * and the next tier's admission reads back), or, when tier t + 1 runs on
 * servers of its own, those servers (each attempt admitted at one of them,
 * which makes tier t + 1's call); the innermost's upstreams are the
 * servers. Each tier's `Retry` is instrumented through `watch`, as `tier=t`.
 */
export function damperTiers<S, A>(clock: VirtualClock, shape: DamperTiersShape<S, A>, settings: DamperSettings, watch?: Watch): { readonly call: TiersCall<S, A>; close(): void } {
  const dependencies: Dependency<unknown>[] = [];
  const innermost = shape.layers - 1;
  const lab: Omit<DependencyOptions<S>, 'upstreams' | 'clock'> = { ...shape.options(innermost), ...(shape.balancer === undefined ? {} : { balancer: shape.balancer }) };
  const servers = new Dependency<S>(dependencyOptions(settings, innermost, lab, { clock, upstreams: shape.servers.map((target, i) => ({ id: `server${i}`, target })) }));
  dependencies.push(servers as Dependency<unknown>);
  type Down = (toServer: ToServer<S, A>, key: string, deadline: number | undefined, priority: Priority | undefined, signal: AbortSignal | undefined) => Promise<A>;
  let down: Down = (toServer, _key, deadline, priority, signal) => servers.call((upstream, s) => toServer(upstream.target, s), callOptions(deadline, priority, signal));
  for (let t = innermost - 1; t >= 0; t--) {
    const hosts = shape.hosts?.(t + 1);
    const upstreams = hosts === undefined ? [{ id: `tier${t + 1}`, target: -1 }] : hosts.map((_, i) => ({ id: `tier${t + 1}-server${i}`, target: i }));
    const tier = new Dependency<number>(dependencyOptions<number>(settings, t, shape.options(t), { clock, upstreams }));
    dependencies.push(tier as Dependency<unknown>);
    const below = down;
    // The tier below gets the deadline of this tier's attempt (its timeout, the call's deadline) and stops when the attempt is abandoned.
    down =
      hosts === undefined
        ? (toServer, key, deadline, priority, signal) => tier.call((_, s) => below(toServer, key, deadlineOf(s), priority, s), callOptions(deadline, priority, signal))
        : (toServer, key, deadline, priority, signal) =>
            tier.call((upstream, s) => hosts[upstream.target]!(key, priority, s, (served) => below(toServer, key, deadlineOf(served), priority, served)), callOptions(deadline, priority, signal));
  }
  dependencies.reverse().forEach((d, t) => watch?.(d.retry, { tier: t }));
  const top = down;
  return {
    call: (toServer, key, deadline, priority) => top(toServer, key, deadline, priority, undefined),
    close: () => dependencies.forEach((d) => d.close()),
  };
}

/**
 * Serves the admitted request for `key` in `scope` (its priority, deadline and signal): calls `answer` or `fail` once,
 * when the work is over (the slot is held until then). The server should
 * drop the work when `scope.signal` has aborted (its caller gone or its
 * deadline passed) before it starts it.
 */
export type Serve<A, C = undefined> = (key: string, scope: RequestScope, answer: (value: A) => void, fail: (error: unknown) => void, context: C) => void;

/**
 * The process a simulated server runs in, when it can hang (the service
 * world's `Server`): an attempt reaches the server's admission, and a
 * refusal leaves it, only while the process runs (`whenRunning`); a restart
 * first closes the attempt's connection, and the attempt fails with
 * `closed()`.
 */
export interface HostProcess {
  whenRunning(run: () => void, reset: () => void): void;
  closed(): unknown;
}

/**
 * A simulated server behind damper's `Admission` (the lab's options under
 * the configuration's `admission(server)`), as an attempt reaches it: the
 * attempt's deadline is read from its signal (damper/http sends it as the
 * time left), its abort is the caller going away. A refusal rejects with
 * what `refused` makes of it (the server's 503 or 504). `onAdmission` is
 * told of the admission made (to instrument its limiter). `context` is
 * handed to `serve` as the attempt brought it (a tier's call below).
 * The admission runs in the server's `process`, when it has one: a hung
 * process neither admits nor sheds, so its callers wait for their deadline.
 */
export function admittedServer<A, C = undefined>(
  clock: VirtualClock,
  settings: DamperSettings,
  index: number,
  lab: Omit<AdmissionOptions, 'clock'>,
  serve: Serve<A, C>,
  refused: (refusal: Refusal) => unknown,
  onAdmission?: (admission: Admission) => void,
  process?: HostProcess,
): (key: string, priority: Priority | undefined, signal: AbortSignal, context: C) => Promise<A> {
  const admission = new Admission(admissionOptions(settings, index, lab, { clock }));
  onAdmission?.(admission);
  return (key, priority, signal, context) =>
    new Promise<A>((resolve, reject) => {
      // The caller stops waiting (its attempt's timeout, the deadline): the attempt ends; the server learns it through the signal.
      const stop = onAbort(signal, () => reject(signal.reason));
      // The time left as the attempt carries it (damper/http's header, written as it is sent): a process that reads it
      // late, after a hang, still reads this much.
      const until = deadlineOf(signal);
      const remainingMs = until === undefined ? undefined : until - clock.now();
      const admit = (): void => {
        admission.admit(
          { key, priority, remainingMs, signal },
          {
            serve: (scope) =>
              new Promise<void>((over) =>
                serve(
                  key,
                  scope,
                  (value) => (over(), stop(), resolve(value)),
                  (error) => (over(), stop(), reject(error)),
                  context,
                ),
              ),
            // A refusal is an answer: it leaves a process that runs (the answers of its workers wait in the server itself).
            refuse: (refusal) => passing(() => (stop(), reject(refused(refusal)))),
          },
        );
      };
      const closed = (): void => (stop(), reject(process!.closed()));
      const passing = (run: () => void): void => (process === undefined ? run() : process.whenRunning(run, closed));
      passing(admit);
    });
}
