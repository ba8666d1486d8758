import assert from 'node:assert/strict';
import { type HostSeries } from './real-run.js';

/**
 * Whether the machine, not the scenario's modelled capacity, may have
 * limited a real run, second by second (issue 30, item 4). A real run
 * means something only where its bottleneck is the one the scenario
 * models (its servers' workers, its database's connections); where the host
 * was out of CPU, or a process's one thread was, or an event loop ran late,
 * the run measured the machine, and its disagreement with the simulation
 * says nothing about either. The runner prints a line per reason and
 * refuses a run limited in too much of its trigger window.
 */

/** The processes together used this share of the host's cores or more: the machine had no CPU left to give. */
export const BUSY_SHARE = 0.9;

/**
 * One single-threaded process (a Node process, or a server named as one,
 * like redis-server) used this many cores or more: its one thread was
 * saturated, whatever the rest of the machine did. Not 1: `cpuUsage`
 * counts Node's helper threads too, and a second's reading is noisy, so a
 * thread busy throughout reads a little either side of 1.
 */
export const SATURATED_CORES = 0.9;

/**
 * An event loop whose p99 delay in a second was above this, ms, ran late
 * enough to move the run's own figures. Every call a Node process handles
 * waits out its loop's delay, so the delay adds to the latencies the judge
 * reads: 20 ms is under a tenth of the tightest p99 objective of the shipped
 * scenarios (250 ms) and a fiftieth of their shortest client timeout
 * (1 s), and well above what an idle loop shows on a busy two-core machine
 * (a few ms). A time-scaled scenario's objectives shrink with it: see
 * {@link lagBoundMs}.
 */
export const LAG_P99_MS = 20;

/** The share of a scenario's p99 objective an event loop's delay may take before it counts against the run. */
export const LAG_SHARE_OF_OBJECTIVE = 0.1;

/**
 * A real run limited by the host in more than this share of its trigger
 * window is refused: the trigger window is what the verdict and the
 * efficiency are read from, to a few percent, and a tenth of it spent on
 * a starved machine can move them by as much.
 */
export const MAX_LIMITED_SHARE = 0.1;

/** The event-loop bound for a scenario (fitted: time-scaled objectives are shorter): {@link LAG_P99_MS}, or a tenth of its p99 objective if that is less. */
export function lagBoundMs(objectiveP99Ms: number): number {
  assert.ok(objectiveP99Ms > 0, 'a p99 objective is a positive time');
  return Math.min(LAG_P99_MS, objectiveP99Ms * LAG_SHARE_OF_OBJECTIVE);
}

/** Why the host may have limited a second. */
export type HostLimitReason =
  /** The processes together used ≥ {@link BUSY_SHARE} of the cores. */
  | 'host-busy'
  /** A single-threaded process used ≥ {@link SATURATED_CORES}. */
  | 'process-saturated'
  /** An event loop's p99 delay was above the bound. */
  | 'loop-late';

/** One reason, the seconds it held in, and its worst second. */
export interface HostLimit {
  readonly reason: HostLimitReason;
  /** Ascending. */
  readonly seconds: readonly number[];
  /**
   * The worst second: when, which process (for `host-busy`, the one that
   * used the most in it), and the measure: cores (all processes' for
   * `host-busy`, the process's own for `process-saturated`) or ms.
   */
  readonly worst: { readonly second: number; readonly process: string; readonly value: number };
}

/** The bounds a run was judged by, so its lines say them. */
export interface HostBounds {
  readonly cores: number;
  readonly busyShare: number;
  readonly saturatedCores: number;
  readonly lagP99Ms: number;
}

export interface HostLimits {
  readonly bounds: HostBounds;
  /** Every second any reason held in, ascending. */
  readonly seconds: readonly number[];
  /** One per reason that held in a second, in the order of {@link HostLimitReason}. */
  readonly limits: readonly HostLimit[];
}

export interface HostLimitOptions {
  /** Default {@link BUSY_SHARE}. */
  readonly busyShare?: number;
  /** Default {@link SATURATED_CORES}. */
  readonly saturatedCores?: number;
  /** Default {@link LAG_P99_MS}; a fitted scenario's from {@link lagBoundMs}. */
  readonly lagP99Ms?: number;
  /** Processes without a Node event loop that are single-threaded all the same (redis-server's): Node processes (those with a delay) count without being named. */
  readonly singleThreaded?: readonly string[];
}

/** A reason's measure in one second: the process it names and the value, or undefined where it did not hold. */
type Measure = (second: number) => { readonly process: string; readonly value: number } | undefined;

