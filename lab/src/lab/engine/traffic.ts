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
