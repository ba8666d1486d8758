import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { type HostSample } from './ipc.js';
import { type HostSeries } from './real-run.js';
import { LoopProbe } from './loop-probe.js';
import { after, wallNowMs } from './wall-clock.js';

/**
 * What each process of a real run takes from the host, second by second
 * (issue 30, item 4): its CPU in cores and, for a Node process, its event
 * loop's delay. Beside the run's own series they tell a reader whether the
 * modelled capacity or the machine limited it (see host-limits.ts).
 *
 * Every process meters itself (a keeper meters its server binary) and sends
 * one sample per second of the run to the group, which gathers them in a
 * {@link HostRecord}. All count seconds from the run's time zero, a
 * wall-clock instant the group sends them, so second 14 of the load
 * generator and second 14 of a server are the same second.
 */

/** What a meter reads of one process, or one process tree, each second. */
export interface HostGauge {
  /** CPU time used (user + system) since a fixed instant, ms: only differences are read. */
  cpuMs(): number;
  /**
   * The event loop's delays since the last call, which starts a new
   * window; null for a process without a Node event loop. `elapsedMs` is
   * the window's length: the delay of a loop that ran no timer in it.
   */
  lag(elapsedMs: number): { readonly p99Ms: number; readonly maxMs: number } | null;
  close(): void;
}

/**
 * The event-loop probe's period, ms: Node's default. A finer one costs the
 * metered process a wakeup per ms; a delay worth reporting (tens of ms) is
 * well above this one.
 */
export const LAG_RESOLUTION_MS = 10;

/** This Node process: `process.cpuUsage()` (every thread of it) and its event loop's delay ({@link LoopProbe}). */
export function nodeGauge(): HostGauge {
  const probe = new LoopProbe(LAG_RESOLUTION_MS);
  return {
    cpuMs: () => {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1000;
    },
    lag: () => probe.window(),
    close: () => probe.close(),
  };
}

/** The kernel's clock ticks per second, the unit of /proc's CPU times (`getconf CLK_TCK`; 100 on every Linux we know of). */
function clockTicks(): number {
  try {
    const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    if (Number.isInteger(ticks) && ticks > 0) return ticks;
  } catch {
    // No getconf: the value Linux has used on every architecture since 2.6.
  }
  return 100;
}

/**
 * A process's CPU ticks from /proc/PID/stat, its reaped children's
 * included (cutime, cstime), so a tree's time does not drop when a child
 * exits; undefined once it is gone.
 */
function statTicks(pid: number): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces or ')':
  // the fields after the last ')' are positional, from field 3 (state) on.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime, stime, cutime, cstime: fields 14 to 17.
  return [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
}

/** A process's children, from every thread's `children` list. */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const list = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
      if (list !== '') children.push(...list.split(' ').map(Number));
    }
  } catch {
    // Gone while we read it: its time is in its parent's cutime once reaped.
  }
  return children;
}

/** The CPU ticks of `root` and every live descendant; undefined once `root` is gone. */
function treeTicks(root: number): number | undefined {
  const own = statTicks(root);
  if (own === undefined) return undefined;
  let ticks = own;
  const stack = childrenOf(root);
  for (let pid = stack.pop(); pid !== undefined; pid = stack.pop()) {
    ticks += statTicks(pid) ?? 0;
    stack.push(...childrenOf(pid));
  }
  return ticks;
}

/**
 * A server binary and the processes it starts (PostgreSQL serves each
 * connection in a process of its own), read from /proc by the keeper that
 * spawned it. A descendant that exits between two readings takes its time
 * out of the sum until its parent reaps it; the sum only ever grows, so a
 * drop is counted as no time rather than as a negative one.
 */
export function procGauge(pid: number): HostGauge {
  const msPerTick = 1000 / clockTicks();
  let last = treeTicks(pid) ?? 0;
  let used = 0;
  return {
    cpuMs: () => {
      const ticks = treeTicks(pid);
      if (ticks !== undefined) {
        used += Math.max(0, ticks - last) * msPerTick;
        last = ticks;
      }
      return used;
    },
    lag: () => null,
    close: () => {},
  };
}

/**
 * How far past a second's end the meter reads: a timer may fire up to a ms
 * before the fractional instant it was set for, and a reading just short of
 * the boundary would close no second.
 */
const PAST_BOUNDARY_MS = 2;

const round = (x: number, digits: number): number => Math.round(x * 10 ** digits) / 10 ** digits;

/**
 * Reads `gauge` at the end of every second from `zeroMs` (a wall-clock
 * instant, ms since the epoch; from its start, if that is later) and sends
 * one sample per second. A reading late by more than a second (a blocked
 * or stopped process) spreads its interval's CPU evenly over the seconds
 * it covers, and gives each the delay it saw: the loop was behind in all
 * of them, the second the reading falls in too. Returns the stop.
 */
