import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { HostRecord, meterSeconds, nodeGauge } from './host-meter.js';
import { type FromChild, type KeeperSpec, type Protocol, type ReadyWhen, type ReplyOf, type RequestOf, type RequestType, type ServerReady } from './ipc.js';
import { type HostSeries } from './real-run.js';
import { describeExit, type Exit, RealProcess, RealProcessError } from './real-process.js';
import { guard, type Guarded } from './shutdown-guard.js';
import { after, wallNowMs } from './wall-clock.js';

/**
 * Every process of a real run (issue 30), owned by one object so that none
 * outlives the run: the runner's own Node processes (load generator, tiers,
 * servers), forked with an IPC channel, and the server binaries
 * (redis-server, PostgreSQL), each spawned by a keeper of ours that stops it
 * when the group is gone. The group injects the process faults (freeze,
 * kill, restart), gathers every process's take of the host second by
 * second, fails the run when a process dies that nobody stopped, and stops
 * them all on `close()`, on Ctrl-C, and on the lab's exit, however it comes.
 */

/** How long `close()` gives the processes after SIGTERM before SIGKILL, ms: a server closes its sockets, PostgreSQL checkpoints nothing (fast shutdown). */
export const GRACE_MS = 3_000;
/** How long a process has to say it is ready, ms: a cold PostgreSQL on a busy two-core machine takes a few seconds. */
export const READY_TIMEOUT_MS = 15_000;
/** How long a request waits for its answer, ms: a frozen process never answers, and a run must not hang on it. */
export const REQUEST_TIMEOUT_MS = 10_000;
/** How long `host()` waits for the run's last second to arrive from every process, ms: a sample is sent just past the second's end. */
export const HOST_WAIT_MS = 2_500;
/** How long a process SIGKILLed by `close()` may take to be reaped before the group stops waiting for it, ms. */
const REAP_WAIT_MS = 2_000;
/**
 * How far past a SIGCONT a frozen process's event-loop delay is still the
 * freeze's: its probe's first wakeup after it, which may fall in the next
 * second.
 */
const THAW_MS = 100;

/** How long `stop()` and `cont()` wait for the kernel to act on the signal, ms, and how often they look. */
const SIGNAL_WAIT_MS = 1_000;
const SIGNAL_POLL_MS = 5;

/** A process's state letter from /proc/PID/stat (`R`, `S`, `T` stopped, `Z`…); undefined once it is gone. */
function processState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.charAt(stat.lastIndexOf(')') + 2);
  } catch {
    return undefined;
  }
}

const KEEPER = fileURLToPath(new URL('./keeper.js', import.meta.url));

export interface GroupOptions {
  /** See {@link GRACE_MS}. */
  readonly graceMs?: number;
  /** See {@link READY_TIMEOUT_MS}. */
  readonly readyTimeoutMs?: number;
  /** See {@link REQUEST_TIMEOUT_MS}. */
  readonly requestTimeoutMs?: number;
  /**
   * The host series of the group's own process, the runner, which simulates
   * the scenario beside the real run and takes a core while it does; null:
   * not metered. Default `lab`.
   */
  readonly selfName?: string | null;
}

export interface ForkOptions {
  /** The child's environment (default: the lab's). */
  readonly env?: NodeJS.ProcessEnv;
  /** Node's own flags for the child (default: none, not the lab's, which may be a test runner's). */
  readonly execArgv?: readonly string[];
}

export interface SpawnOptions {
  /** When the server is ready (default: once it has started). */
  readonly readyWhen?: ReadyWhen;
  /** The signal that asks it to shut down (default SIGTERM; PostgreSQL's fast shutdown is SIGINT). */
  readonly stopSignal?: NodeJS.Signals;
}

/** What a keeper-spawned server's `ready()` gives: the binary's pid. */
export interface ServerProtocol extends Protocol {
  readonly ready: ServerReady;
  readonly requests: Record<never, never>;
}

type Recipe = { readonly kind: 'node'; readonly modulePath: string; readonly args: readonly string[]; readonly options: ForkOptions } | { readonly kind: 'server'; readonly spec: KeeperSpec };

/** Faults we injected into a process, so that what follows them is not read as its failure. */
type Fault = 'none' | 'frozen' | 'killed';

class Member {
  /** Its current life: set by `launch()` as soon as the member exists, replaced by a restart. */
  life!: RealProcess;
  fault: Fault = 'none';
  /** When the current freeze began (wall ms), while `fault` is `frozen`. */
  frozenAtMs = 0;

