import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { type Clock, type Timer } from 'damper';
import { CacheNode, type CacheNodeShape } from '../world/cache-nodes.js';
import { Fifo } from '../world/fifo.js';
import { LOOPBACK } from './loopback.js';

const STAR = 0x2a;
const DOLLAR = 0x24;
const PLUS = 0x2b;
const MINUS = 0x2d;
const LF = 0x0a;
const ZERO = 0x30;
const NINE = 0x39;

/**
 * The answer to a command the node's queue had no room for, at its place in
 * the connection's replies: what the simulated node's BUSY is to a caller.
 * One buffer for every refusal: an overload sends them by the thousand.
 */
const REFUSAL = Buffer.from('-BUSY damper lab: cache node overloaded, queue full\r\n', 'latin1');
const FLUSHALL = Buffer.from('*1\r\n$8\r\nFLUSHALL\r\n', 'latin1');
/** The commands after which redis pushes messages no command asked for. */
const SUBSCRIBES = new Set(['subscribe', 'psubscribe', 'ssubscribe']);

/**
 * A node of the scenario's cache tier in a real run: one real redis-server
 * behind this proxy, which serves it at the scenario's pace. A real Redis
 * serves some 100,000 commands a second where the scenario's node serves a
 * few hundred, and a cache tier that never queues cannot show the Discord
 * outage's feedback loop: so, as the database is a bounded pool asleep in
 * `pg_sleep` (database-pool.ts), the node's capacity is emulated in front
 * of it, by the simulation's own {@link CacheNode} on the real clock: its
 * FIFO queue served at `capacityOps × factor` calls/s, its `degrade`, and
 * its refusal beyond `maxQueue` queued calls. A second pacing algorithm
 * here would be a second model to keep in step with the first.
 *
 * Each client connection gets its own connection to redis. Its bytes are
 * cut into whole commands (RESP arrays, or inline lines, split anywhere,
 * pipelined), each queued at the node and written to redis when served. A
 * refused command never reaches redis: its BUSY error takes its place in the
 * connection's replies, which are counted to find that place. The real round
 * trip stands for the node's `latencyMs`; a fault's `slowness` adds the
 * rest (`latencyMs × slowness − latencyMs`) before each reply is passed on.
 *
 * Once a connection subscribes, redis pushes messages no command asked for:
 * its replies are passed on as they come, no longer counted, and its
 * commands are never refused (a subscription costs the simulated cluster
 * nothing). `eject()` takes the node out of the cluster: its connections
 * close, its data is flushed, and nobody gets in until `rejoin()`. Freezing
 * or killing the node is the runner's, on redis-server itself.
 *
 * Loopback only: it listens on 127.0.0.1 and reaches redis there.
 */
export class NodePacer {
  /** Commands written to redis, for tests and figures. */
  served = 0;
  private readonly node: CacheNode;
  private readonly server: Server;
  private readonly links = new Set<PacedLink>();
  private readonly pacing: Pacing;
  /** The port it listens on, once it has. */
  private port: number | undefined;

  constructor(
    clock: Clock,
    private readonly shape: CacheNodeShape,
    private readonly redisPort: number,
  ) {
    assert(Number.isInteger(redisPort) && redisPort > 0 && redisPort < 65536, `redis port must be a TCP port, got ${redisPort}`);
    assert(shape.capacityOps > 0 && shape.latencyMs >= 0 && shape.maxQueue >= 0, 'a node serves some calls, in no negative time, with no negative queue');
    // No latency of its own: the real round trip to redis is the node's. Id 0: a pacer's node is on no ring (the clients' own hashing places keys).
    this.node = new CacheNode(0, clock, { ...shape, latencyMs: 0 });
    this.pacing = { node: this.node, clock, extraMs: () => this.extraMs, forwarded: () => void this.served++ };
    this.server = createServer(this.accept);
  }

