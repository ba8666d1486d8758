import { type Timer, type VirtualClock } from 'damper';
import { type PlatformTime, type Signals, simulate, type World } from './engine.js';
import { type CharacteristicRecorder, SAMPLE_MS } from '../judge/characteristic.js';
import { type Recorder } from '../judge/metrics.js';
import { type Network } from './network.js';
import { type PopulationCounts, type VariantRun } from '../judge/results.js';
import { type FaultEvent, faultTimeline, triggerEndS, triggerStartS } from '../scenario.js';
import { type FaultSpanDoc, type Population, type ScenarioCommon } from '../schema/common.js';
import { sampleMs } from './delay.js';
import { retryDelayMs } from './retry-delay.js';
import { VerdictWatch } from '../judge/verdict-watch.js';
import { stream, STREAMS } from './streams.js';
import { poisson } from './traffic.js';

/**
 * The clients of every world, written once: open-loop populations whose
 * arrivals do not slow down when the system does, closed-loop ones whose
 * users wait for each answer and think before the next, each request with
 * its client's timeout and retries, and the scenario's fault timeline with
 * its operator actions. A world brings only what is its own: the system its
 * requests meet (naive or damper) and what its faults do to it.
 */

/**
 * How a run ends: at the scenario's horizon (`damper lab`: every second is
 * charted), or as soon as its verdict is decided (a sweep's cell: see
 * {@link VerdictWatch}).
 */
export type RunEnd = 'horizon' | 'verdict';

/** What a world's run is asked besides its scenario, variant and seed. */
export interface RunOptions {
  /** Called with the fraction done, once per simulated second. */
  readonly onProgress?: ((fraction: number) => void) | undefined;
  /** Default `'horizon'`. */
  readonly end?: RunEnd;
  /** Whose AbortSignals the run makes (see {@link SimulateOptions.signals}). Default `'light'`. */
  readonly signals?: Signals;
  /** What the platform's clock and timers do during the run (see {@link SimulateOptions.platformTime}). Default `'forbidden'`. */
  readonly platformTime?: PlatformTime;
}

/** One request of a client (one attempt: a retry is a request of its own). */
export interface ClientRequest {
  readonly population: Population;
  /** What it reads; '' in a world where keys mean nothing. */
  readonly key: string;
  /** 0 for a first attempt, n for the n-th retry. */
  readonly attempt: number;
  /** When it was sent, ms. */
  readonly start: number;
  /** Ended: answered, failed, or its client gave up. Later replies are ignored. */
  done: boolean;
  /**
   * Set by the system when the answer had to wait for the origin: a request
   * answered with a valid value and marked neither this nor `servedStale`
   * is a hit. The one definition of a hit the report's hit ratio uses, in
   * every world.
   */
  waitedForOrigin: boolean;
  /** Set by the system when it answered at once with a value past its ttl, refreshing it (a stale answer, not a hit). */
  servedStale: boolean;
  timeout: Timer | undefined;
}

/** How the system under test answers a request. A request never answered ends at its client's timeout. */
export interface Replies {
  /** A valid value. */
  answer(req: ClientRequest): void;
  /** An error, a refusal, or nothing usable. */
  fail(req: ClientRequest): void;
  /** A value that is not valid, handed to the client as if it were: counted in `invalidServed`, and a failure. */
  invalid(req: ClientRequest): void;
  /** The origin budget refused the request's load (`OverloadedError`): counted per population, whether or not the client still waits. */
  shed(req: ClientRequest): void;
}

/** What a world gives the clients. */
export interface ClientWorld<F extends FaultSpanDoc> {
  /** Sends one request into the system under test, which answers through `replies` (at once or later). */
  send(req: ClientRequest, replies: Replies): void;
  /** A fault starts or ends. An operator action that `when: "unhealthy"` made unnecessary never gets here. */
  fault(event: FaultEvent<F>, t: number): void;
  /** The key picker of a population: draws a new arrival's key from the traffic source. Default: no key, no draw. */
  keys?(population: Population): (random: () => number) => string;
  /** Called at each step after the faults and before the arrivals (a ramp that moves every step). */
  everyStep?(t: number): void;
}