  constructor(
    readonly name: string,
    readonly recipe: Recipe,
  ) {}
}

/** A process of the group, by name: through a restart, the same handle reaches the new process. */
export class RealChild<P extends Protocol = Protocol> {
  /** @internal the group makes these */
  constructor(
    readonly name: string,
    private readonly member: Member,
    private readonly requestTimeoutMs: number,
  ) {}

  /** The forked process's pid: the Node child, or a server's keeper. */
  get pid(): number | undefined {
    return this.member.life.pid;
  }

  /** A keeper-spawned server binary's pid (its process group's too), once it is ready; undefined for a Node child. */
  get serverPid(): number | undefined {
    return this.member.recipe.kind === 'server' ? (this.member.life.readyInfo as ServerReady | undefined)?.pid : undefined;
  }

  /** What the child announced when it was ready (a server its port); rejects with its output if it exits first or is not ready in time. */
  ready(): Promise<P['ready']> {
    return this.member.life.ready as Promise<P['ready']>;
  }

  /** A request answered by the child's handler for its type: `await child.request({ type: 'stats' })`. */
  request<T extends RequestType<P>>(request: RequestOf<P, T>, options: { readonly timeoutMs?: number } = {}): Promise<ReplyOf<P, T>> {
    return this.member.life.request(request, options.timeoutMs ?? this.requestTimeoutMs) as Promise<ReplyOf<P, T>>;
  }

  /** The tail of its output (stdout and stderr as they came). */
  output(): string {
    return this.member.life.lastOutput();
  }
}

export class ProcessGroup implements Guarded {
  /** Rejects with the first process that exits when nobody stopped it (a {@link RealProcessError}): race the run against it. Never resolves. */
  readonly failure: Promise<never>;
  private readonly members = new Map<string, Member>();
  private readonly record = new HostRecord();
  private readonly graceMs: number;
  private readonly readyTimeoutMs: number;
  private readonly requestTimeoutMs: number;
  private readonly selfName: string | null;
  private readonly release: () => void;
  private readonly sampled = new Set<() => void>();
  /** The lives that have said hello: they listen, and a message sent them is not lost. */
  private readonly joined = new WeakSet<RealProcess>();
  private fail: (error: RealProcessError) => void = () => {};
  private zeroMs: number | undefined;
  private stopSelfMeter: (() => void) | undefined;
  private closing: Promise<void> | undefined;

  constructor(options: GroupOptions = {}) {
    this.graceMs = options.graceMs ?? GRACE_MS;
    this.readyTimeoutMs = options.readyTimeoutMs ?? READY_TIMEOUT_MS;
    this.requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
    this.selfName = options.selfName === undefined ? 'lab' : options.selfName;
    this.failure = new Promise<never>((_, reject) => {
      this.fail = (error) => {
        this.fail = () => {};
        reject(error);
      };
    });
    // Nobody may race against it (a run that ends first): its rejection must not crash the lab.
    this.failure.catch(() => {});
    this.release = guard(this);
  }

  /** Starts the Node module `modulePath` (compiled JS that calls `joinGroup`) as `name`; its `ready()` says when it is up. */
  fork<P extends Protocol = Protocol>(name: string, modulePath: string, args: readonly string[] = [], options: ForkOptions = {}): RealChild<P> {
    return this.add(name, { kind: 'node', modulePath, args, options }) as RealChild<P>;
  }

  /** Starts the binary `command` (on PATH, or a path) as `name`, through a keeper of ours. */
  spawn(name: string, command: string, args: readonly string[] = [], options: SpawnOptions = {}): RealChild<ServerProtocol> {
    const spec: KeeperSpec = { command, args, readyWhen: options.readyWhen ?? { kind: 'spawned' }, stopSignal: options.stopSignal ?? 'SIGTERM', graceMs: Math.floor(this.graceMs / 2) };
    return this.add(name, { kind: 'server', spec }) as RealChild<ServerProtocol>;
  }

  /**
   * The run's time zero (a wall-clock instant, ms since the epoch; default
   * now): from it, every process counts the seconds of its host samples,
   * those started later too. Once per group.
   */
  startClock(atMs: number = wallNowMs()): number {
    assert.ok(this.zeroMs === undefined, 'a run has one time zero');
    assert.ok(this.closing === undefined, 'the group is closed');
    this.zeroMs = atMs;
    for (const member of this.members.values()) if (this.joined.has(member.life)) member.life.send({ kind: 'zero', atMs });
    if (this.selfName !== null) {
      const name = this.selfName;
      this.record.track(name);
      this.stopSelfMeter = meterSeconds(atMs, nodeGauge(), (sample) => this.sample(name, sample));
    }
    return atMs;
  }

