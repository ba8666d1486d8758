/** A key named in a scenario, with its share of all reads. */
export interface HotKey {
  readonly key: string;
  readonly share: number;
}

/**
 * Key popularity by Zipf's law: the key of rank r (1 = the most popular) of
 * `count` keys is read with probability ∝ 1 ÷ r^exponent. Exponent 0 is
 * uniform; web caches measure 0.6–1 (Breslau et al., "Web Caching and
 * Zipf-like Distributions", 1999), Brooker's cache_sim uses 1. Named `hot`
 * keys may stand beside it, each with its share of reads (Facebook 2010's
 * `sitevars`, read by a quarter of requests): the Zipf tail shares what they
 * leave. A draw is one number from the caller's source (the run's traffic,
 * src/lab/engine/streams.ts): below the hot keys' shares, a hot key; above, mapped
 * onto the tail by a binary search over its cumulative shares, built once.
 */
export class ZipfKeys {
  /** Every key, hot ones first (as given), then the tail most popular first: `key:0`, `key:1`, … (`<prefix>:<rank>`; strings built once: the hot loop must not allocate). */
  readonly keys: readonly string[];
  /** cumulative[i]: the share of the tail's reads that go to its i + 1 most popular keys. */
  private readonly cumulative: Float64Array;
  /** hotCumulative[i]: the share of all reads that go to the first i + 1 hot keys. */
  private readonly hotCumulative: readonly number[];
  /** The share of reads the hot keys take together. */
  private readonly hotShare: number;

  constructor(count: number, exponent: number, hot: readonly HotKey[] = [], prefix = 'key') {
    if (!(count >= 1)) throw new Error('damper: Zipf keys need at least one key');
    this.keys = [...hot.map((h) => h.key), ...Array.from({ length: count }, (_, i) => `${prefix}:${i}`)];
    let share = 0;
    this.hotCumulative = hot.map((h) => (share += h.share));
    this.hotShare = share;
    this.cumulative = new Float64Array(count);
    let sum = 0;
    for (let r = 1; r <= count; r++) this.cumulative[r - 1] = sum += 1 / r ** exponent;
    for (let i = 0; i < count; i++) this.cumulative[i]! /= sum;
  }

  /** The key one draw of `random` reads. */
  pick(random: () => number): string {
    let u = random();
    const hot = this.hotCumulative;
    if (hot.length > 0) {
      for (let i = 0; i < hot.length; i++) if (u < hot[i]!) return this.keys[i]!;
      // The rest of [hotShare, 1) onto the tail.
      u = (u - this.hotShare) / (1 - this.hotShare);
    }
    const c = this.cumulative;
    let lo = 0;
    let hi = c.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (u < c[mid]!) hi = mid;
      else lo = mid + 1;
    }
    return this.keys[hot.length + lo]!;
  }

  /** The share of reads that go to the first `top` keys of `keys` (hot ones first; 0 for none, 1 for all). */
  shareOfTop(top: number): number {
    const n = Math.floor(top);
    if (n <= 0) return 0;
    const hot = this.hotCumulative;
    if (n <= hot.length) return hot[n - 1]!;
    const tail = this.cumulative[Math.min(this.cumulative.length, n - hot.length) - 1]!;
    return this.hotShare + (1 - this.hotShare) * tail;
  }
}

/** Ranks summed one by one up to here; beyond, in bins of ranks 0.1 % apart (a smooth tail, summed in thousands of terms, not millions). */
const EXACT_RANKS = 10_000;
const BIN_RATIO = 1.001;

/** Σ over ranks 1…count of `f(r)`, the tail's bins each counted as its size × f at its geometric middle. */
function sumOverRanks(count: number, f: (r: number) => number): number {
  let sum = 0;
  const exact = Math.min(count, EXACT_RANKS);
  for (let r = 1; r <= exact; r++) sum += f(r);
  for (let a = exact + 1; a <= count; ) {
    const b = Math.min(count, Math.max(a, Math.floor(a * BIN_RATIO)));
    sum += (b - a + 1) * f(Math.sqrt(a * b));
    a = b + 1;
  }
  return sum;
}

/**
 * The share of reads a plain look-aside cache answers from memory in the
 * steady state, `count` keys read by Zipf's law at `exponent`, `ratePerS`
 * reads a second in all, each value kept `ttlS` from its load: a key read
 * at λ per second (Poisson) is loaded once per cycle of `ttlS` plus the
 * wait for the next read, and hit `λ × ttlS` times in it, so its hit ratio
 * is `λT ÷ (1 + λT)`; the whole is those ratios weighted by each key's
 * share of reads, the `hot` keys' beside the tail's. What an operator's
 * dashboard shows as the hit ratio.
 */
export function lookAsideHitRatio(count: number, exponent: number, ratePerS: number, ttlS: number, hot: readonly HotKey[] = []): number {
  const hit = (share: number): number => {
    const reads = ratePerS * share * ttlS;
    return (share * reads) / (1 + reads);
  };
  const hotShare = hot.reduce((sum, h) => sum + h.share, 0);
  const weight = (r: number): number => 1 / r ** exponent;
  const total = sumOverRanks(count, weight);
  const tail = hotShare >= 1 ? 0 : sumOverRanks(count, (r) => hit(((1 - hotShare) * weight(r)) / total));
  return hot.reduce((sum, h) => sum + hit(h.share), tail);
}

/** The range of exponents a scenario may give (its schema's), and so the range searched. */
export const EXPONENT_RANGE = [0, 5] as const;

/**
 * The Zipf exponent at which `count` keys (beside the `hot` ones), read
 * `ratePerS` times a second and kept `ttlS`, give a look-aside hit ratio of `hitRatio`
 * ({@link lookAsideHitRatio}, which grows with the exponent): found by
 * bisection to 1e-4. Out of reach, the nearest end of the range, and what
 * it gives, so the caller can say how far off it is.
 */
export function exponentForHitRatio(count: number, ratePerS: number, ttlS: number, hitRatio: number, hot: readonly HotKey[] = []): { readonly exponent: number; readonly reached: boolean; readonly range: readonly [number, number] } {
  const [low, high] = EXPONENT_RANGE;
  const at = (s: number): number => lookAsideHitRatio(count, s, ratePerS, ttlS, hot);
  const range = [at(low), at(high)] as const;
  if (hitRatio <= range[0]) return { exponent: low, reached: hitRatio === range[0], range };
  if (hitRatio >= range[1]) return { exponent: high, reached: hitRatio === range[1], range };
  let lo: number = low;
  let hi: number = high;
  while (hi - lo > 1e-4) {
    const mid = (lo + hi) / 2;
    if (at(mid) < hitRatio) lo = mid;
    else hi = mid;
  }
  return { exponent: Math.round(((lo + hi) / 2) * 10_000) / 10_000, reached: true, range };
}
