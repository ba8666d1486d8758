import { optionsObject } from '../config.js';
import { ConfigError, describe } from '../errors.js';
import { type Timer } from './clock.js';
import { VirtualClock } from './virtual.js';

/**
 * Runs code that reads the platform's clock, timers and `Math.random` on a
 * {@link VirtualClock}: the libraries a user already composes (cockatiel,
 * opossum and their like read `Date.now()` and set `setTimeout`s of their
 * own, not a `Clock`) can then be run in virtual time beside damper's code,
 * on the same timer queue, reproducibly from the clock's seed. The incident
 * lab asks "would my stack survive this outage?" of such stacks (issue 31);
 * a user's test can ask it of their own.
 *
 * {@link forbidRealTime} is its opposite: damper's own code never needs this.
 */

/** Options of {@link installVirtualTime}. */
export interface VirtualTimeOptions {
  /** What `Date.now()` reads at the clock's time 0, ms since 1970. Default 2000-01-01T00:00:00Z: fixed, so a run depends on its seed alone, and not 0, which code may read as "never". */
  epochMs?: number;
  /**
   * What `performance.now()` (and `process.hrtime`) read at the clock's time
   * 0, ms. Default 1,000: a process a second after its start. Not 0, which
   * code may read as "never": lru-cache takes an entry set when
   * `performance.now()` reads 0 for one that never goes stale.
   */
  uptimeMs?: number;
}

/** What {@link installVirtualTime} returns: call it to put the platform's own globals back. Calling it twice does nothing more. */
export type VirtualTimeRelease = () => void;

const DEFAULT_EPOCH_MS = Date.UTC(2000, 0, 1);
const DEFAULT_UPTIME_MS = 1_000;
/** One clock at a time: the globals are the process's. */
let installed = false;
/** Node's bound on a timer's delay; past it (or below 1, or not a number) Node waits 1 ms. */
const TIMEOUT_MAX = 2_147_483_647;

/**
 * A timer handle shaped as Node's `Timeout` (`ref`, `unref`, `hasRef`,
 * `refresh`, `close`, a primitive id), over a virtual timer. A virtual timer
 * never holds the process open, so `ref` and `unref` only record the wish.
 */
class VirtualTimeout {
  private timer: Timer | undefined;
  private held = true;

  constructor(
    private readonly clock: VirtualClock,
    private readonly live: Map<number, VirtualTimeout>,
    private readonly callback: () => void,
    private readonly ms: number,
    private readonly every: boolean,
    readonly id: number,
  ) {
    this.arm();
  }

  private arm(): void {
    this.live.set(this.id, this);
    this.timer = this.clock.setTimer(() => {
      if (this.every) this.arm();
      else this.disarm();
      this.callback();
    }, this.ms);
  }

  private disarm(): void {
    this.timer = undefined;
    this.live.delete(this.id);
  }

  cancel(): void {
    this.timer?.cancel();
    this.disarm();
  }

  /** As Node's: starts the delay again from now, and re-arms a timeout that already fired. */
  refresh(): this {
    this.timer?.cancel();
    this.arm();
    return this;
  }

  ref(): this {
    this.held = true;
    return this;
  }

  unref(): this {
    this.held = false;
    return this;
  }

  hasRef(): boolean {
    return this.held;
  }

  close(): this {
    this.cancel();
    return this;
  }

  [Symbol.toPrimitive](): number {
    return this.id;
  }
}

/** Node's reading of a delay: a number from 1 to 2^31 − 1, else 1. */
function nodeDelay(ms: unknown): number {
  const n = Number(ms);
  return n >= 1 && n <= TIMEOUT_MAX ? n : 1;
}

type Patch = readonly [target: object, key: string, value: unknown];