function limitOf(reason: HostLimitReason, length: number, measure: Measure): HostLimit | undefined {
  const seconds: number[] = [];
  let worst: HostLimit['worst'] | undefined;
  for (let s = 0; s < length; s++) {
    const m = measure(s);
    if (m === undefined) continue;
    seconds.push(s);
    if (worst === undefined || m.value > worst.value) worst = { second: s, ...m };
  }
  return worst === undefined ? undefined : { reason, seconds, worst };
}

/** The largest of `values` with its process, or undefined if none is given. */
function largest(values: readonly { readonly process: string; readonly value: number | null }[]): { process: string; value: number } | undefined {
  let top: { process: string; value: number } | undefined;
  for (const { process, value } of values) if (value !== null && (top === undefined || value > top.value)) top = { process, value };
  return top;
}

/** The seconds of the run in which the host, not the scenario's capacity, may have limited it, and why: see the file's comment. */
export function hostLimits(host: readonly HostSeries[], cores: number, options: HostLimitOptions = {}): HostLimits {
  assert.ok(Number.isInteger(cores) && cores > 0, 'a host has a whole number of cores, at least one');
  const { busyShare = BUSY_SHARE, saturatedCores = SATURATED_CORES, lagP99Ms = LAG_P99_MS, singleThreaded = [] } = options;
  const length = Math.max(0, ...host.map((h) => h.cpu.length));
  const threaded = host.filter((h) => singleThreaded.includes(h.name) || h.lagP99Ms.some((lag) => lag !== null));
  const cpuAt = (s: number, series: readonly HostSeries[]) => series.map((h) => ({ process: h.name, value: h.cpu[s] ?? 0 }));
  const limits = [
    limitOf('host-busy', length, (s) => {
      const total = cpuAt(s, host).reduce((sum, p) => sum + p.value, 0);
      return total >= busyShare * cores ? { process: largest(cpuAt(s, host))!.process, value: total } : undefined;
    }),
    limitOf('process-saturated', length, (s) => {
      const top = largest(cpuAt(s, threaded));
      return top !== undefined && top.value >= saturatedCores ? top : undefined;
    }),
    limitOf('loop-late', length, (s) => {
      const top = largest(host.map((h) => ({ process: h.name, value: h.lagP99Ms[s] ?? null })));
      return top !== undefined && top.value > lagP99Ms ? top : undefined;
    }),
  ].filter((limit) => limit !== undefined);
  const seconds = [...new Set(limits.flatMap((l) => l.seconds))].sort((a, b) => a - b);
  return { bounds: { cores, busyShare, saturatedCores, lagP99Ms }, seconds, limits };
}

/** The share of the seconds [fromS, toS) (a trigger window) the host may have limited; compare it with {@link MAX_LIMITED_SHARE}. */
export function limitedShare(limits: HostLimits, fromS: number, toS: number): number {
  assert.ok(toS > fromS, 'a window has a length');
  return limits.seconds.filter((s) => s >= fromS && s < toS).length / (toS - fromS);
}

/** `3–7, 12, 15–16`: seconds as runs. */
export function secondRanges(seconds: readonly number[]): string {
  const runs: string[] = [];
  for (let i = 0; i < seconds.length; ) {
    let j = i;
    while (j + 1 < seconds.length && seconds[j + 1] === seconds[j]! + 1) j++;
    runs.push(i === j ? `${seconds[i]}` : `${seconds[i]}–${seconds[j]}`);
    i = j + 1;
  }
  return runs.join(', ');
}

const cores = (x: number): string => `${x.toFixed(2)} ${x === 1 ? 'core' : 'cores'}`;

/** One warning line per reason, for the terminal and the fidelity page. */
export function hostLimitLines(limits: HostLimits): string[] {
  const { cores: hostCores, busyShare, saturatedCores, lagP99Ms } = limits.bounds;
  return limits.limits.map(({ reason, seconds, worst }) => {
    const when = `${seconds.length} s (${secondRanges(seconds)})`;
    switch (reason) {
      case 'host-busy':
        return `host busy in ${when}: the processes together used ≥ ${Math.round(busyShare * 100)}% of the ${hostCores} cores; worst second ${worst.second}: ${cores(worst.value)}, most by ${worst.process}`;
      case 'process-saturated':
        return `a process saturated in ${when}: a single-threaded process used ≥ ${saturatedCores} core; worst: ${worst.process}, ${cores(worst.value)} in second ${worst.second}`;
      case 'loop-late':
        return `event loops late in ${when}: a p99 delay above ${lagP99Ms} ms; worst: ${worst.process}, ${Math.round(worst.value)} ms in second ${worst.second}`;
    }
  });
}
