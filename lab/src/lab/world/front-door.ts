import { Balancer, type BalancerOptions, type Priority, type Timer, type VirtualClock } from 'damper';
import { balancerOptions, type DamperSettings } from '../damper-config.js';
import { type DamperServer, isShedding, type Served, ServerError, type WebServer } from './web-server.js';

/**
 * The balancer side of the web-farm world: what sits between the clients and
 * the web servers, judges their health and routes each request.
 */
export interface FrontDoor {
  /** Routes one request for `key`; resolves with how it was served or why not, never rejects. */
  send(key: string, priority: Priority, timeoutMs: number): Promise<Served | Error>;
  /** Stops the health checks: no timer of the front door is left on the clock. */
  close(): void;
}

/** Health-check settings, read by both variants (each in its own way). */
export interface HealthShape {
  /** Time between two probes of a server, s. */
  readonly intervalS: number;
  /** naive: a probe answered after this is a failure (health by response time); damper: a probe's timeout (no answer at all), ms. */
  readonly timeoutMs: number;
  /** Consecutive failed probes that take a server out. */
  readonly fall: number;
  /** Consecutive passing probes that put it back. */
  readonly rise: number;
}

const NO_SERVER = new ServerError('503 service unavailable: no web server in service');

/**
 * The Missourian's load balancer of March 2010, hand-written because its
 * behaviour is the outage. It alternates requests between the servers in
 * service ("round robin"), and probes each server every `intervalS` with a
 * real page request, judged by response time. Its faults, kept on purpose:
 *
 * 1. **Slow is dead.** A probe answered after `timeoutMs` is a failure, like
 *    no answer at all; `fall` of them take the server out of service.
 * 2. **No floor.** It takes out the last server in service too; with none
 *    left, every request is answered 503: no site at all.
 * 3. **No slow start.** A server put back (after `rise` fast probes) gets its
 *    full share at once, cold cache or not; when it is the only one back, it
 *    gets all the traffic.
 * 4. **Probes wait in line.** A probe is an ordinary request, queued behind
 *    the server's backlog (requests whose clients gave up long ago, still
 *    served), so a server that was overloaded keeps failing its probes after
 *    its traffic is gone.
 */
export class NaiveBalancer implements FrontDoor {
  private readonly up: boolean[];
  private readonly passes: number[];
  private readonly fails: number[];
  private readonly timers: (Timer | undefined)[];
  private next = 0;
  private closed = false;

  constructor(
    private readonly clock: VirtualClock,
    private readonly servers: readonly Pick<WebServer, 'handle'>[],
    private readonly shape: HealthShape,
    /** The page the probe requests (the front page). */
    private readonly probeKey: string,
  ) {
    this.up = servers.map(() => true);
    this.passes = servers.map(() => 0);
    this.fails = servers.map(() => 0);
    // Probes of the servers are spread evenly over the first interval.
    this.timers = servers.map((_, i) => clock.setTimer(() => this.probe(i), (shape.intervalS * 1000 * (i + 1)) / servers.length));
  }

  /** Servers in service now, for tests. */
  get inService(): readonly boolean[] {
    return this.up;
  }

  send(key: string, priority: Priority): Promise<Served | Error> {
    const n = this.servers.length;
    for (let k = 0; k < n; k++) {
      const i = (this.next + k) % n;
      if (this.up[i]!) {
        this.next = (i + 1) % n;
        return this.servers[i]!.handle(key, priority);
      }
    }
    return Promise.resolve(NO_SERVER);
  }

  close(): void {
    this.closed = true;
    for (const t of this.timers) t?.cancel();
  }

  private probe(i: number): void {
    this.timers[i] = undefined;
    if (this.closed) return;
    const started = this.clock.now();
    let judged = false;
    const judge = (fast: boolean): void => {
      if (judged || this.closed) return;
      judged = true;
      timeout.cancel();
      if (fast) {
        this.fails[i] = 0;
        if (!this.up[i]! && ++this.passes[i]! >= this.shape.rise) this.up[i] = true;
      } else {
        this.passes[i] = 0;
        if (this.up[i]! && ++this.fails[i]! >= this.shape.fall) this.up[i] = false;
      }
      this.timers[i] = this.clock.setTimer(() => this.probe(i), this.shape.intervalS * 1000);
    };
    const timeout = this.clock.setTimer(() => judge(false), this.shape.timeoutMs);
    void this.servers[i]!.handle(this.probeKey).then((outcome) => judge(!(outcome instanceof Error) && this.clock.now() - started <= this.shape.timeoutMs));
  }
}

const UPSTREAM_TIMEOUT = new ServerError('504: the web server did not answer in time');

/**
 * damper's `Balancer` in front of the same servers: power of two choices on
 * requests in flight (a slow server gets less, is never judged dead for it),
 * active checks of liveness (a hung process fails them; a slow or shedding
 * one passes), a strict max ejection share and a panic threshold (with two
 * servers one may be out, never both), and slow start for a server that comes
 * back. A request the server sheds (`OverloadedError`) is not held against it:
 * overload is answered by shedding, not by removing capacity. The balancer
 * gives up on a server after the client's timeout, and that counts. A
 * user's configuration's `balancer()` is laid over these options.
 */
export class DamperFrontDoor implements FrontDoor {
  readonly balancer: Balancer<DamperServer>;

  constructor(
    private readonly clock: VirtualClock,
    servers: readonly DamperServer[],
    shape: HealthShape,
    settings: DamperSettings,
  ) {
    const lab: Omit<BalancerOptions<DamperServer>, 'upstreams'> = {
      health: {
        check: (server, signal) => server.alive(signal),
        interval: shape.intervalS * 1000,
        timeout: shape.timeoutMs,
        unhealthyThreshold: shape.fall,
        healthyThreshold: shape.rise,
      },
      isFailure: (error) => !isShedding(error),
    };
    this.balancer = new Balancer<DamperServer>(balancerOptions(settings, lab, { clock, upstreams: servers.map((s) => ({ id: s.id, target: s })) }));
  }

  send(key: string, priority: Priority, timeoutMs: number): Promise<Served | Error> {
    return this.balancer
      .run(
        (server) =>
          new Promise<Served>((resolve, reject) => {
            const timer = this.clock.setTimer(() => reject(UPSTREAM_TIMEOUT), timeoutMs);
            void server.handle(key, priority).then((outcome) => {
              timer.cancel();
              if (outcome instanceof Error) reject(outcome);
              else resolve(outcome);
            });
          }),
        { priority },
      )
      .catch((error: unknown) => (error instanceof Error ? error : new ServerError(String(error))));
  }

  close(): void {
    this.balancer.close();
  }
}