/**
 * Points `Date.now`, `performance.now`, `process.hrtime` (and its
 * `bigint`), `setTimeout`, `setInterval`, their `clear…` functions and
 * `Math.random` at `clock` until the returned function is called: a timer
 * set through them is the clock's, fired by its `advance` in time order
 * with damper's own, and `Math.random` draws from the clock's seeded
 * source. Node's own rules hold (a delay under 1 ms or past 2^31 − 1 is 1
 * ms; a timer handle has `ref`, `unref`, `refresh` and an id that
 * `clearTimeout` takes), so a library written for Node runs unchanged.
 *
 * Not virtual: `new Date()` with no argument (the real now; use
 * `Date.now()`), `setImmediate` and `queueMicrotask`, which read no time and
 * run when the clock yields to the event loop, and every real I/O. Code
 * that waits on a socket is not in virtual time whatever its timers are.
 * The globals are the process's: one clock at a time (a second install
 * while one is on is refused), and nothing else in the process may rely on
 * the real ones meanwhile.
 */
export function installVirtualTime(clock: VirtualClock, options: VirtualTimeOptions = {}): VirtualTimeRelease {
  // A system clock here would hand the platform's timers back to the platform, and no run would depend on its seed.
  if (!(clock instanceof VirtualClock)) throw new ConfigError(`installVirtualTime: clock must be a VirtualClock, got ${describe(clock)}`);
  const given = optionsObject('installVirtualTime options', options);
  const epochMs = given.epochMs ?? DEFAULT_EPOCH_MS;
  if (typeof epochMs !== 'number' || !Number.isFinite(epochMs)) throw new ConfigError(`epochMs must be a finite number of ms, got ${describe(epochMs)}`);
  const uptimeMs = given.uptimeMs ?? DEFAULT_UPTIME_MS;
  if (typeof uptimeMs !== 'number' || !Number.isFinite(uptimeMs) || uptimeMs < 0) throw new ConfigError(`uptimeMs must be a finite number of ms ≥ 0, got ${describe(uptimeMs)}`);
  if (installed) throw new ConfigError('installVirtualTime: virtual time is already installed in this process; release it first');
  const live = new Map<number, VirtualTimeout>();
  let ids = 1;
  const timer =
    (every: boolean) =>
    (callback: unknown, ms?: unknown, ...args: unknown[]): VirtualTimeout => {
      if (typeof callback !== 'function') throw new TypeError(`The "callback" argument must be of type function. Received ${describe(callback)}`);
      return new VirtualTimeout(clock, live, () => void callback(...args), nodeDelay(ms), every, ids++);
    };
  const clear = (handle: unknown): void => {
    if (handle instanceof VirtualTimeout) handle.cancel();
    else if (typeof handle === 'number' || typeof handle === 'string') live.get(Number(handle))?.cancel();
  };
  const nanos = (): bigint => BigInt(Math.round((uptimeMs + clock.now()) * 1e6));
  const hrtime = Object.assign(
    (previous?: readonly [number, number]): [number, number] => {
      let ns = nanos();
      if (previous !== undefined) ns -= BigInt(previous[0]) * 1_000_000_000n + BigInt(previous[1]);
      return [Number(ns / 1_000_000_000n), Number(ns % 1_000_000_000n)];
    },
    { bigint: nanos },
  );
  const patches: readonly Patch[] = [
    [Date, 'now', () => epochMs + clock.now()],
    [performance, 'now', () => uptimeMs + clock.now()],
    [process, 'hrtime', hrtime],
    [Math, 'random', () => clock.random()],
    [globalThis, 'setTimeout', timer(false)],
    [globalThis, 'setInterval', timer(true)],
    [globalThis, 'clearTimeout', clear],
    [globalThis, 'clearInterval', clear],
  ];
  const saved = patches.map(([target, key]) => [target, key, Object.getOwnPropertyDescriptor(target, key)] as const);
  for (const [target, key, value] of patches) Object.defineProperty(target, key, { configurable: true, writable: true, value });
  installed = true;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    installed = false;
    for (const [target, key, descriptor] of saved) {
      if (descriptor === undefined) Reflect.deleteProperty(target, key);
      else Object.defineProperty(target, key, descriptor);
    }
  };
}
