/**
 * The process-wide half of "a real run leaves nothing behind" (issue 30):
 * while any `ProcessGroup` is open, Ctrl-C (SIGINT) and SIGTERM close every
 * open group, then end the process as the signal would have (130, 143), and
 * an exit by any other road (`process.exit`, an uncaught exception) first
 * tells every child of every open group to go. The handlers are installed
 * with the first open group and removed with the last, so a process that
 * holds no group keeps Node's own behaviour.
 */

/** What the guard needs of a group. */
export interface Guarded {
  /** Stops every process of the group, gracefully, then by force. */
  close(): Promise<void>;
  /** Tells every process of the group to go, without waiting: all an 'exit' hook may do. */
  abandon(): void;
}

const open = new Set<Guarded>();
let closing = false;

/** The exit status a shell gives a process ended by the signal. */
const STATUS: Readonly<Record<'SIGINT' | 'SIGTERM', number>> = { SIGINT: 130, SIGTERM: 143 };

function onSignal(signal: 'SIGINT' | 'SIGTERM'): void {
  if (closing) {
    // A second Ctrl-C: the user will not wait for the grace period.
    for (const group of open) group.abandon();
    process.exit(STATUS[signal]);
  }
  closing = true;
  void Promise.allSettled([...open].map((group) => group.close())).then(() => process.exit(STATUS[signal]));
}

const onInterrupt = (): void => onSignal('SIGINT');
const onTerminate = (): void => onSignal('SIGTERM');
const onExit = (): void => {
  for (const group of open) group.abandon();
};

/** Puts `group` under the guard; the returned function takes it out (idempotent). */
export function guard(group: Guarded): () => void {
  if (open.size === 0) {
    process.on('SIGINT', onInterrupt);
    process.on('SIGTERM', onTerminate);
    process.on('exit', onExit);
  }
  open.add(group);
  return () => {
    if (!open.delete(group) || open.size > 0) return;
    process.off('SIGINT', onInterrupt);
    process.off('SIGTERM', onTerminate);
    process.off('exit', onExit);
    closing = false;
  };
}

/** How many groups are open: for tests that check the handlers come and go with them. */
export function openGroups(): number {
  return open.size;
}