const NO_KEY = (): string => '';

/** An operator action the scenario makes conditional on the dashboards (`when: "unhealthy"`). */
function onlyIfUnhealthy(fault: FaultSpanDoc): boolean {
  return 'when' in fault && fault.when === 'unhealthy';
}

/** A population's counts while the run keeps them. */
type Counts = { -readonly [K in keyof PopulationCounts]: PopulationCounts[K] };

/** What a run gives its clients: where they run, where they record, what they do, and the seed of their sources. */
export interface ClientRun<F extends FaultSpanDoc> {
  readonly clock: VirtualClock;
  readonly recorder: Recorder;
  readonly scenario: ScenarioCommon & { readonly faults: readonly F[] };
  readonly seed: number;
  /** The traffic source's constant. Default `STREAMS.traffic`. */
  readonly traffic?: number;
  /** The network between the clients and the system (one hop each way), shared with the world's other tiers. */
  readonly network: Network;
  /**
   * Who makes a population's `retries`: its clients (the default: each retry
   * a request of its own), or the world (the service world's client tiers
   * each retry per the population; the users then send each call once).
   */
  readonly retriedBy?: 'clients' | 'world';
  /** The variant's characteristic metrics, sampled at the start of every simulated second. Default: none recorded. */
  readonly characteristics?: CharacteristicRecorder;
}

const NO_CHARACTERISTICS: CharacteristicRecorder = { sample: () => {}, series: () => ({}) };

/**
 * The client side of a run, as the engine's `World`: at each 1 ms step the
 * faults due, then each population's Poisson arrivals (× `load`), each sent
 * to the system; timers only for requests not answered at once (most
 * requests of a healthy system are hits, and a timer each would cost more
 * than the rest of them).
 */
export class Clients<F extends FaultSpanDoc> implements World, Replies {
  /** Arrival rates × this, and closed populations' users × this (rounded): a load spike. */
  load = 1;
  private readonly clock: VirtualClock;
  private readonly recorder: Recorder;
  private readonly scenario: ScenarioCommon & { readonly faults: readonly F[] };
  /** Arrivals and keys, nothing else. */
  private readonly traffic: () => number;
  /** Full-jitter retry delays, nothing else. */
  private readonly jitter: () => number;
  private readonly network: Network;
  private readonly timeline: FaultEvent<F>[];
  private readonly skipped = new Set<FaultSpanDoc>();
  private readonly pickers: ((random: () => number) => string)[];
  private readonly counts: Counts[];
  private readonly spanFrom: number;
  private readonly spanTo: number;
  private pending: ClientRequest[] = [];
  private readonly retries: boolean;
  /** Closed-loop users' keys and think times, nothing else. */
  private readonly closedLoop: () => number;
  /** Users of each closed population now in the loop (0 for an open one). */
  private readonly users: number[];
  /** Each fixed-interval population's next arrival, ms (a load generator's schedule); unused for the others. */
  private readonly nextArrival: number[];
  /** A closed-loop user sent a request from a timer: the next step must arm its timeout. */
  private sentOutsideStep = false;
  private readonly characteristics: CharacteristicRecorder;
  private nextSample = 0;
  /** The horizon, ms: after it nobody sends (no retry, no closed-loop user's next call), as a load generator stops. */
  private readonly horizon: number;

  constructor(
    run: ClientRun<F>,
    private readonly world: ClientWorld<F>,
  ) {
    const { scenario } = run;
    this.clock = run.clock;
    this.recorder = run.recorder;
    this.scenario = scenario;
    this.traffic = stream(run.seed, run.traffic ?? STREAMS.traffic);
    this.jitter = stream(run.seed, STREAMS.retryJitter);
    this.network = run.network;
    this.timeline = faultTimeline(scenario.faults);
    this.pickers = scenario.clients.map((p) => world.keys?.(p) ?? NO_KEY);
    this.counts = scenario.clients.map(() => ({ requests: 0, good: 0, shed: 0 }));
    this.spanFrom = triggerStartS(scenario) * 1000;
    this.spanTo = triggerEndS(scenario) * 1000;
    this.retries = run.retriedBy !== 'world';
    this.closedLoop = stream(run.seed, STREAMS.closedLoop);
    this.users = scenario.clients.map(() => 0);
    this.nextArrival = scenario.clients.map(() => 0);
    this.characteristics = run.characteristics ?? NO_CHARACTERISTICS;
    this.horizon = scenario.durationS * 1000;
  }

