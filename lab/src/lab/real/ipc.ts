/**
 * What a real run's processes say to each other over their IPC channels:
 * the group (the runner's process) and each child of ours, a Node process
 * the runner wrote or a keeper in front of a server binary. One place for
 * the messages' shapes, so the two ends cannot drift apart.
 */

/** One process's take of the host in one second of the run: a point of a `HostSeries`. */
export interface HostSample {
  /** The second's index counted from the run's time zero: it covers [second s, second + 1 s). */
  readonly second: number;
  /** CPU used (user + system), in cores: 1 is one whole core. */
  readonly cpu: number;
  /** The event loop's delay, p99 and max, ms; null for a process without a Node event loop. */
  readonly lagP99Ms: number | null;
  readonly lagMaxMs: number | null;
}

/**
 * A child's side of the conversation, for the types at both ends: what it
 * announces when it is ready (a server: its port), and, by request type,
 * each request's fields and the reply. A load generator's could read
 * `{ ready: { port: number }; requests: { stats: { request: {}; reply: Stats } } }`.
 */
export interface Protocol {
  readonly ready: unknown;
  readonly requests: { readonly [type: string]: { readonly request: object; readonly reply: unknown } };
}

/** A request's type name in `P`. */
export type RequestType<P extends Protocol> = keyof P['requests'] & string;

/** A request as sent: its type and its fields. */
export type RequestOf<P extends Protocol, T extends RequestType<P> = RequestType<P>> = { readonly type: T } & P['requests'][T]['request'];

/** The reply to a request of type `T`. */
export type ReplyOf<P extends Protocol, T extends RequestType<P>> = P['requests'][T]['reply'];

/** What a keeper announces of the server binary it started: the group signals that pid (its process group) for faults. */
export interface ServerReady {
  readonly pid: number;
}

/**
 * When a server binary is ready: at once (`spawned`), when it accepts TCP
 * connections on a loopback port, or when its output matches a pattern
 * (redis-server and PostgreSQL both print "ready to accept connections";
 * PostgreSQL listens before it can answer, so the port alone is too early
 * for it).
 */
export type ReadyWhen = { readonly kind: 'spawned' } | { readonly kind: 'port'; readonly port: number } | { readonly kind: 'output'; readonly pattern: string };

/** What the group asks of a keeper: its one argument, as JSON. */
export interface KeeperSpec {
  readonly command: string;
  readonly args: readonly string[];
  readonly readyWhen: ReadyWhen;
  /** The signal that asks the binary to shut down (PostgreSQL's fast shutdown is SIGINT). */
  readonly stopSignal: NodeJS.Signals;
  /** How long the binary has to go after `stopSignal` before SIGKILL, ms. */
  readonly graceMs: number;
}

/** The group to a child. */
export type ToChild =
  /** The run's time zero, a wall-clock instant (ms since the epoch): every process counts seconds from it. */
  | { readonly kind: 'zero'; readonly atMs: number }
  | { readonly kind: 'request'; readonly id: number; readonly request: { readonly type: string } };

/** A child to the group. */
export type FromChild =
  /** Sent as soon as the child listens: the group answers with time zero if it has one (a message sent earlier would be lost). */
  | { readonly kind: 'hello' }
  | { readonly kind: 'ready'; readonly info: unknown }
  | { readonly kind: 'sample'; readonly sample: HostSample }
  | { readonly kind: 'reply'; readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly kind: 'reply'; readonly id: number; readonly ok: false; readonly error: string };

const FROM_CHILD: ReadonlySet<string> = new Set(['hello', 'ready', 'sample', 'reply']);
const TO_CHILD: ReadonlySet<string> = new Set(['zero', 'request']);

function kindIn(message: unknown, kinds: ReadonlySet<string>): boolean {
  const kind = (message as { kind?: unknown } | null)?.kind;
  return typeof kind === 'string' && kinds.has(kind);
}

/** Whether a message on a child's channel is ours; anything else (a child module's own `process.send`) is left to whoever listens for it. */
export function isFromChild(message: unknown): message is FromChild {
  return kindIn(message, FROM_CHILD);
}

/** Whether a message from the group is ours. */
export function isToChild(message: unknown): message is ToChild {
  return kindIn(message, TO_CHILD);
}