  /**
   * Freezes `name` (SIGSTOP; a server's whole process group): its
   * connections stay open and nothing answers. Resolves once the kernel
   * says it is stopped: a signal takes effect when its target next runs.
   */
  async stop(name: string): Promise<void> {
    const member = this.member(name);
    assert.equal(member.fault, 'none', `${name} is running to be stopped`);
    assert.ok(this.targetPid(member) !== undefined, `${name} is ready before a fault`);
    this.signalTarget(member, 'SIGSTOP');
    member.fault = 'frozen';
    member.frozenAtMs = wallNowMs();
    await this.until(member, (state) => state === 'T');
  }

  /** Thaws a frozen `name` (SIGCONT); resolves once it runs again. */
  async cont(name: string): Promise<void> {
    const member = this.member(name);
    assert.equal(member.fault, 'frozen', `${name} is stopped to be continued`);
    this.signalTarget(member, 'SIGCONT');
    this.thawed(member);
    await this.until(member, (state) => state !== 'T');
  }

  /** Kills `name` (SIGKILL; a server's whole process group) and resolves once it has exited: a crash, not a shutdown. */
  async kill(name: string): Promise<void> {
    const member = this.member(name);
    assert.notEqual(member.fault, 'killed', `${name} is already killed`);
    assert.ok(this.targetPid(member) !== undefined, `${name} is ready before a fault`);
    if (member.fault === 'frozen') this.thawed(member);
    member.fault = 'killed';
    this.signalTarget(member, 'SIGKILL');
    await member.life.exited;
  }

  /** Starts `name` again with the same module or command and args (a server on the same port, which it takes from its args), killing it first if it runs; resolves as its `ready()`. */
  async restart(name: string): Promise<unknown> {
    const member = this.member(name);
    assert.ok(this.closing === undefined, 'the group is closed');
    if (member.life.alive) await this.kill(name);
    member.life = this.launch(member);
    member.fault = 'none';
    return member.life.ready;
  }

  /** The group's processes by name. */
  child<P extends Protocol = Protocol>(name: string): RealChild<P> {
    return new RealChild<P>(name, this.member(name), this.requestTimeoutMs);
  }

  /**
   * Every process's host series over the run's first `seconds` seconds,
   * once every running process has sent the last of them (or `timeoutMs`
   * has passed: a missing second reads no CPU and no delay).
   */
  async host(seconds: number, timeoutMs: number = HOST_WAIT_MS): Promise<HostSeries[]> {
    assert.ok(this.zeroMs !== undefined, 'startClock() first: host seconds count from time zero');
    const deadline = wallNowMs() + timeoutMs;
    while (this.behind(seconds) && wallNowMs() < deadline) await this.nextSample(deadline - wallNowMs());
    return this.record.series(seconds);
  }

  /** Stops every process: SIGCONT (a frozen one could not act on the rest), SIGTERM, then SIGKILL after the grace period. Idempotent; await it in the runner's `finally`. */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  /** Tells every process to go, without waiting (the lab is exiting): a keeper then stops its server by itself. */
  abandon(): void {
    for (const member of this.members.values()) {
      if (!member.life.alive) continue;
      this.signalTarget(member, 'SIGCONT');
      member.life.signal('SIGCONT');
      member.life.signal('SIGTERM');
    }
  }

  private add(name: string, recipe: Recipe): RealChild {
    assert.ok(this.closing === undefined, 'the group is closed');
    assert.ok(name !== '' && name !== this.selfName && !this.members.has(name), `a process name is unique in its group (its own process is ${this.selfName}): ${name}`);
    const member = new Member(name, recipe);
    member.life = this.launch(member);
    this.members.set(name, member);
    this.record.track(name);
    return this.child(name);
  }

  private launch(member: Member): RealProcess {
    const { recipe } = member;
    // Detached: in a process group of its own, so a Ctrl-C at the terminal reaches the lab alone, which then stops its processes in order.
    const stdio: ['ignore', 'pipe', 'pipe', 'ipc'] = ['ignore', 'pipe', 'pipe', 'ipc'];
    const child: ChildProcess =
      recipe.kind === 'node'
        ? fork(recipe.modulePath, [...recipe.args], { detached: true, stdio, execArgv: [...(recipe.options.execArgv ?? [])], ...(recipe.options.env === undefined ? {} : { env: recipe.options.env }) })
        : fork(KEEPER, [JSON.stringify(recipe.spec)], { detached: true, stdio, execArgv: [] });
    const life: RealProcess = new RealProcess(member.name, child, this.readyTimeoutMs, {
      note: (message) => member.life === life && this.note(member, life, message),
      exited: (exit) => member.life === life && this.exited(member, exit),
    });
    return life;
  }

