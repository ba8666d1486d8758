import { readFileSync } from 'node:fs';
import { after, wallNowMs } from './wall-clock.js';
import { type Knobs, type Stack } from '../stacks/stack.js';
import { type ServiceScenario } from '../schema/service.js';
import { type NodePorts } from './redis-ring.js';

/** What every process of a real run is started with (as JSON in argv[2]). */
export interface ProcessArgs {
  /** The fitted scenario, parsed, as a JSON file the runner wrote: every process reads the same one. */
  readonly scenarioFile: string;
  /** The stack the run is made with: naive, damper, or a peer (issue 31) in naive's system. */
  readonly variant: Stack;
  /** A peer's knobs, as the command line gave them. */
  readonly knobs?: Knobs;
  /** The fitting's time scale: a peer's own durations are divided by it (stacks/stack.ts, `TierPlan`). */
  readonly timeScale?: number;
  readonly seed: number;
  /** The port to listen on (0: any free one; a restarted server gets its old one). */
  readonly port: number;
  /** Server or tier index, from 0. */
  readonly index: number;
  /** The origins this process calls (the tier below, or the servers). */
  readonly below: readonly string[];
  /** A server's: the loopback port of the run's PostgreSQL, when the scenario has a database. */
  readonly databasePort?: number;
  /**
   * With `cache.nodes`, per node: a server's client calls `paced`, and seeds
   * `direct`; the cache nodes' process listens on `paced` in front of the
   * redis-server on `direct`.
   */
  readonly cacheNodes?: readonly NodePorts[];
  /** A server's, with the tier's one cache (`cache.scope: tier` without nodes): the loopback port of the cache tier's process it reads through. */
  readonly cacheTier?: number;
}

/** This process's arguments and scenario. */
export function processArgs(): { readonly args: ProcessArgs; readonly scenario: ServiceScenario } {
  const text = process.argv[2];
  if (text === undefined) throw new Error('a real run’s process needs its ProcessArgs as JSON in argv[2]');
  const args = JSON.parse(text) as ProcessArgs;
  return { args, scenario: JSON.parse(readFileSync(args.scenarioFile, 'utf8')) as ServiceScenario };
}

/** Counts by second from time zero, growing as needed; nothing before zero is counted. */
export class PerSecond {
  private readonly counts: number[] = [];
  zero = Number.POSITIVE_INFINITY;

  add(at: number): void {
    if (at < this.zero) return;
    const s = Math.floor((at - this.zero) / 1000);
    while (this.counts.length <= s) this.counts.push(0);
    this.counts[s]!++;
  }

  get values(): readonly number[] {
    return this.counts;
  }
}

/**
 * From time zero `zero` (wall ms): `apply(now)` at once (0 before zero), then
 * `apply(b)` at each of the faults' starts and ends `b` (s) still to come:
 * how a process applies the state the faults make to its part, as the
 * simulation applies it at each fault event.
 */
export function atFaultBounds(scenario: ServiceScenario, zero: number, apply: (s: number) => void): void {
  const now = (wallNowMs() - zero) / 1000;
  apply(Math.max(0, now));
  const bounds = new Set(scenario.faults.flatMap((f) => [f.startS, f.endS]).filter((b) => b > now));
  for (const b of bounds) after(zero + b * 1000 - wallNowMs(), () => apply(b));
}
