import { ConcurrencyLimiter, type DependencyOptions, type Timer, VirtualClock } from 'damper';
import { Clients, type RunOptions } from '../clients.js';
import { damperSettings, type DamperSettings } from '../damper-config.js';
import { Recorder } from '../metrics.js';
import { Network } from '../network.js';
import { type VariantName, type VariantRun } from '../results.js';
import { type Backoff, type FaultSpanDoc, type Json, type Population, type ScenarioCommon, replaceFault, sizeAxis, spanAxis } from '../scenario.js';
import { check } from '../schema/problems.js';
import { retryStormSchema } from '../schema/retry-storm.js';
import { stream, STREAMS } from '../streams.js';
import { type WorldKind } from '../worlds.js';
import { type Call as TiersCall, naiveTiers } from './naive-tiers.js';
import { admittedServer, damperTiers } from './damper-tiers.js';
import { answer, failure, shedFailure } from './service-answers.js';
import { Fifo } from './fifo.js';
import { DamperGauges, type Watch } from '../damper-gauges.js';
import { LabCounters } from '../lab-counters.js';

/**
 * The generic retry storm (issue 7), after Marc Brooker's "Metastability and
 * distributed systems" and Huang et al., "Metastable Failures in the Wild"
 * (OSDI 2022): open-loop users call a server through a stack of clients that
 * time out and retry, and the server gets slower the more work it holds and
 * keeps working on requests whose callers have gone. A trigger (a load spike,
 * or the server slowing down for a while) pushes it over; the naive retries
 * then keep it overloaded after the trigger is gone.
 *
 * The model:
 * - **Server.** `workers` requests in service at once, the rest wait in a
 *   queue of at most `maxQueue` (beyond it, refused at once). A request's
 *   service time is fixed when it starts:
 *   `baseServiceMs × (1 + slowdownPerInFlight × n) × slowdown`, where `n` is
 *   the number of requests the server holds (in service and queued) at that
 *   instant and `slowdown` is the `server-slowdown` fault's factor while it
 *   lasts (1 otherwise). So the more work piles up, the less the server gets
 *   done per second (contention, memory pressure, GC): the capacity at load
 *   `n` is `workers / (baseServiceMs × (1 + k × n))`. Its healthy capacity,
 *   the report's capacity line, is `workers × 1000 / baseServiceMs`.
 * - **Client stack.** A user's call goes down `client.layers` tiers (a front
 *   end calling a mid tier calling the server, say); each tier makes up to
 *   `1 + client.retries` attempts at the tier below, and the innermost one
 *   gives each attempt `client.attemptTimeoutMs`. Retries at every tier
 *   multiply: up to `(1 + retries)^layers` attempts reach the server per call.
 *   The user (a population) waits `timeoutMs` for an answer: goodput counts
 *   answers within it.
 * - **Metrics.** `offered` counts users' calls; `originQps` counts attempts
 *   that reach the server, refused or not (for this world the "origin" is the
 *   server), so `amplification` is the peak attempts/s reaching the server
 *   (10 s sliding mean) over their mean rate in the baseline window, where
 *   there is one attempt per call.
 *
 * The variants differ only in code:
 * - **naive**: every tier retries immediately (or after the scenario's
 *   `client.backoff`: fixed, exponential or full jitter) on a timeout or an
 *   error, up to `retries` times, with no budget; nobody tells the tiers below that the user left.
 *   The server is a plain FIFO queue: an attempt that timed out stays queued
 *   and is served anyway, and its work slows every other request.
 * - **damper**: every tier is a real {@link Retry} (full-jitter backoff,
 *   damper's defaults) drawing on a {@link RetryBudget} of its own tier, the
 *   innermost behind an {@link AdaptiveThrottle}; the call carries the user's
 *   deadline, and each attempt's signal (aborted at the attempt's timeout or
 *   the deadline) travels with the request to the server, as a gRPC deadline
 *   and cancellation do. The server admits work through a
 *   {@link ConcurrencyLimiter} (limit `workers`, queue `maxQueue`, damper's
 *   queue timeout, CoDel and adaptive LIFO), which drops a queued request the
 *   moment its signal aborts, and starts no work whose signal has aborted.
 */

/** A fault of the retry-storm world; both kinds are triggers. */
export type RetryStormFault = FaultSpanDoc &
  (
    | /** Users' arrival rate × `factor` from `startS` to `endS`. */
    { readonly kind: 'load-spike'; readonly factor: number }
    /** The server's service time × `factor` from `startS` to `endS` (for requests starting service then). */
    | { readonly kind: 'server-slowdown'; readonly factor: number }
  );

