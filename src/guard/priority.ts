/**
 * How important a call is. Under overload the least important are shed first,
 * so critical work keeps its latency (Discord 2019: push-notification settings
 * should have been shed before messages). Named levels map to numbers; a
 * numeric priority is used as is, higher is more important.
 */
export type Priority = 'critical' | 'normal' | 'low' | 'background' | number;

const LEVELS: Readonly<Record<string, number>> = { critical: 300, normal: 200, low: 100, background: 0 };

/** The numeric rank of a priority: higher is more important. `normal` when absent. */
export function priorityRank(p: Priority | undefined): number {
  if (p === undefined) return LEVELS.normal!;
  return typeof p === 'number' ? p : (LEVELS[p] ?? LEVELS.normal!);
}