  /**
   * Every round trip × this: 1 when healthy (a slow network or fault proxy
   * in front of the node). Below 1 (a scenario's `slowdown` may go to 0.01)
   * it adds nothing: the real round trip cannot be made shorter.
   */
  get slowness(): number {
    return this.node.slowness;
  }

  set slowness(slowness: number) {
    assert(slowness > 0 && Number.isFinite(slowness), `slowness is a positive factor, got ${slowness}`);
    this.node.slowness = slowness;
  }

  /** Whether the node is in the cluster: not ejected, or replaced since. */
  get inCluster(): boolean {
    return this.node.state !== 'ejected';
  }

  /** Commands waiting at the node now: its queue. */
  get queued(): number {
    return this.node.queued;
  }

  /** The node keeps `factor` (0 < factor ≤ 1) of its throughput: its queue grows and its answers slow down. 1 restores it. */
  degrade(factor: number): void {
    this.node.degrade(factor);
  }

  /** Starts accepting on loopback, on `port` (0: any free one); resolves with the port, which an ejection's end listens on again. */
  async listen(port = 0): Promise<number> {
    this.server.listen(port, LOOPBACK);
    await once(this.server, 'listening');
    this.port = (this.server.address() as AddressInfo).port;
    return this.port;
  }

  /**
   * The node leaves the cluster: every connection closes, its queued
   * commands are dropped, unsent, and its data is flushed; until
   * {@link rejoin} nobody listens on its port, so a client's reconnection
   * is refused, as a host that is gone refuses it. (A listener that
   * accepted and closed at once made ioredis, whose ready check counts an
   * accepted connection as a success, reconnect for ever and hold the
   * commands it owed the node for ever: bentocache's L2, which sets no
   * timeout, then waited on them for the rest of the run; docs/lab.md,
   * "Measured: discord-2019".) ioredis at its defaults fails them once 20
   * reconnections are refused, about 10.5 s later. Resolves once redis
   * has flushed and the port is closed.
   */
  async eject(): Promise<void> {
    this.node.eject();
    const stopped = this.server.listening ? once(this.server, 'close') : Promise.resolve();
    this.server.close();
    for (const link of this.links) link.close();
    await Promise.all([flushAll(this.redisPort), stopped]);
  }

  /** A replacement node joins where this one was, on the same port: healthy (its whole rate, no slowness), empty since its ejection. */
  async rejoin(): Promise<void> {
    this.node.rejoin();
    this.node.slowness = 1;
    if (this.port !== undefined && !this.server.listening) await this.listen(this.port);
  }

  /** Closes the listener and every connection; commands still queued are dropped. */
  async close(): Promise<void> {
    this.node.fail();
    for (const link of this.links) link.close();
    if (!this.server.listening) return;
    const closed = once(this.server, 'close');
    this.server.close();
    await closed;
  }

  /** What the node's `latencyMs × slowness` adds to the real round trip now, ms: 0 when healthy. */
  private get extraMs(): number {
    return Math.max(0, Math.round(this.shape.latencyMs * this.node.slowness) - this.shape.latencyMs);
  }

  private readonly accept = (client: Socket): void => {
    const upstream = connect({ host: LOOPBACK, port: this.redisPort, noDelay: true });
    const link = new PacedLink(client, upstream, this.pacing, () => this.links.delete(link));
    this.links.add(link);
  };
}

/** What a connection asks of its pacer. */
interface Pacing {
  readonly node: CacheNode;
  readonly clock: Clock;
  /** What a fault adds to each reply now, ms. */
  extraMs(): number;
  /** One more command written to redis. */
  forwarded(): void;
}

/**
 * Where a connection stands: plain commands, each refused when the node is
 * full; `subscribing` once a SUBSCRIBE is read (its commands are no longer
 * refused, its replies still counted until the SUBSCRIBE's own); then
 * `subscribed`, every byte from redis passed on as it comes.
 */
type LinkState = 'commands' | 'subscribing' | 'subscribed';

/**
 * One command of a connection, from when it is read until it is written to
 * redis or refused. Commands go to redis in the order they were read,
 * whatever order their fates are known in.
 */
