/**
 * A latency histogram small enough to send over IPC four times a second:
 * log-scale buckets, four per doubling, from 1 µs to about 134 s. The chaos
 * test's workers keep cumulative counts; the parent subtracts two snapshots
 * to get any window's distribution, so a phase's p99 is computed over every
 * get in it, not over a sample.
 *
 * A quantile reads as its bucket's upper bound: at most 19 % (2^¼) above the
 * true value, never below it, so a bound asserted on it holds for the real
 * latency too.
 */

const PER_DOUBLING = 4;
const FLOOR_MS = 0.001;
export const BUCKETS = 27 * PER_DOUBLING;

/** Empty cumulative counts. */
export function emptyHistogram(): number[] {
  return new Array<number>(BUCKETS).fill(0);
}

/** Counts one latency, ms. */
export function record(counts: number[], ms: number): void {
  const i = ms <= FLOOR_MS ? 0 : Math.min(BUCKETS - 1, Math.ceil(Math.log2(ms / FLOOR_MS) * PER_DOUBLING));
  counts[i] = (counts[i] ?? 0) + 1;
}

/** `a − b`, bucket by bucket (a window between two cumulative snapshots). */
export function minus(a: readonly number[], b: readonly number[]): number[] {
  return a.map((n, i) => n - (b[i] ?? 0));
}

/** `a + b`, bucket by bucket (several workers, or several windows). */
export function plus(a: readonly number[], b: readonly number[]): number[] {
  return a.map((n, i) => n + (b[i] ?? 0));
}

/** The `q` quantile (0–1), ms, as its bucket's upper bound; undefined when nothing was counted. */
export function quantile(counts: readonly number[], q: number): number | undefined {
  const total = counts.reduce((s, n) => s + n, 0);
  if (total === 0) return undefined;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i] ?? 0;
    if (seen >= q * total) return FLOOR_MS * 2 ** (i / PER_DOUBLING);
  }
  return FLOOR_MS * 2 ** ((counts.length - 1) / PER_DOUBLING);
}
