import { type HostGauge, meterSeconds, nodeGauge } from './host-meter.js';
import { type FromChild, isToChild, type Protocol, type ReplyOf, type RequestOf, type RequestType } from './ipc.js';

/**
 * A process of a real run, from inside: what every Node child of a
 * `ProcessGroup` (the runner's load generator, tiers and servers, and the
 * keepers) calls first. It ties the child's life to the group's (a child
 * exits when its IPC channel to the group closes, so even a SIGKILLed lab
 * leaves nothing behind), meters the child's take of the host once the
 * group says when the run's time zero is, and answers the group's requests.
 */

/** How a child answers each request type of its protocol. */
export type Handlers<P extends Protocol> = { readonly [T in RequestType<P>]: (request: RequestOf<P, T>) => ReplyOf<P, T> | Promise<ReplyOf<P, T>> };

/** What a child tells its group. */
export interface GroupLink<P extends Protocol> {
  /** Announces the child ready (a server: listening): the group's `ready()` resolves with `info`. */
  ready(info: P['ready']): void;
}

export interface JoinOptions {
  /** What the child meters: by default itself (its CPU and event loop); a keeper meters its server binary. */
  readonly gauge?: () => HostGauge;
  /** What the child does when the group is gone: by default, exit at once. */
  readonly whenParentGone?: () => void;
}

/** The channel a forked child has; a process started otherwise has none, and is no child of a group. */
function channel(): NonNullable<typeof process.send> {
  if (process.send === undefined) throw new Error('this module runs as a child of a ProcessGroup: it has no IPC channel (start it with ProcessGroup.fork)');
  return process.send.bind(process);
}

/**
 * Calls `leave` (by default: exit) when the channel to the group closes:
 * the group closed it, or its process died, however (a SIGKILL runs no
 * handler there, but the kernel closes the channel all the same).
 */
export function onParentGone(leave: () => void = () => process.exit(0)): void {
  channel();
  process.once('disconnect', leave);
  if (!process.connected) leave();
}

/** Joins the group that forked this process: see the file's comment. Call it first, before the child's own start-up, so its start-up is metered too. */
export function joinGroup<P extends Protocol>(handlers: Handlers<P>, options: JoinOptions = {}): GroupLink<P> {
  const sendRaw = channel();
  onParentGone(options.whenParentGone);
  // With a callback, a send after the group is gone fails quietly instead of throwing: the child is leaving anyway.
  const send = (message: FromChild): void => {
    if (process.connected) sendRaw(message, undefined, {}, () => {});
  };
  const answer = async (id: number, request: { readonly type: string }): Promise<void> => {
    try {
      if (!Object.hasOwn(handlers, request.type)) throw new Error(`no handler for a '${request.type}' request`);
      const handler = (handlers as Readonly<Record<string, (request: object) => unknown>>)[request.type]!;
      send({ kind: 'reply', id, ok: true, value: await handler(request) });
    } catch (error) {
      send({ kind: 'reply', id, ok: false, error: error instanceof Error ? error.message : String(error) });
    }
  };
  let stopMeter: (() => void) | undefined;
  process.on('message', (message) => {
    if (!isToChild(message)) return;
    if (message.kind === 'zero') {
      // A run has one time zero: the group sends it once, and a meter started twice would split a second in two.
      if (stopMeter !== undefined) return;
      stopMeter = meterSeconds(message.atMs, (options.gauge ?? nodeGauge)(), (sample) => send({ kind: 'sample', sample }));
    } else void answer(message.id, message.request);
  });
  send({ kind: 'hello' });
  return { ready: (info) => send({ kind: 'ready', info }) };
}