class Command {
  fate: 'queued' | 'sent' | 'refused' = 'queued';
  constructor(
    readonly bytes: Buffer,
    /** A subscriber's command is never refused: its reply is not counted, so its refusal would have no place. */
    readonly kind: 'plain' | 'subscriber',
  ) {}
}

/** One client connection and its own connection to redis. */
class PacedLink {
  private state: LinkState = 'commands';
  private readonly commands = new RespFrames('commands');
  private readonly replies = new RespFrames('replies');
  /** The start of a command that has not all arrived yet. */
  private readonly partial: Buffer[] = [];
  /** Commands read and not yet written to redis or refused, oldest first. */
  private readonly unsent = new Fifo<Command>();
  /** Commands written to redis: the replies redis owes, so far. */
  private forwarded = 0;
  /** Whole replies from redis passed on. */
  private passed = 0;
  /** For each refusal not yet passed on, in order: how many of redis's replies come before it. */
  private readonly refusals = new Fifo<number>();
  /** How many of redis's replies come before the first SUBSCRIBE's; from its reply on, nothing is counted. */
  private subscribeAt: number | undefined;
  private readonly out: HeldBack;

  constructor(
    private readonly client: Socket,
    private readonly upstream: Socket,
    private readonly pacing: Pacing,
    private readonly onClose: () => void,
  ) {
    client.setNoDelay(true);
    this.out = new HeldBack(client, pacing.clock);
    client.on('data', this.fromClient);
    upstream.on('data', this.fromRedis);
    // Redis closing its side (QUIT) ends the client's once the replies held back are out; a reset ends both at once.
    upstream.on('end', () => this.out.finish());
    upstream.on('error', this.close);
    client.on('error', this.close);
    client.on('close', this.close);
  }

  readonly close = (): void => {
    this.out.drop();
    this.client.destroy();
    this.upstream.destroy();
    this.onClose();
  };

  private get open(): boolean {
    return !this.client.destroyed && !this.upstream.destroyed;
  }

  private readonly fromClient = (chunk: Buffer): void => {
    let from = 0;
    while (from < chunk.length) {
      const end = this.commands.end(chunk, from);
      if (end < 0) {
        this.partial.push(from === 0 ? chunk : chunk.subarray(from));
        return;
      }
      // A command within one chunk is a view of it, not a copy: the usual case, pipelined commands by the hundred.
      this.read(this.partial.length === 0 ? chunk.subarray(from, end) : this.joined(chunk.subarray(from, end)));
      from = end;
    }
  };

  private joined(tail: Buffer): Buffer {
    this.partial.push(tail);
    const whole = Buffer.concat(this.partial);
    this.partial.length = 0;
    return whole;
  }

  private read(bytes: Buffer): void {
    if (skipped(bytes)) return;
    if (this.state === 'commands' && opensSubscription(bytes)) this.state = 'subscribing';
    const command = new Command(bytes, this.state === 'commands' ? 'plain' : 'subscriber');
    this.unsent.push(command);
    // A subscriber's command refused by a full queue goes in its turn, unpaced.
    this.pacing.node.call(() => this.settle(command, 'sent')).catch(() => this.settle(command, command.kind === 'plain' ? 'refused' : 'sent'));
  }

  /**
   * The node served `command` (`sent`) or refused it: it and every command
   * after it whose fate is known leave in order. A refusal here is the
   * queue's: the node is down only once ejected or closed, and then this
   * connection is closed too.
   */
  private settle(command: Command, fate: 'sent' | 'refused'): void {
    if (!this.open) return;
    command.fate = fate;
    for (let next = this.unsent.oldest; next !== undefined && next.fate !== 'queued'; next = this.unsent.oldest) {
      this.unsent.shift();
      if (next.fate === 'refused') this.refuse();
      else this.forward(next);
    }
  }

