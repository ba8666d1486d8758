// The servers' link to the cache tier's process (cache-tier-process.ts), both ends.
//
// In the simulation a tier's one cache (`cache.scope: tier` without nodes)
// is one object every server reads through, at no cost: one map for naive,
// one `Cache` for damper, so a key's load is shared by every server and a
// flush empties it for all. Server processes share no memory, so a real
// run holds that cache in a process of its own and each server reads
// through it over loopback TCP: one connection per server, requests
// pipelined, each answered when its read ends (in any order, by its id).
// One line of JSON each way: `[id, key, priority]`, `[id, outcome, source]`.
// The hop costs a loopback round trip (tenths of a millisecond), against
// service times the fitting keeps at 5 ms and more.
import { once } from 'node:events';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { type Priority } from 'damper';
import { type Source } from '../world/origin-waits.js';
import { type BelowOutcome, type DataRead } from '../world/service-server.js';
import { LOOPBACK } from './loopback.js';
import { RealRunError } from './real-error.js';

const PRIORITIES: ReadonlySet<unknown> = new Set<Priority>(['critical', 'normal', 'low', 'background']);
const OUTCOMES: ReadonlySet<string> = new Set<BelowOutcome>(['ok', 'invalid', 'error', 'shed']);
const SOURCES: ReadonlySet<string> = new Set<Source>(['cache', 'stale', 'origin']);

/** A line the other end sent that is not the protocol's, or the link lost: the run must fail rather than read on. */
function linkError(what: string): RealRunError {
  return new RealRunError(`the link to the cache tier's process: ${what}`);
}

/** A priority as the library takes it: a name, or a rank. */
function isPriority(value: unknown): value is Priority {
  return PRIORITIES.has(value) || (typeof value === 'number' && Number.isFinite(value));
}

/** Calls `line` for each whole line `socket` receives, as text without its newline. */
function eachLine(socket: Socket, line: (text: string) => void): void {
  let rest = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop()!;
    for (const text of lines) line(text);
  });
}

/** A line's JSON array of `length`, or the link error that says what came instead. */
function parseTuple(text: string, length: number): unknown[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw linkError(`not JSON: ${text.slice(0, 80)}`);
  }
  if (!Array.isArray(value) || value.length !== length) throw linkError(`not an array of ${length}: ${text.slice(0, 80)}`);
  return value;
}

/**
 * The cache tier's end: a TCP server on loopback `port` that answers each
 * server's reads with `read`. A connection that sends what is not a read is
 * closed, and `broken` hears why (the process fails the run with it).
 */
export async function serveReads(read: DataRead, port: number, broken: (error: Error) => void): Promise<Server> {
  const server = createServer((socket) => {
    socket.setNoDelay(true);
    // A server that has gone (a hang's restart replaces its process) resets its connection: nothing is owed to it.
    socket.on('error', () => {});
    eachLine(socket, (text) => {
      let id: unknown, key: unknown, priority: unknown;
      try {
        [id, key, priority] = parseTuple(text, 3);
        if (!Number.isSafeInteger(id) || typeof key !== 'string' || !isPriority(priority)) throw linkError(`not a read: ${text.slice(0, 80)}`);
      } catch (error) {
        socket.destroy();
        return broken(error as Error);
      }
      read(key, priority, (outcome, source) => {
        if (!socket.destroyed) socket.write(`${JSON.stringify([id, outcome, source])}\n`);
      });
    });
  });
  server.listen(port, LOOPBACK);
  await once(server, 'listening');
  return server;
}

/**
 * A server's end: one connection to the cache tier on loopback `port`, and
 * the `DataRead` over it. The link lost, or a line that is not an answer,
 * throws from the socket's handler: the server process fails, and the run
 * with it, rather than serve on without its cache.
 */
export class CacheTierClient {
  private readonly waiting = new Map<number, (outcome: BelowOutcome, source: Source) => void>();
  private lastId = 0;
  private closing = false;

  private constructor(private readonly socket: Socket) {
    socket.setNoDelay(true);
    eachLine(socket, (text) => this.answered(text));
    socket.on('close', () => {
      if (!this.closing) throw linkError(`the cache tier closed the link with ${this.waiting.size} reads unanswered`);
    });
  }

  static async connect(port: number): Promise<CacheTierClient> {
    const socket = createConnection({ port, host: LOOPBACK });
    await once(socket, 'connect');
    return new CacheTierClient(socket);
  }

  /** The server's data read, through the tier's one cache. */
  readonly read: DataRead = (key, priority, then) => {
    const id = ++this.lastId;
    this.waiting.set(id, then);
    this.socket.write(`${JSON.stringify([id, key, priority])}\n`);
  };

  close(): void {
    this.closing = true;
    this.socket.end();
  }

  private answered(text: string): void {
    const [id, outcome, source] = parseTuple(text, 3);
    const then = typeof id === 'number' ? this.waiting.get(id) : undefined;
    if (then === undefined || typeof outcome !== 'string' || !OUTCOMES.has(outcome) || typeof source !== 'string' || !SOURCES.has(source)) throw linkError(`not an answer to a read: ${text.slice(0, 80)}`);
    this.waiting.delete(id as number);
    then(outcome as BelowOutcome, source as Source);
  }
}
