import { readFileSync } from 'node:fs';
import { type VariantName } from '../judge/results.js';
import { type ServiceScenario } from '../schema/service.js';

/** What every process of a real run is started with (as JSON in argv[2]). */
export interface ProcessArgs {
  /** The fitted scenario, parsed, as a JSON file the runner wrote: every process reads the same one. */
  readonly scenarioFile: string;
  readonly variant: VariantName;
  readonly seed: number;
  /** The port to listen on (0: any free one; a restarted server gets its old one). */
  readonly port: number;
  /** Server or tier index, from 0. */
  readonly index: number;
  /** The origins this process calls (the tier below, or the servers). */
  readonly below: readonly string[];
  /** A server's: the loopback port of the run's PostgreSQL, when the scenario has a database. */
  readonly databasePort?: number;
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