  step(t: number): boolean {
    // Before this instant's faults and arrivals: the sample at `t` holds what happened before `t`, as a scrape at `t` would.
    if (t >= this.nextSample) {
      this.characteristics.sample(t);
      this.nextSample += SAMPLE_MS;
    }
    let started = this.faults(t);
    this.world.everyStep?.(t);
    if (this.sentOutsideStep) started = true;
    this.sentOutsideStep = false;
    const { clients } = this.scenario;
    for (let i = 0; i < clients.length; i++) {
      const population = clients[i]!;
      if (population.closed !== undefined) {
        if (this.join(i, population.closed.users)) started = true;
        continue;
      }
      const n = population.arrivals === 'fixed' ? this.due(i, population.rate * this.load, t) : poisson((population.rate * this.load) / 1000, this.traffic);
      if (n === 0) continue;
      started = true;
      const pick = this.pickers[i]!;
      for (let k = 0; k < n; k++) this.send(population, pick(this.traffic), 0);
    }
    return started;
  }

  afterStep(t: number): void {
    for (const req of this.pending) {
      if (!req.done) req.timeout = this.clock.setTimer(() => this.end(req, false), req.start + req.population.timeoutMs - t);
    }
    this.pending = [];
  }

  answer(req: ClientRequest): void {
    this.reply(req, true);
  }

  fail(req: ClientRequest): void {
    this.reply(req, false);
  }

  invalid(req: ClientRequest): void {
    if (!req.done) this.recorder.invalidServed++;
    this.reply(req, false);
  }

  shed(req: ClientRequest): void {
    if (this.inSpan(req)) this.counts[this.scenario.clients.indexOf(req.population)]!.shed++;
  }

  /** Runs the scenario on the engine: to its horizon, or until its verdict is decided. */
  run(options: RunOptions = {}): Promise<void> {
    const { onProgress, end = 'horizon', signals = 'light', platformTime = 'forbidden' } = options;
    const watch = end === 'verdict' ? new VerdictWatch(this.recorder, this.scenario) : undefined;
    return simulate({
      clock: this.clock,
      world: this,
      durationMs: this.horizon,
      signals,
      platformTime,
      // Each request counts in the second it was sent: the last seconds are known once their requests have ended.
      inFlight: () => this.recorder.settledBefore(this.recorder.seconds) < this.recorder.seconds,
      ...(onProgress === undefined ? {} : { onProgress }),
      ...(watch === undefined ? {} : { until: (t: number) => watch.decided(Math.floor(t / 1000)) }),
    });
  }

  /** What the run measured, once it is over. */
  result(): VariantRun {
    const series = this.recorder.series();
    const populations: Record<string, PopulationCounts> = {};
    this.scenario.clients.forEach((p, i) => (populations[p.name] = this.counts[i]!));
    return {
      series,
      characteristics: this.characteristics.series(),
      summary: this.recorder.summary(this.scenario, series, this.simulatedS()),
      skippedFaults: this.scenario.faults.flatMap((f, i) => (this.skipped.has(f) ? [i] : [])),
      populations,
    };
  }

  /**
   * Whole seconds of the timeline simulated: every one when the run reached
   * its horizon (and went on until its last requests ended), else those
   * before the second its verdict was decided in (the engine asks once a
   * second, at its first millisecond).
   */
  private simulatedS(): number {
    const now = this.clock.now();
    return now >= this.horizon ? this.recorder.seconds : Math.floor(now / 1000);
  }

  /** Applies the faults due at `t`; true when there were any (their effects need the step to settle). */
  private faults(t: number): boolean {
    const timeline = this.timeline;
    let any = false;
    while (timeline.length > 0 && timeline[0]!.at <= t) {
      any = true;
      const event = timeline.shift()!;
      const { fault } = event;
      // Operators react to what the dashboards show, not to which code runs:
      // a conditional action is skipped, start and end, when the objective held.
      if (event.starts && onlyIfUnhealthy(fault) && this.recorder.recentGoodputRatio(t, this.scenario.objective.holdS) >= this.scenario.objective.goodputRatio) {
        this.skipped.add(fault);
      } else if (!this.skipped.has(fault)) this.world.fault(event, t);
    }
    return any;
  }