export interface RetryStormScenario extends ScenarioCommon {
  readonly world: 'retry-storm';
  /** The server; see the module's comment for the service-time model. */
  /**
   * The server; see the module's comment for the service-time model.
   * `admissionLimit` is damper's setting, not the server's: how many requests
   * its `ConcurrencyLimiter` admits at once (in service, or in the server's
   * own queue behind its workers); absent from the file, the number of workers. It is its
   * own number because the best one is not the worker count: a server of
   * 10,000 threads that slows down with each is best at a few hundred.
   */
  readonly server: { readonly workers: number; readonly baseServiceMs: number; readonly slowdownPerInFlight: number; readonly maxQueue: number; readonly admissionLimit: number };
  /** The client stack between users and the server: tiers, the innermost's attempt timeout, retries per tier and the wait before each (`retryDelayMs`: `backoff`'s delay when it is fixed, else 0). */
  readonly client: { readonly layers: number; readonly attemptTimeoutMs: number; readonly retries: number; readonly retryDelayMs: number; readonly backoff: Backoff };
  readonly faults: readonly RetryStormFault[];
}

/** Checks a retry-storm scenario document. */
export function parseRetryStorm(o: Record<string, Json>, where: string): RetryStormScenario {
  return check(retryStormSchema, o, where);
}

/** The retry-storm world, for the registry in worlds.ts. */
export const retryStorm: WorldKind<RetryStormScenario> = {
  parse: parseRetryStorm,
  run: (scenario, variant, seed, options) => runRetryStorm(scenario, variant, seed, options),
  originCapacityQps: (scenario) => (scenario.server.workers * 1000) / scenario.server.baseServiceMs,
  cached: false,
  trigger: spanAxis('trigger held (s)'),
  triggerSize: sizeAxis(
    'trigger factor (× slowdown or load)',
    (s) => s.faults.find((f) => f.trigger),
    (f) => f.factor,
    (s, f, factor) => replaceFault(s, f, { ...f, factor }),
  ),
};

/** The server's service time for a request starting now, ms (whole, to stay on the engine's steps). */
function serviceMs(server: RetryStormScenario['server'], held: number, slowdown: number): number {
  return Math.max(1, Math.round(server.baseServiceMs * (1 + server.slowdownPerInFlight * held) * slowdown));
}

/** How an attempt ended at the server, as its tier sees it. */
type Outcome = 'ok' | 'refused' | 'timeout' | 'dropped';

interface Job {
  /** Called once with the outcome; cleared by the caller when it stops waiting. */
  done: ((outcome: Outcome) => void) | undefined;
  /** Whether nobody waits for this job any more: a damper request carries its signal, a naive one nobody's word. */
  readonly abandoned?: () => boolean;
}

/**
 * The server, the same for both variants: `workers` in service, a FIFO queue
 * of at most `maxQueue` behind them (beyond it, refused at once). It serves a
 * job whose caller left like any other unless the job says it was abandoned
 * (damper's requests carry their signal, as a gRPC request does): then a
 * worker that takes it up drops it at once. Every job it holds counts in the
 * load that slows service down.
 */
class Server {
  private readonly queue = new Fifo<Job>();
  private busy = 0;
  slowdown = 1;

  constructor(
    private readonly clock: VirtualClock,
    private readonly shape: RetryStormScenario['server'],
  ) {}

  /** Takes a request; `job.done` is called with its outcome (synchronously when refused). */
  submit(job: Job): void {
    if (this.busy >= this.shape.workers) {
      if (this.queue.size >= this.shape.maxQueue) {
        job.done?.('refused');
        return;
      }
      this.queue.push(job);
    } else this.serve(job);
  }

  private serve(job: Job): void {
    if (job.abandoned?.() === true) {
      job.done?.('dropped');
      this.next();
      return;
    }
    this.busy++;
    const ms = serviceMs(this.shape, this.busy + this.queue.size, this.slowdown);
    this.clock.setTimer(() => {
      this.busy--;
      job.done?.('ok');
      this.next();
    }, ms);
  }

  private next(): void {
    const next = this.queue.shift();
    if (next !== undefined) this.serve(next);
  }
}

/** A user's call through the client stack: true for an answer, false for a failure. */
type Call = TiersCall<boolean>;

/**
 * The naive client stack ({@link naiveTiers}): every tier retries on any
 * failure, `retries` times, with no budget; the innermost gives each attempt
 * `attemptTimeoutMs` and leaves it queued at the server when it gives up.
 */
function naiveStack(clock: VirtualClock, recorder: Recorder, server: Server, client: RetryStormScenario['client'], jitter: () => number, counters: LabCounters): Call {
  const attempt = (onDone: (ok: boolean) => void): void => {
    let timer: Timer | undefined;
    const job: Job = {
      done: (outcome) => {
        job.done = undefined;
        timer?.cancel();
        onDone(outcome === 'ok');
      },
    };
    recorder.originQuery(clock.now());
    server.submit(job);
    if (job.done !== undefined) timer = clock.setTimer(() => job.done?.('timeout'), client.attemptTimeoutMs);
  };
  const counts = Array.from({ length: client.layers }, (_, depth) => counters.retry(`tier=${depth}`));
  return naiveTiers(clock, client, jitter, attempt, (ok) => ok, counts);
}

