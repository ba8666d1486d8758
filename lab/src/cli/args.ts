import { existsSync } from 'node:fs';
import { MAX_STEPS } from '../lab/sweep/sweep.js';
import { type Shard } from '../lab/sweep/shard.js';
import { type AxisRange } from '../lab/sweep/sweep-axis.js';
import { DEFAULT_MAX_MINUTES } from '../lab/run-cost.js';

/**
 * The command line's own checks of its values (options.ts reads them): each
 * problem of usage is a UsageError, which main.ts prints as one line and the
 * help to read, exit 2.
 */

/** Bad input that reading the help will not fix (a file not found, a folder that cannot be written): one line, exit 2. */
export class InputError extends Error {}

/** The command line used wrongly: one line, then which help to read, exit 2. */
export class UsageError extends InputError {}

/** The one SCENARIO a command takes (`lab sweep`, `lab check`). */
export function oneScenario(command: string, operands: readonly string[]): string {
  const [scenario, ...extra] = operands;
  if (scenario === undefined) throw new UsageError(`${command} needs a SCENARIO (a shipped name such as facebook-2010, or a scenario file)`);
  if (extra.length > 0) throw new UsageError(`${command} takes one SCENARIO, got also: ${extra.join(' ')}`);
  return scenario;
}

/** `--damper-config FILE`, found now, not by the first worker after the scenarios are loaded and the folder made. */
export function damperConfigOf(file: string | undefined): { damperConfig?: string } {
  if (file === undefined) return {};
  if (!existsSync(file)) throw new InputError(`--damper-config ${file}: no such file`);
  return { damperConfig: file };
}

const NUMBER = String.raw`(-?(?:\d+(?:\.\d+)?|\.\d+))`;
const RANGE = new RegExp(`^${NUMBER}\\.\\.${NUMBER}$`);

/** `A..B`, two numbers, A below B; `positive`: both above 0 (a load, a trigger), else any (a field: its schema judges). */
export function parseRange(flag: string, raw: string, sign: 'positive' | 'any' = 'positive'): [number, number] {
  const m = RANGE.exec(raw.trim());
  const kind = sign === 'positive' ? 'two positive numbers' : 'two numbers';
  if (m === null) throw new UsageError(`${flag} must be a range A..B of ${kind} (e.g. 0.5..1.5), got "${raw}"`);
  const from = Number(m[1]);
  const to = Number(m[2]);
  if (sign === 'positive' && !(from > 0)) throw new UsageError(`${flag}: ${m[1]} is not positive; both ends must be above 0`);
  if (!(to > from)) throw new UsageError(`${flag}: the range must go up, got "${raw}"`);
  return [from, to];
}

export function parseSteps(raw: string | undefined): number {
  if (raw === undefined) return 5;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < 2 || n > MAX_STEPS) throw new UsageError(`--steps must be an integer from 2 to ${MAX_STEPS}, got "${raw}"`);
  return n;
}

/** `--max-calls N`: the simulated calls a run may send (a whole number, 1e9 allowed); default `fallback`. */
export function parseMaxCalls(raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isSafeInteger(n) || n < 1) throw new UsageError(`--max-calls must be a whole number of calls, at least 1 (e.g. 500000000 or 5e8), got "${raw}"`);
  return n;
}

export function parseMaxMinutes(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_MAX_MINUTES;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n <= 0) throw new UsageError(`--max-minutes must be a positive number of minutes (e.g. 90), got "${raw}"`);
  return n;
}

/** `--shard I/N`: the I-th of N shares of a grid's cells, 1 ≤ I ≤ N; undefined when not given (the whole grid, no part written). */
export function parseShard(raw: string | undefined): Shard | undefined {
  if (raw === undefined) return undefined;
  const m = /^(\d{1,6})\/(\d{1,6})$/.exec(raw);
  const [index, count] = m === null ? [NaN, NaN] : [Number(m[1]), Number(m[2])];
  if (!(count >= 1 && index >= 1 && index <= count)) throw new UsageError(`--shard must be I/N, this machine's share I of N, whole numbers with 1 ≤ I ≤ N (e.g. 2/4), got "${raw}"`);
  return { index, count };
}

export function parseSeed(raw: string | undefined): number {
  if (raw === undefined) return 1;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n > 0xffff_ffff) throw new UsageError(`--seed must be an integer from 0 to 4294967295, got "${raw}"`);
  return n;
}

/** The sweep's axis flags as parsed. */
export interface AxisFlags {
  readonly load?: string;
  readonly trigger?: string;
  readonly 'trigger-size'?: string;
  readonly axis?: readonly string[];
}

/**
 * The sweep's two axes from its flags: exactly two of `--load`, `--trigger`,
 * `--trigger-size` and `--axis PATH=A..B` (which may be given twice). The
 * first in the order load, fields (as given), trigger, trigger-size goes
 * across, the second up: `--load --trigger` is today's map, load across.
 */
export function sweepAxes(flags: AxisFlags): [AxisRange, AxisRange] {
  const axes: AxisRange[] = [];
  const add = (axis: AxisRange['axis'], [from, to]: [number, number]): void => void axes.push({ axis, from, to });
  if (flags.load !== undefined) add({ kind: 'load' }, parseRange('--load', flags.load));
  for (const raw of flags.axis ?? []) {
    const eq = raw.lastIndexOf('=');
    if (eq <= 0) throw new UsageError(`--axis must be PATH=A..B, a numeric field of the scenario file and a range (e.g. servers.workers=2..8), got "${raw}"`);
    const field = raw.slice(0, eq);
    add({ kind: 'field', field }, parseRange(`--axis ${field}`, raw.slice(eq + 1), 'any'));
  }
  if (flags.trigger !== undefined) add({ kind: 'trigger' }, parseRange('--trigger', flags.trigger));
  if (flags['trigger-size'] !== undefined) add({ kind: 'trigger-size' }, parseRange('--trigger-size', flags['trigger-size']));
  if (axes.length !== 2) {
    throw new UsageError(
      `lab sweep needs two axes, got ${axes.length}: two of --load A..B (offered load, × the scenario’s client rates, e.g. --load 0.5..1.5), --trigger C..D (how long the trigger lasts, e.g. --trigger 5..60), --trigger-size C..D (how hard it hits, e.g. --trigger-size 2..8) and --axis PATH=A..B (any numeric field, e.g. --axis servers.workers=2..8)`,
    );
  }
  const [across, up] = axes as [AxisRange, AxisRange];
  if (across.axis.kind === 'field' && up.axis.kind === 'field' && across.axis.field === up.axis.field) throw new UsageError(`--axis ${across.axis.field} is given twice: the two axes must differ`);
  return [across, up];
}

/** `--scale S`, `--time-scale K`: a positive factor (e.g. 0.25, 2), or the default when not given. */
export function parseFactor(flag: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n <= 0) throw new UsageError(`${flag} must be a positive number (e.g. 0.25 or 2), got "${raw}"`);
  return n;
}

/** `--duration SECONDS`: a positive number of seconds, or undefined when not given. */
export function parseDuration(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n <= 0) throw new UsageError(`--duration must be a positive number of seconds (e.g. 150), got "${raw}"`);
  return n;
}

/** `--runs N`: real runs per variant, 1 to 10. */
export function parseRuns(raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < 1 || n > 10) throw new UsageError(`--runs must be a whole number from 1 to 10, got "${raw}"`);
  return n;
}