  private send(population: Population, key: string, attempt: number): void {
    const start = this.clock.now();
    // A retry or a closed-loop user's next call due after the horizon is not sent: the load generator has stopped.
    if (start >= this.horizon) return;
    this.recorder.started(start);
    const req: ClientRequest = { population, key, attempt, start, done: false, waitedForOrigin: false, servedStale: false, timeout: undefined };
    const ms = this.network.hopMs();
    if (ms === 0) this.world.send(req, this);
    else this.clock.setTimer(() => this.world.send(req, this), ms);
    this.pending.push(req);
  }

  /** The system's answer travels back one hop; a client that gave up meanwhile ignores it. */
  private reply(req: ClientRequest, ok: boolean): void {
    if (req.done) return;
    const ms = this.network.hopMs();
    if (ms === 0) this.end(req, ok);
    else this.clock.setTimer(() => this.end(req, ok), ms);
  }

  private end(req: ClientRequest, ok: boolean): void {
    if (req.done) return;
    req.done = true;
    req.timeout?.cancel();
    this.recorder.ended(req.start, this.clock.now(), !ok ? 'bad' : req.waitedForOrigin ? 'good' : req.servedStale ? 'stale' : 'hit');
    if (this.inSpan(req)) {
      const c = this.counts[this.scenario.clients.indexOf(req.population)]!;
      c.requests++;
      if (ok) c.good++;
    }
    const { population } = req;
    if (!ok && this.retries && req.attempt < population.retries) {
      this.clock.setTimer(() => {
        // An open population's arrivals arm it soon enough; a closed one may have none.
        if (population.closed !== undefined) this.sentOutsideStep = true;
        this.send(population, req.key, req.attempt + 1);
      }, retryDelayMs(population.backoff, req.attempt + 1, this.jitter));
    } else if (population.closed !== undefined) this.think(population, population.closed);
  }

  /**
   * How many requests fixed-interval population `i` sends at `t`: those whose
   * instant has come, one every `1000 ÷ perSecond` ms. A load change (a
   * spike) changes the interval from the next arrival on; at no load the
   * schedule waits, and starts again at the instant the load returns.
   */
  private due(i: number, perSecond: number, t: number): number {
    if (perSecond <= 0) {
      this.nextArrival[i] = t;
      return 0;
    }
    let n = 0;
    while (this.nextArrival[i]! <= t) {
      this.nextArrival[i]! += 1000 / perSecond;
      n++;
    }
    return n;
  }

  /** Users join closed population `i` up to `users × load`; true when any did (their first requests went out). */
  private join(i: number, users: number): boolean {
    const target = Math.round(users * this.load);
    if (this.users[i]! >= target) return false;
    const population = this.scenario.clients[i]!;
    const pick = this.pickers[i]!;
    while (this.users[i]! < target) {
      this.users[i]!++;
      this.send(population, pick(this.closedLoop), 0);
    }
    return true;
  }

  /**
   * A closed-loop user's call ended: it leaves if the population is above
   * `users × load` (a load spike ended), or thinks and sends its next call.
   * At least 1 ms: a user whose calls are refused at once would otherwise
   * spin within one step.
   */
  private think(population: Population, closed: NonNullable<Population['closed']>): void {
    const i = this.scenario.clients.indexOf(population);
    if (this.users[i]! > Math.round(closed.users * this.load)) {
      this.users[i]!--;
      return;
    }
    const ms = Math.max(1, Math.ceil(sampleMs(closed.thinkTime, this.closedLoop)));
    this.clock.setTimer(() => {
      this.sentOutsideStep = true;
      this.send(population, this.pickers[i]!(this.closedLoop), 0);
    }, ms);
  }

  private inSpan(req: ClientRequest): boolean {
    return req.start >= this.spanFrom && req.start < this.spanTo;
  }
}