  private forward(command: Command): void {
    if (command.kind === 'subscriber' && this.subscribeAt === undefined) this.subscribeAt = this.forwarded;
    this.forwarded++;
    this.pacing.forwarded();
    this.upstream.write(command.bytes);
  }

  /** A refused command's answer comes after the replies to every command forwarded before it. */
  private refuse(): void {
    this.refusals.push(this.forwarded);
    this.refuseDue();
  }

  private refuseDue(): void {
    while (this.refusals.oldest === this.passed) {
      this.refusals.shift();
      // At once, as the simulated node refuses: a fault's latency is the round trip's, and a refused call makes none.
      this.out.send(REFUSAL, 0);
    }
  }

  private readonly fromRedis = (chunk: Buffer): void => {
    const extraMs = this.pacing.extraMs();
    let from = 0;
    let at = 0;
    while (this.state !== 'subscribed' && at < chunk.length) {
      if (this.passed === this.subscribeAt) {
        this.state = 'subscribed';
        break;
      }
      const end = this.replies.end(chunk, at);
      if (end < 0) break;
      at = end;
      this.passed++;
      // Refusals are rare beside replies: the chunk is cut only where one goes in.
      if (this.refusals.oldest === this.passed) {
        this.out.send(chunk.subarray(from, at), extraMs);
        from = at;
        this.refuseDue();
      }
    }
    if (from < chunk.length) this.out.send(from === 0 ? chunk : chunk.subarray(from), extraMs);
  };
}

/**
 * A socket's outgoing bytes, each held back as long as asked and all in the
 * order sent: a slowness lifted mid-stream must not let a reply overtake
 * the ones still held. Nothing is held (nor allocated) when healthy.
 */
class HeldBack {
  private readonly held = new Fifo<{ at: number; bytes: Buffer }>();
  private timer: Timer | undefined;
  private lastAt = 0;
  private state: 'open' | 'finishing' = 'open';

  constructor(
    private readonly socket: Socket,
    private readonly clock: Clock,
  ) {}

  send(bytes: Buffer, delayMs: number): void {
    if (this.held.oldest === undefined && delayMs <= 0) {
      this.socket.write(bytes);
      return;
    }
    const now = this.clock.now();
    this.lastAt = Math.max(now + delayMs, this.lastAt);
    const first = this.held.oldest === undefined;
    this.held.push({ at: this.lastAt, bytes });
    if (first) this.timer = this.clock.setTimer(this.release, this.lastAt - now);
  }

  /** Ends the socket once everything held is out. */
  finish(): void {
    this.state = 'finishing';
    if (this.held.oldest === undefined) this.socket.end();
  }

  /** Forgets what is held: the socket is going. */
  drop(): void {
    this.timer?.cancel();
    this.held.drain();
  }

  private readonly release = (): void => {
    this.timer = undefined;
    const now = this.clock.now();
    for (let next = this.held.oldest; next !== undefined; next = this.held.oldest) {
      if (next.at > now) {
        this.timer = this.clock.setTimer(this.release, next.at - now);
        return;
      }
      this.held.shift();
      this.socket.write(next.bytes);
    }
    if (this.state === 'finishing') this.socket.end();
  };
}

/** Where a scan stands in a frame: before an element, in a line, in a length header (`*N` or `$N`), in a bulk string's body. */
type Step = 'type' | 'line' | 'length' | 'body';

/**
 * Finds where each RESP2 frame ends in a stream cut anywhere: a command
 * (an array of bulk strings, or an inline line, as Redis reads them) or a
 * reply (`+ - :` lines, `$` bulk strings, `*` arrays, nested, and their
 * `-1` nulls). Only the boundaries: nothing is decoded or copied, so a
 * 100 KB value costs a skip, not a parse.
 */
export class RespFrames {
  private step: Step = 'type';
  /** The header whose length is being read: `*` or `$`. */
  private header = STAR;
  private length = 0;
  private negative = false;
  /** Bytes of the bulk string still to come, its CRLF included. */
  private bodyLeft = 0;
  /** For each array being read, outermost first: elements still to come. */
  private readonly open: number[] = [];

