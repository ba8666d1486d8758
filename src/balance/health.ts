import { between, duration, integer, optionsObject, or } from '../config.js';
import { ConfigError } from '../errors.js';
import { startTask } from '../guard/guard.js';
import { type Clock, type Timer } from '../time/clock.js';

/**
 * Active health checks: the balancer probes each upstream on its own, so an
 * upstream that receives no traffic (ejected, or idle) is still judged, and
 * an ejected one returns only once it answers.
 *
 * A probe that answers late is *slow*, not *dead*: it counts as a pass and is
 * reported with `slow: true`. Only no answer (an error, or nothing before
 * `timeout`) counts toward `unhealthyThreshold`. The Columbia Missourian's
 * balancer (2010) read slowness as death and removed its last working server.
 */
export interface HealthCheckOptions<U> {
  /** Probes one upstream; resolves when it answers. Must honour `signal` (aborted at `timeout`). */
  check: (target: U, signal: AbortSignal) => Promise<void>;
  /** Time between the end of one probe and the start of the next, ms. Default 10 000. */
  interval?: number;
  /** A probe not answered within this is a failure and is aborted, ms. Default 2 000. */
  timeout?: number;
  /**
   * A probe answered after this is reported slow but still passes, ms.
   * Default: half of `timeout`. Must be below `timeout`.
   */
  slowMs?: number;
  /** Consecutive passes that make an unhealthy upstream healthy again. Default 2. */
  healthyThreshold?: number;
  /** Consecutive failures that make a healthy upstream unhealthy. Default 3. */
  unhealthyThreshold?: number;
  /**
   * Each wait is `interval × (1 ± jitter)`, drawn from the clock's seeded
   * source, and the first probe of each upstream starts at a random point of
   * the first interval, so a fleet of clients restarted together does not
   * probe in step. Default 0.2.
   */
  jitter?: number;
}

/** One probe's result. */
export interface ProbeResult {
  readonly ok: boolean;
  /** Answered, but after `slowMs`. Never a failure. */
  readonly slow: boolean;
  /** How long the probe took (or `timeout` when it did not answer), ms. */
  readonly ms: number;
  /** Whether the upstream is healthy after this probe. */
  readonly healthy: boolean;
  /** Why the probe failed: `timeout`, or what `check` threw. */
  readonly error?: unknown;
}

interface Probed {
  healthy: boolean;
  passes: number;
  failures: number;
  timer: Timer | undefined;
  controller: AbortController | undefined;
  lastSlow: boolean;
}

/**
 * Runs probes for `targets` on `clock` and reports each result (with the
 * health state after it) to `report`. Timers go through the clock, so they
 * never keep the process alive and virtual-time tests drive them;
 * {@link close} cancels every one and aborts a probe in flight.
 * Upstreams start healthy: a balancer must be able to route before the first
 * probe returns (and the panic threshold covers a start where none answers).
 */
export class HealthChecker<U> {
  private readonly check: (target: U, signal: AbortSignal) => Promise<void>;
  readonly interval: number;
  readonly timeout: number;
  readonly slowMs: number;
  readonly healthyThreshold: number;
  readonly unhealthyThreshold: number;
  readonly jitter: number;
  private readonly states: Probed[];
  private closed = false;

  constructor(
    healthOptions: HealthCheckOptions<U>,
    private readonly targets: readonly U[],
    private readonly clock: Clock,
    private readonly report: (index: number, result: ProbeResult) => void,
  ) {
    const options = optionsObject('health', healthOptions);
    if (typeof options.check !== 'function') throw new ConfigError('health.check must be a function (target, signal) => Promise<void>');
    this.check = options.check;
    this.interval = duration('health.interval', or(options.interval, 10_000), { timer: true, positive: true });
    this.timeout = duration('health.timeout', or(options.timeout, 2_000), { timer: true, positive: true });
    this.slowMs = duration('health.slowMs', or(options.slowMs, this.timeout / 2));
    if (this.slowMs >= this.timeout) throw new ConfigError(`health.slowMs (${this.slowMs}) must be below health.timeout (${this.timeout}): slow is not dead`);
    this.healthyThreshold = integer('health.healthyThreshold', or(options.healthyThreshold, 2), 1);
    this.unhealthyThreshold = integer('health.unhealthyThreshold', or(options.unhealthyThreshold, 3), 1);
    this.jitter = between('health.jitter', or(options.jitter, 0.2), 0, 1);
    this.states = targets.map(() => ({ healthy: true, passes: 0, failures: 0, timer: undefined, controller: undefined, lastSlow: false }));
  }

  /** Schedules each upstream's first probe at a random point of the first interval. */
  start(): void {
    for (let i = 0; i < this.states.length; i++) this.schedule(i, this.clock.random() * this.interval);
  }

  /** Whether upstream `i` currently passes its checks. */
  healthy(i: number): boolean {
    return this.states[i]!.healthy;
  }

  /** Whether upstream `i`'s last passing probe was slow. */
  slow(i: number): boolean {
    return this.states[i]!.lastSlow;
  }

  /** Cancels every timer and aborts probes in flight; later results are ignored. Idempotent. */
  close(): void {
    this.closed = true;
    for (const s of this.states) {
      s.timer?.cancel();
      s.timer = undefined;
      s.controller?.abort(new Error('health checker closed'));
      s.controller = undefined;
    }
  }

  private nextDelay(): number {
    return this.interval * (1 + this.jitter * (2 * this.clock.random() - 1));
  }

  private schedule(i: number, ms: number): void {
    if (this.closed) return;
    const s = this.states[i]!;
    s.timer = this.clock.setTimer(() => {
      s.timer = undefined;
      this.probe(i);
    }, ms);
  }

  private probe(i: number): void {
    if (this.closed) return;
    const s = this.states[i]!;
    const controller = new AbortController();
    s.controller = controller;
    const started = this.clock.now();
    let done = false;
    const finish = (ok: boolean, error?: unknown): void => {
      if (done) return;
      done = true;
      timer.cancel();
      s.controller = undefined;
      if (this.closed) return;
      const ms = ok ? this.clock.now() - started : this.timeout;
      const slow = ok && ms > this.slowMs;
      if (ok) {
        s.failures = 0;
        s.passes++;
        s.lastSlow = slow;
        if (!s.healthy && s.passes >= this.healthyThreshold) s.healthy = true;
      } else {
        s.passes = 0;
        s.failures++;
        if (s.healthy && s.failures >= this.unhealthyThreshold) s.healthy = false;
      }
      this.report(i, ok ? { ok, slow, ms, healthy: s.healthy } : { ok, slow, ms, healthy: s.healthy, error });
      this.schedule(i, this.nextDelay());
    };
    const timer = this.clock.setTimer(() => {
      controller.abort(new Error(`health check timed out after ${this.timeout} ms`));
      finish(false, 'timeout');
    }, this.timeout);
    // A check that throws, rejects or returns a plain value is answered all the same.
    startTask((signal) => this.check(this.targets[i]!, signal), controller.signal).then(
      () => finish(true),
      (error: unknown) => finish(false, error),
    );
  }
}