/**
 * damper's side, as a service ships it (damper-tiers.ts): each client tier
 * a `Dependency` under the configuration's `dependency(t)` (the lab's own:
 * `retries + 1` attempts from a budget of the tier's own, a throttle and a
 * breaker on the tier below, the innermost giving each attempt
 * `attemptTimeoutMs`); the server admits through an `Admission` under the
 * configuration's `admission(0)` (the lab's own: a `ConcurrencyLimiter` of
 * `admissionLimit` with the server's queue), which sheds with a 503 and
 * `Retry-After`, and drops what nobody waits for: the attempt's signal
 * travels with the request. The tiers' `Retry`s and the limiter are
 * instrumented through `watch`.
 */
function damperStack(clock: VirtualClock, recorder: Recorder, server: Server, scenario: RetryStormScenario, settings: DamperSettings, watch: Watch): { call: (timeoutMs: number) => Call; close(): void } {
  const { client } = scenario;
  const admitted = admittedServer<true>(
    clock,
    settings,
    0,
    { limiter: new ConcurrencyLimiter({ limit: scenario.server.admissionLimit, maxQueue: scenario.server.maxQueue, clock }) },
    (_key, scope, ok, fail) => server.submit({ done: (outcome) => (outcome === 'ok' ? ok(true) : fail(failure(answer(outcome === 'refused' ? 'refused' : 'dropped', 'cache')))), abandoned: () => scope.signal.aborted }),
    (refusal) => (refusal.reason === 'shed' ? shedFailure(refusal.retryAfter) : failure(answer('dropped', 'cache'))),
    (admission) => watch(admission.limiter, {}),
  );
  const options = (t: number): Omit<DependencyOptions<unknown>, 'upstreams' | 'clock' | 'balancer'> => ({
    retry: { maxAttempts: client.retries + 1, ...(t === client.layers - 1 ? { attemptTimeout: client.attemptTimeoutMs } : {}) },
  });
  const chain = damperTiers<null, true>(clock, { layers: client.layers, servers: [null], options }, settings, watch);
  // An attempt reaching the server counts, admitted or shed: the origin's load.
  const toServer = (_: null, signal: AbortSignal): Promise<true> => (recorder.originQuery(clock.now()), admitted('request', undefined, signal));
  return {
    call: (timeoutMs) => (onDone) => {
      chain.call(toServer, clock.now() + timeoutMs, undefined).then(
        () => onDone(true),
        () => onDone(false),
      );
    },
    close: () => chain.close(),
  };
}

/**
 * Runs one variant of a retry-storm scenario. Both variants get the same
 * arrivals and the same faults; they differ only in the client stack and the
 * server's admission.
 */
export async function runRetryStorm(scenario: RetryStormScenario, variant: VariantName, seed: number, options: RunOptions = {}): Promise<VariantRun> {
  const clock = new VirtualClock({ seed });
  const recorder = new Recorder(scenario.durationS);
  const network = new Network(clock, scenario.network.hopDelay, seed);
  const server = new Server(clock, scenario.server);
  let call: (population: Population) => Call;
  let characteristics: LabCounters | DamperGauges;
  let close = (): void => {};
  if (variant === 'naive') {
    const counters = new LabCounters(clock);
    characteristics = counters;
    const stack = naiveStack(clock, recorder, server, scenario.client, stream(seed, STREAMS.retryJitter), counters);
    call = () => stack;
  } else {
    const gauges = new DamperGauges(clock);
    characteristics = gauges;
    const stack = damperStack(clock, recorder, server, scenario, await damperSettings(scenario, clock), gauges.watch);
    close = stack.close;
    const byPopulation = new Map(scenario.clients.map((p) => [p, stack.call(p.timeoutMs)]));
    call = (p) => byPopulation.get(p)!;
  }
  const clients: Clients<RetryStormFault> = new Clients<RetryStormFault>(
    { clock, recorder, scenario, seed, network, traffic: STREAMS.retryStormTraffic, characteristics },
    {
      send(req, replies) {
        call(req.population)((ok) => {
          // Every answer comes from the server, this world's origin: there are no hits.
          req.waitedForOrigin = true;
          if (ok) replies.answer(req);
          else replies.fail(req);
        });
      },
      fault({ fault, starts }) {
        if (fault.kind === 'server-slowdown') server.slowdown = starts ? fault.factor : 1;
        else clients.load = starts ? fault.factor : 1;
      },
    },
  );
  try {
    await clients.run(options);
  } finally {
    close();
  }
  return clients.result();
}
