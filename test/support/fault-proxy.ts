/**
 * A fault-injecting TCP proxy for tests: a dependency that is slow, not dead.
 *
 * Discord's 2019 outage began with Redis nodes whose throughput dropped, not
 * nodes that died (principle 5). Stopping or killing a process tests the
 * dead case; this proxy makes the slow ones: added latency, a bandwidth cap,
 * or a stall (every byte held), per direction, changed at any time and
 * applied at once to the connections already open, so a client's pool stays
 * connected while its server degrades under it. Toxiproxy would do, but it is
 * not packaged in Debian; this is the part of it the chaos test needs.
 *
 * One concept: each direction of each connection is a {@link Pipe}, a FIFO of
 * received chunks stamped with their arrival time, drained by one timer at a
 * time, at the pace the direction's {@link Link} allows. Order is kept
 * because only the head of the queue is ever sent.
 */
import { once } from 'node:events';
import { isIP, type Server, type Socket, createConnection, createServer } from 'node:net';

/** `requests`: client → upstream; `replies`: upstream → client. */
export type Direction = 'requests' | 'replies';

/** The faults of one direction. Every field absent means a healthy link. */
export interface Faults {
  /** Added to each chunk's delivery time, ms, on top of what the link already takes. */
  readonly latencyMs?: number;
  /** Cap on the bytes per second this direction carries, summed over the proxy's connections (one slow node, not one slow client). */
  readonly bytesPerSecond?: number;
  /** Holds every byte until the stall is lifted: a hung link whose connections stay open. */
  readonly stalled?: boolean;
}

/** What has passed the proxy since it started. */
export interface ProxyStats {
  /** Connections open now. */
  readonly connections: number;
  /** Bytes delivered, per direction. */
  readonly bytes: Readonly<Record<Direction, number>>;
  /** Bytes received and not yet delivered, over all connections: bounded by back-pressure. */
  readonly queued: number;
}

/** Queued bytes past which a pipe pauses its source (and resumes below half of it). */
const HIGH_WATER = 1 << 20;
/** Burst of the bandwidth bucket, in seconds of its rate: small, so a cap shapes the flow rather than admitting it in gulps. */
const BURST_SECONDS = 0.02;

/** Hosts the proxy may forward to: it is a test tool, and must not become a way out of the machine. */
function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  if (isIP(host) === 6) return host === '::1';
  return false;
}

/**
 * One direction's faults and its bandwidth bucket, shared by every
 * connection's pipe in that direction.
 */
class Link {
  faults: Faults = {};
  delivered = 0;
  private tokens = 0;
  private refilled = 0;

  set(faults: Faults): void {
    const { latencyMs = 0, bytesPerSecond = 1, stalled = false } = faults;
    if (!(latencyMs >= 0 && Number.isFinite(latencyMs))) throw new RangeError(`latencyMs must be a finite number ≥ 0, got ${latencyMs}`);
    if (!(bytesPerSecond > 0 && Number.isFinite(bytesPerSecond))) throw new RangeError(`bytesPerSecond must be a finite number > 0, got ${bytesPerSecond}`);
    if (typeof stalled !== 'boolean') throw new RangeError(`stalled must be a boolean, got ${typeof stalled}`);
    this.faults = { ...faults };
    // A new cap starts empty: no burst of credit earned under the old one.
    this.tokens = 0;
    this.refilled = performance.now();
  }

  /**
   * How many bytes of a chunk that arrived at `at` may go now (> 0), or how
   * many ms to wait before asking again (> 0; Infinity while stalled).
   */
  admit(at: number, size: number, now: number): { bytes: number } | { waitMs: number } {
    const { latencyMs = 0, bytesPerSecond, stalled = false } = this.faults;
    if (stalled) return { waitMs: Number.POSITIVE_INFINITY };
    if (now < at + latencyMs) return { waitMs: at + latencyMs - now };
    if (bytesPerSecond === undefined) return { bytes: size };
    const burst = Math.max(1, bytesPerSecond * BURST_SECONDS);
    this.tokens = Math.min(burst, this.tokens + ((now - this.refilled) / 1_000) * bytesPerSecond);
    this.refilled = now;
    const whole = Math.floor(this.tokens);
    if (whole >= 1) {
      const bytes = Math.min(whole, size);
      this.tokens -= bytes;
      return { bytes };
    }
    // Wait for a piece worth sending (the whole chunk, or a full burst), not for every byte.
    return { waitMs: ((Math.min(size, Math.floor(burst)) - this.tokens) / bytesPerSecond) * 1_000 };
  }
}

/** One direction of one connection: a queue of stamped chunks, sent in order at the link's pace. */
class Pipe {
  private readonly queue: { at: number; bytes: Buffer }[] = [];
  /** Bytes in `queue`. */
  queued = 0;
  private timer: NodeJS.Timeout | undefined;
  private draining = false;
  private ended = false;

  constructor(
    private readonly from: Socket,
    private readonly to: Socket,
    private readonly link: Link,
    private readonly seen: (bytes: Buffer) => void,
  ) {
    from.on('data', (bytes: Buffer) => {
      // Before it is queued: a watcher that stalls the link here holds this chunk too.
      this.seen(bytes);
      this.queue.push({ at: performance.now(), bytes });
      this.queued += bytes.length;
      if (this.queued > HIGH_WATER) from.pause();
      this.pump();
    });
    from.on('end', () => {
      this.ended = true;
      this.pump();
    });
    to.on('drain', () => {
      this.draining = false;
      this.pump();
    });
  }