  private note(member: Member, life: RealProcess, message: FromChild): void {
    if (message.kind === 'hello') {
      this.joined.add(life);
      if (this.zeroMs !== undefined) life.send({ kind: 'zero', atMs: this.zeroMs });
    }
    if (message.kind === 'sample') this.sample(member.name, message.sample);
  }

  private sample(name: string, sample: Parameters<HostRecord['add']>[1]): void {
    this.record.add(name, sample);
    for (const wake of [...this.sampled]) wake();
  }

  private exited(member: Member, exit: Exit): void {
    if (this.closing !== undefined || member.fault === 'killed') return;
    const { isReady } = member.life;
    this.fail(new RealProcessError(isReady ? 'PROCESS_EXITED' : 'PROCESS_NOT_READY', member.name, `${describeExit(exit)} ${isReady ? 'while the run went on' : 'before it was ready'}`, member.life.lastOutput(), exit));
  }

  /** Whether a running process has not yet sent the run's last second. */
  private behind(seconds: number): boolean {
    const running = [...this.members.values()].filter((m) => m.life.alive && m.fault === 'none').map((m) => m.name);
    if (this.selfName !== null) running.push(this.selfName);
    return running.some((name) => this.record.lastSecond(name) < seconds - 1);
  }

  private nextSample(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        this.sampled.delete(wake);
        cancel();
        resolve();
      };
      const cancel = after(timeoutMs, wake);
      this.sampled.add(wake);
    });
  }

  private member(name: string): Member {
    const member = this.members.get(name);
    assert.ok(member !== undefined, `no process named ${name} in the group`);
    return member;
  }

  /** The pid a fault hits: the Node child's, or the server binary's once it is ready. */
  private targetPid(member: Member): number | undefined {
    return member.recipe.kind === 'node' ? member.life.pid : (member.life.readyInfo as ServerReady | undefined)?.pid;
  }

  /** A fault's target: a Node child itself, or a server binary's whole process group (PostgreSQL's backends with their postmaster). */
  private signalTarget(member: Member, signal: NodeJS.Signals): void {
    if (member.recipe.kind === 'node') {
      member.life.signal(signal);
      return;
    }
    const pid = this.targetPid(member);
    if (pid === undefined || !member.life.alive) return;
    try {
      process.kill(-pid, signal);
    } catch {
      // Gone already: its keeper is on its way out too.
    }
  }

  /** Waits, bounded, until the fault target's state (/proc's letter: `T` stopped) passes `check`; a target that is gone passes. */
  private async until(member: Member, check: (state: string) => boolean): Promise<void> {
    const pid = this.targetPid(member);
    const deadline = wallNowMs() + SIGNAL_WAIT_MS;
    while (pid !== undefined && wallNowMs() < deadline) {
      const state = processState(pid);
      if (state === undefined || check(state)) return;
      await new Promise<void>((resolve) => after(SIGNAL_POLL_MS, resolve));
    }
  }

  /** Its event-loop delay from the freeze to just past the thaw was ours, not the host's. */
  private thawed(member: Member): void {
    member.fault = 'none';
    if (this.zeroMs === undefined) return;
    this.record.excuse(member.name, Math.floor((member.frozenAtMs - this.zeroMs) / 1000), Math.floor((wallNowMs() + THAW_MS - this.zeroMs) / 1000));
  }

  private async shutdown(): Promise<void> {
    this.stopSelfMeter?.();
    await Promise.all([...this.members.values()].map((member) => this.end(member)));
    this.release();
  }

  private async end(member: Member): Promise<void> {
    const { life } = member;
    if (!life.alive) {
      await life.exited;
      return;
    }
    this.signalTarget(member, 'SIGCONT');
    life.signal('SIGCONT');
    life.signal('SIGTERM');
    if (await settlesWithin(life.exited, this.graceMs)) return;
    // Past the grace period: the server first (a keeper killed first could not stop it), then the process itself.
    this.signalTarget(member, 'SIGKILL');
    life.signal('SIGKILL');
    await settlesWithin(life.exited, REAP_WAIT_MS);
  }
}

/** Whether `promise` settles within `ms`. */
function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const cancel = after(ms, () => resolve(false));
    void promise.then(() => {
      cancel();
      resolve(true);
    });
  });
}
