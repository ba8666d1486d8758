/**
 * How important a call is. Under overload the least important are shed first,
 * so critical work keeps its latency (Discord 2019: push-notification settings
 * should have been shed before messages). Named levels map to numbers; a
 * numeric priority is used as is, higher is more important.
 */
export type Priority = 'critical' | 'normal' | 'low' | 'background' | number;

import { ConfigError, describe } from '../errors.js';

const LEVELS: Readonly<Record<string, number>> = { critical: 300, normal: 200, low: 100, background: 0 };

/** Checks an option that must be a priority: a named level or a finite number. */
export function checkPriority<P extends Priority | undefined>(name: string, p: P): P {
  const ok = p === undefined || (typeof p === 'number' ? Number.isFinite(p) : typeof p === 'string' && Object.hasOwn(LEVELS, p)); // not `in`: 'constructor' is in every object

  if (!ok) throw new ConfigError(`${name} must be critical, normal, low, background or a finite number, got ${describe(p)}`);
  return p;
}

/** The numeric rank of a priority: higher is more important. `normal` when absent. */
export function priorityRank(p: Priority | undefined): number {
  if (p === undefined) return LEVELS.normal!;
  return typeof p === 'number' ? p : (LEVELS[p] ?? LEVELS.normal!);
}
