import { type Clock, type Priority, type Timer } from 'damper';
import { type HealthShape } from '../schema/common.js';
import { type Source } from './origin-waits.js';

/** How a server answered a request: from its cache (fresh or stale), or rendered from the database. */
export interface Served {
  readonly source: Source;
}

/** One `Served` per source, made once (a storm would make millions). */
export const SERVED: Readonly<Record<Source, Served>> = { cache: { source: 'cache' }, stale: { source: 'stale' }, origin: { source: 'origin' } };

/** Why a server gave no answer, as the balancer's caller hears it. */
export class ServerError extends Error {}

/** A server as the balancer sees it: a request for `key` is answered, or fails with why; never rejects. */
export interface Endpoint {
  handle(key: string, priority?: Priority): Promise<Served | Error>;
}

// Raised by the thousand in an outage: one instance, no stack per request.
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
export class NaiveBalancer {
  private readonly up: boolean[];
  private readonly passes: number[];
  private readonly fails: number[];
  private readonly timers: (Timer | undefined)[];
  private next = 0;
  private closed = false;

  constructor(
    private readonly clock: Clock,
    private readonly servers: readonly Endpoint[],
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

  /** Routes one request for `key`; resolves with how it was served or why not, never rejects. */
  send(key: string, priority: Priority): Promise<Served | Error> {
    const i = this.pick();
    return i === undefined ? Promise.resolve(NO_SERVER) : this.servers[i]!.handle(key, priority);
  }

  /**
   * The server the next request goes to: the next in service after the
   * last one picked, or none (every server is out: the 503 page). A real
   * run's caller routes its own HTTP requests by it (real/naive-front.ts).
   */
  pick(): number | undefined {
    const n = this.servers.length;
    for (let k = 0; k < n; k++) {
      const i = (this.next + k) % n;
      if (this.up[i]!) {
        this.next = (i + 1) % n;
        return i;
      }
    }
    return undefined;
  }

  /** Stops the health checks: no timer of the balancer is left on the clock. */
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
