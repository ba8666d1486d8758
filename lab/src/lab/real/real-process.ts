import { type ChildProcess } from 'node:child_process';
import { DamperError } from 'damper';
import { type FromChild, isFromChild } from './ipc.js';
import { after } from './wall-clock.js';

/**
 * One process of a real run, one life of it: a Node child the group forked
 * (the runner's own modules, or a keeper in front of a server binary), from
 * its start to its exit. It keeps the tail of the process's output for the
 * error that names it, settles its `ready()` from the child's announcement,
 * and matches the group's requests with the child's replies. A restart is a
 * new life: the group keeps one per process name at a time.
 */

/** How a process ended. */
export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** What a process of a real run did wrong: the run fails with it. */
export type RealProcessProblem =
  /** It exited, and nobody had stopped it: `exit` says how. */
  | 'PROCESS_EXITED'
  /** It exited before it said it was ready, or did not say so in time. */
  | 'PROCESS_NOT_READY'
  /** A request to it failed: no answer in time, its handler threw, or it was gone. */
  | 'PROCESS_REQUEST';

/** How much of a process's output an error carries: the lines that say why it died. */
const OUTPUT_CHARS = 4_000;
const OUTPUT_LINES = 20;
/** How long a process's last output may take to arrive after its exit, ms, before its exit is reported without it. */
const OUTPUT_FLUSH_MS = 500;

function lastLines(output: string): string {
  return output.trimEnd().split('\n').slice(-OUTPUT_LINES).join('\n');
}

/** `exited with code 1`, `was killed by SIGKILL`. */
export function describeExit(exit: Exit): string {
  return exit.signal === null ? `exited with code ${exit.code}` : `was killed by ${exit.signal}`;
}

/**
 * A process of a real run failed, named with what it last wrote: the first
 * line says what happened, the lines after it are the process's own output.
 */
export class RealProcessError extends DamperError {
  declare readonly code: RealProcessProblem;

  constructor(
    problem: RealProcessProblem,
    /** The process's name in its group. */
    readonly processName: string,
    what: string,
    /** The tail of its output (stdout and stderr as they came). */
    readonly output: string,
    /** How it ended, if it did. */
    readonly exit?: Exit,
  ) {
    const tail = lastLines(output);
    super(problem, `${processName} ${what}${tail === '' ? ' (it wrote nothing)' : `; its last output:\n${tail}`}`);
  }
}

/** What a life reports to its group. */
export interface LifeEvents {
  /** A message of ours that the group handles: `hello`, `sample`. */
  note(message: FromChild): void;
  /** It exited; its output is complete. */
  exited(exit: Exit): void;
}

interface Pending {
  readonly type: string;
  resolve(value: unknown): void;
  reject(error: Error): void;
  cancel(): void;
}

export class RealProcess {
  /** Settles once: the child's announcement, or its exit or silence first. Never left unhandled: a caller that never asks loses nothing. */
  readonly ready: Promise<unknown>;
  /** Resolves when it has exited and its output is in. */
  readonly exited: Promise<Exit>;
  /** Whether the child has said it is ready, and what it said. */
  isReady = false;
  readyInfo: unknown;
  private output = '';
  private settleReady: { resolve(info: unknown): void; reject(error: Error): void } | undefined;
  private readonly pending = new Map<number, Pending>();
  private lastId = 0;

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
    readyTimeoutMs: number,
    events: LifeEvents,
  ) {
    this.ready = new Promise((resolve, reject) => {
      this.settleReady = { resolve, reject };
    });
    this.ready.catch(() => {});
    const cancelTimeout = after(readyTimeoutMs, () => this.notReady(`was not ready after ${readyTimeoutMs} ms`));
    this.ready.then(cancelTimeout, cancelTimeout);
    const collect = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString('utf8')).slice(-OUTPUT_CHARS);
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    child.on('message', (message) => {
      if (!isFromChild(message)) return;
      if (message.kind === 'ready') this.announced(message.info);
      else if (message.kind === 'reply') this.replied(message);
      else events.note(message);
    });
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        const exit = { code, signal };
        let reported = false;
        const report = (): void => {
          if (reported) return;
          reported = true;
          this.ended(exit);
          events.exited(exit);
          resolve(exit);
        };
        child.once('close', report);
        after(OUTPUT_FLUSH_MS, report);
      });
    });
    // A child that cannot even start (a module path that does not exist) exits with its reason on stderr; an 'error' here is a failed spawn or a failed signal.
    child.on('error', (error) => {
      this.output += `\n${error.message}`;
    });
  }

  /** The process's pid (a forked child always has one, unless the fork itself failed). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Whether it has not exited yet. */
  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Its output's tail, as an error would give it. */
  lastOutput(): string {
    return lastLines(this.output);
  }

  /** Sends `signal`; false if it is gone. */
  signal(signal: NodeJS.Signals): boolean {
    if (!this.alive || this.pid === undefined) return false;
    try {
      process.kill(this.pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  /** Sends `message` if the channel is open; a process that is gone misses it (the callback takes the error a send to a closing channel gets). */
  send(message: object): void {
    if (this.child.connected) this.child.send(message, () => {});
  }

  /** One request, answered by the child's handler for its type. */
  request(request: { readonly type: string }, timeoutMs: number): Promise<unknown> {
    if (!this.child.connected) return Promise.reject(new RealProcessError('PROCESS_REQUEST', this.name, `could not take a '${request.type}' request: it is gone`, this.output));
    const id = ++this.lastId;
    return new Promise((resolve, reject) => {
      const cancel = after(timeoutMs, () => this.answerFailed(id, `did not answer a '${request.type}' request within ${timeoutMs} ms`));
      this.pending.set(id, { type: request.type, resolve, reject, cancel });
      this.child.send({ kind: 'request', id, request }, (error) => {
        if (error !== null && error !== undefined) this.answerFailed(id, `could not take a '${request.type}' request: ${error.message}`);
      });
    });
  }

  private announced(info: unknown): void {
    if (this.isReady) return;
    this.isReady = true;
    this.readyInfo = info;
    this.settleReady?.resolve(info);
    this.settleReady = undefined;
  }

  private notReady(what: string, exit?: Exit): void {
    this.settleReady?.reject(new RealProcessError('PROCESS_NOT_READY', this.name, what, this.output, exit));
    this.settleReady = undefined;
  }

  private replied(reply: Extract<FromChild, { kind: 'reply' }>): void {
    const pending = this.pending.get(reply.id);
    if (pending === undefined) return; // it came after its timeout
    this.pending.delete(reply.id);
    pending.cancel();
    if (reply.ok) pending.resolve(reply.value);
    else pending.reject(new RealProcessError('PROCESS_REQUEST', this.name, `failed a '${pending.type}' request: ${reply.error}`, ''));
  }

  private answerFailed(id: number, what: string): void {
    const pending = this.pending.get(id);
    if (pending === undefined) return;
    this.pending.delete(id);
    pending.cancel();
    pending.reject(new RealProcessError('PROCESS_REQUEST', this.name, what, this.output));
  }

  private ended(exit: Exit): void {
    this.notReady(`${describeExit(exit)} before it was ready`, exit);
    for (const id of [...this.pending.keys()]) this.answerFailed(id, `${describeExit(exit)} before it answered`);
  }
}