  constructor(
    /** Commands: a top-level frame that is not an array is an inline line, `$` or not. */
    private readonly side: 'commands' | 'replies',
  ) {}

  /** The offset just past the frame that ends first in `chunk` from `from`, or -1 when the chunk ends inside it (the scan resumes with the next chunk). */
  end(chunk: Buffer, from: number): number {
    let i = from;
    while (i < chunk.length) {
      switch (this.step) {
        case 'type': {
          const byte = chunk[i]!;
          if (byte === STAR || (byte === DOLLAR && (this.side === 'replies' || this.open.length > 0))) {
            this.header = byte;
            this.length = 0;
            this.negative = false;
            this.step = 'length';
            i++;
          } else this.step = 'line';
          break;
        }
        case 'line': {
          const lf = chunk.indexOf(LF, i);
          if (lf < 0) return -1;
          i = lf + 1;
          if (this.elementEnded()) return i;
          break;
        }
        case 'length': {
          const byte = chunk[i++]!;
          if (byte >= ZERO && byte <= NINE) this.length = this.length * 10 + (byte - ZERO);
          else if (byte === MINUS) this.negative = true;
          else if (byte === LF && this.headerEnded()) return i;
          break;
        }
        case 'body': {
          const taken = Math.min(this.bodyLeft, chunk.length - i);
          i += taken;
          this.bodyLeft -= taken;
          if (this.bodyLeft === 0 && this.elementEnded()) return i;
          break;
        }
      }
    }
    return -1;
  }

  /** A length header is read: true when it was a whole element that ends the frame (a null, an empty array). */
  private headerEnded(): boolean {
    if (this.header === DOLLAR) {
      if (this.negative) return this.elementEnded();
      this.bodyLeft = this.length + 2;
      this.step = 'body';
      return false;
    }
    if (this.negative || this.length === 0) return this.elementEnded();
    this.open.push(this.length);
    this.step = 'type';
    return false;
  }

  /** One element is read: true when it completes the frame (every array it closes included). */
  private elementEnded(): boolean {
    this.step = 'type';
    const open = this.open;
    while (open.length > 0) {
      const left = --open[open.length - 1]!;
      if (left > 0) return false;
      open.pop();
    }
    return true;
  }
}

/** Whether Redis reads `command` and answers nothing: an empty array (`*0`, `*-1`) or a blank inline line. */
function skipped(command: Buffer): boolean {
  if (command[0] === STAR) return command[1] === ZERO || command[1] === MINUS;
  return command.toString('latin1').trim() === '';
}

/** Whether `command` is SUBSCRIBE, PSUBSCRIBE or SSUBSCRIBE (any case). Reads the name only when its length fits: GET and SET allocate nothing. */
function opensSubscription(command: Buffer): boolean {
  if (command[0] !== STAR) return SUBSCRIBES.has(command.toString('latin1').trim().split(/\s/, 1)[0]!.toLowerCase());
  let i = command.indexOf(LF) + 1;
  if (command[i++] !== DOLLAR) return false;
  let length = 0;
  for (let byte = command[i]; byte !== undefined && byte >= ZERO && byte <= NINE; byte = command[++i]) length = length * 10 + (byte - ZERO);
  const start = command.indexOf(LF, i) + 1;
  return length >= 9 && length <= 11 && SUBSCRIBES.has(command.toString('latin1', start, start + length).toLowerCase());
}

/** FLUSHALL over a connection of the pacer's own, unpaced: an ejected node's data is gone at once, whatever its queue. */
async function flushAll(port: number): Promise<void> {
  const socket = connect({ host: LOOPBACK, port });
  try {
    socket.write(FLUSHALL);
    const [reply] = (await once(socket, 'data')) as [Buffer];
    if (reply[0] !== PLUS) throw new Error(`FLUSHALL on the redis at port ${port}: ${reply.toString('latin1').trim()}`);
  } finally {
    socket.destroy();
  }
}
