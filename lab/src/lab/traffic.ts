/**
 * Open-loop traffic: how many requests arrive in a step, and for which key.
 * Both draw from one seeded source that belongs to the traffic alone, so the
 * naive and damper variants of a scenario see exactly the same requests.
 */

/** Draws a Poisson-distributed count with mean `lambda` (Knuth's method; the lab's per-step means are small). */
export function poisson(lambda: number, random: () => number): number {
  if (lambda <= 0) return 0;
  if (lambda > 30) {
    // Normal approximation, exact enough for counts this large and O(1).
    const u = 1 - random();
    const v = random();
    const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
    return Math.max(0, Math.round(lambda + Math.sqrt(lambda) * z));
  }
  const limit = Math.exp(-lambda);
  let k = 0;
  let p = random();
  while (p > limit) {
    k++;
    p *= random();
  }
  return k;
}

/** Picks keys: named hot keys by their share, the remaining share uniformly over `tailCount` tail keys. */
export class KeyPicker {
  private readonly cumulative: number[];
  private readonly hot: string[];
  private readonly tail: string[];

  constructor(hot: readonly { key: string; share: number }[], tailCount: number) {
    this.hot = hot.map((h) => h.key);
    let sum = 0;
    this.cumulative = hot.map((h) => (sum += h.share));
    // Key strings are built once: the hot loop must not allocate per request.
    this.tail = Array.from({ length: tailCount }, (_, i) => `tail:${i}`);
  }

  /** Every key this picker can return. */
  get keys(): readonly string[] {
    return [...this.hot, ...this.tail];
  }

  pick(random: () => number): string {
    const u = random();
    const c = this.cumulative;
    for (let i = 0; i < c.length; i++) if (u < c[i]!) return this.hot[i]!;
    const hotShare = c.length === 0 ? 0 : c[c.length - 1]!;
    // Map the rest of [hotShare, 1) onto the tail.
    const i = Math.floor(((u - hotShare) / (1 - hotShare)) * this.tail.length);
    return this.tail[Math.min(i, this.tail.length - 1)] ?? this.hot[this.hot.length - 1]!;
  }
}