  /** The link's faults changed: look at the head again now. */
  kick(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.pump();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private pump(): void {
    if (this.timer !== undefined || this.draining || this.to.destroyed) return;
    for (;;) {
      const head = this.queue[0];
      if (head === undefined) {
        if (this.ended && this.to.writable) this.to.end();
        return;
      }
      const now = performance.now();
      const admitted = this.link.admit(head.at, head.bytes.length, now);
      if ('waitMs' in admitted) {
        if (admitted.waitMs === Number.POSITIVE_INFINITY) return; // stalled: kick() resumes
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.pump();
        }, Math.max(1, Math.ceil(admitted.waitMs)));
        return;
      }
      const piece = admitted.bytes === head.bytes.length ? head.bytes : head.bytes.subarray(0, admitted.bytes);
      if (piece === head.bytes) this.queue.shift();
      else head.bytes = head.bytes.subarray(admitted.bytes);
      this.queued -= piece.length;
      this.link.delivered += piece.length;
      if (this.queued < HIGH_WATER / 2 && this.from.isPaused()) this.from.resume();
      if (!this.to.write(piece)) {
        this.draining = true;
        return;
      }
    }
  }
}

/**
 * A TCP proxy on 127.0.0.1 in front of one loopback server, with faults per
 * direction. Start it with {@link FaultProxy.start}, point the client at
 * {@link FaultProxy.port}, degrade with {@link FaultProxy.set}.
 */
export class FaultProxy {
  readonly host = '127.0.0.1';
  private readonly links: Record<Direction, Link> = { requests: new Link(), replies: new Link() };
  private readonly open = new Set<{ client: Socket; upstream: Socket; pipes: Pipe[] }>();
  private closed: Promise<void> | undefined;
  private watcher: ((direction: Direction, bytes: Buffer) => void) | undefined;

  private constructor(
    private readonly server: Server,
    /** The port clients connect to. */
    readonly port: number,
  ) {}

  /**
   * Listens on a free loopback port and forwards every connection to
   * `target`, which must be on loopback.
   * @throws RangeError for a target that is not loopback.
   */
  static async start(target: { host?: string; port: number }): Promise<FaultProxy> {
    const host = target.host ?? '127.0.0.1';
    if (!isLoopback(host)) throw new RangeError(`the fault proxy forwards to loopback only, not to ${host}`);
    const server = createServer({ allowHalfOpen: true, pauseOnConnect: true });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('could not read the proxy port');
    const proxy = new FaultProxy(server, address.port);
    server.on('connection', (client) => proxy.accept(client, host, target.port));
    return proxy;
  }

  /** Replaces the faults of one direction (or both); open connections follow at once. */
  set(direction: Direction | 'both', faults: Faults): void {
    for (const d of direction === 'both' ? (['requests', 'replies'] as const) : [direction]) this.links[d].set(faults);
    for (const c of this.open) for (const p of c.pipes) p.kick();
  }

  /**
   * Calls `watcher` with every chunk as it arrives, before the faults apply
   * to it: a test that stalls the proxy from the watcher (after a given
   * reply, say) holds that chunk and everything after it. One watcher; none
   * with `undefined`.
   */
  watch(watcher: ((direction: Direction, bytes: Buffer) => void) | undefined): void {
    this.watcher = watcher;
  }

  /** A healthy link both ways; bytes held by a stall or a cap go on at once. */
  reset(): void {
    this.set('both', {});
  }

  stats(): ProxyStats {
    let queued = 0;
    for (const c of this.open) for (const p of c.pipes) queued += p.queued;
    return { connections: this.open.size, bytes: { requests: this.links.requests.delivered, replies: this.links.replies.delivered }, queued };
  }

  /** Destroys every connection and stops listening. Idempotent. */
  close(): Promise<void> {
    if (this.closed === undefined) {
      this.closed = once(this.server, 'close').then(() => undefined);
      this.server.close();
      for (const c of this.open) this.drop(c);
    }
    return this.closed;
  }

  private accept(client: Socket, host: string, port: number): void {
    const upstream = createConnection({ host, port, allowHalfOpen: true });
    const c = {
      client,
      upstream,
      pipes: [new Pipe(client, upstream, this.links.requests, (bytes) => this.watcher?.('requests', bytes)), new Pipe(upstream, client, this.links.replies, (bytes) => this.watcher?.('replies', bytes))],
    };
    this.open.add(c);
    // A reset or refused connection on either side is passed on as one: the client sees its server go away.
    client.on('error', () => this.drop(c));
    upstream.on('error', () => this.drop(c));
    client.on('close', () => this.drop(c));
    upstream.on('close', () => this.drop(c));
    client.resume();
  }

  private drop(c: { client: Socket; upstream: Socket; pipes: Pipe[] }): void {
    if (!this.open.delete(c)) return;
    for (const p of c.pipes) p.stop();
    c.client.destroy();
    c.upstream.destroy();
  }
}