export function meterSeconds(zeroMs: number, gauge: HostGauge, emit: (sample: HostSample) => void): () => void {
  assert.ok(Number.isFinite(zeroMs), 'time zero is an instant');
  // The open second's start and the CPU used by then.
  let fromMs = 0;
  let fromCpu = 0;
  // The delay a late reading saw, owed to the second it fell in.
  let owed: { readonly p99Ms: number; readonly maxMs: number } | null = null;
  let cancel = (): void => {};
  const sinceZero = (): number => wallNowMs() - zeroMs;
  const next = (): void => {
    const t = sinceZero();
    cancel = after((Math.floor(t / 1000) + 1) * 1000 - t + PAST_BOUNDARY_MS, read);
  };
  const begin = (): void => {
    // From the start of the second the meter starts in, as if it used nothing before: a second's CPU is its average over the whole second, so the processes' figures add up.
    fromMs = Math.max(0, Math.floor(sinceZero() / 1000) * 1000);
    fromCpu = gauge.cpuMs();
    gauge.lag(0);
    next();
  };
  const worse = (a: typeof owed, b: typeof owed): typeof owed => (a === null ? b : b === null ? a : { p99Ms: Math.max(a.p99Ms, b.p99Ms), maxMs: Math.max(a.maxMs, b.maxMs) });
  function read(): void {
    const toMs = sinceZero();
    const first = Math.floor(fromMs / 1000);
    const ended = Math.floor(toMs / 1000); // seconds first … ended − 1 are over
    if (ended <= first) return next();
    const cpu = gauge.cpuMs();
    const lag = worse(owed, gauge.lag(toMs - fromMs));
    const cores = (cpu - fromCpu) / (toMs - fromMs);
    for (let second = first; second < ended; second++) {
      emit({ second, cpu: round(cores, 3), lagP99Ms: lag === null ? null : round(lag.p99Ms, 1), lagMaxMs: lag === null ? null : round(lag.maxMs, 1) });
    }
    // The open second keeps its share of the interval: its CPU at the same rate, and the delay if the reading came late into it.
    const into = toMs - ended * 1000;
    fromMs = ended * 1000;
    fromCpu = cpu - cores * into;
    owed = into > LAG_RESOLUTION_MS + PAST_BOUNDARY_MS ? lag : null;
    next();
  }
  const wait = -sinceZero();
  if (wait > 0) cancel = after(wait, begin);
  else begin();
  return () => {
    cancel();
    gauge.close();
  };
}

/**
 * The samples of a run's processes, gathered by the group into the run's
 * `HostSeries`. A process metered under one name through a restart keeps
 * one series; a second without a sample (the process was dead, or had not
 * started) reads no CPU and no delay.
 */
export class HostRecord {
  private readonly samples = new Map<string, Map<number, HostSample>>();
  private readonly last = new Map<string, number>();
  private readonly excused = new Map<string, Set<number>>();

  /** Gives `name` a series, in the order of the calls, with or without samples. */
  track(name: string): void {
    if (!this.samples.has(name)) this.samples.set(name, new Map());
  }

  add(name: string, sample: HostSample): void {
    this.track(name);
    this.samples.get(name)!.set(sample.second, sample);
    this.last.set(name, Math.max(this.lastSecond(name), sample.second));
  }

  /** The last second `name` sent a sample for; −1 before its first. */
  lastSecond(name: string): number {
    return this.last.get(name) ?? -1;
  }

  /**
   * Seconds `fromS` … `toS` (inclusive) in which `name`'s event loop delay
   * was a fault we injected (SIGSTOP), not the host's doing: its delay in
   * them is dropped (null), its CPU kept (it is what the process took).
   */
  excuse(name: string, fromS: number, toS: number): void {
    assert.ok(fromS <= toS, 'an excused span runs forwards');
    const seconds = this.excused.get(name) ?? new Set<number>();
    for (let s = Math.max(0, fromS); s <= toS; s++) seconds.add(s);
    this.excused.set(name, seconds);
  }

  /** Every tracked process's series over the run's first `seconds` seconds. */
  series(seconds: number): HostSeries[] {
    assert.ok(Number.isInteger(seconds) && seconds >= 0, 'a whole number of seconds');
    return [...this.samples].map(([name, byS]) => {
      const excused = this.excused.get(name);
      const range = Array.from({ length: seconds }, (_, s) => s);
      const lagged = range.map((s) => (excused?.has(s) === true ? undefined : byS.get(s)));
      return {
        name,
        cpu: range.map((s) => byS.get(s)?.cpu ?? 0),
        lagP99Ms: lagged.map((x) => x?.lagP99Ms ?? null),
        lagMaxMs: lagged.map((x) => x?.lagMaxMs ?? null),
      };
    });
  }
}
