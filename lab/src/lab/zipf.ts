/**
 * Key popularity by Zipf's law: the key of rank r (1 = the most popular) of
 * `count` keys is read with probability ∝ 1 ÷ r^exponent. Exponent 0 is
 * uniform; web caches measure 0.6–1 (Breslau et al., "Web Caching and
 * Zipf-like Distributions", 1999), Brooker's cache_sim uses 1. A draw is one
 * number from the caller's source (the run's traffic, src/lab/streams.ts) and
 * a binary search over the cumulative shares, built once.
 */
export class ZipfKeys {
  /** Every key, most popular first: `key:0`, `key:1`, … (strings built once: the hot loop must not allocate). */
  readonly keys: readonly string[];
  /** cumulative[i]: the share of reads that go to the i + 1 most popular keys. */
  private readonly cumulative: Float64Array;

  constructor(count: number, exponent: number) {
    if (!(count >= 1)) throw new Error('damper: Zipf keys need at least one key');
    this.keys = Array.from({ length: count }, (_, i) => `key:${i}`);
    this.cumulative = new Float64Array(count);
    let sum = 0;
    for (let r = 1; r <= count; r++) this.cumulative[r - 1] = sum += 1 / r ** exponent;
    for (let i = 0; i < count; i++) this.cumulative[i]! /= sum;
  }

  /** The key one draw of `random` reads. */
  pick(random: () => number): string {
    const u = random();
    const c = this.cumulative;
    let lo = 0;
    let hi = c.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (u < c[mid]!) hi = mid;
      else lo = mid + 1;
    }
    return this.keys[lo]!;
  }

  /** The share of reads that go to the `top` most popular keys (0 for none, 1 for all). */
  shareOfTop(top: number): number {
    if (top <= 0) return 0;
    return this.cumulative[Math.min(this.keys.length, Math.floor(top)) - 1]!;
  }
}
