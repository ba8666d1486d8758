/**
 * Probabilistic early expiration (XFetch; Vattani, Chierichetti, Lowenstein,
 * "Optimal Probabilistic Cache Stampede Prevention", VLDB 2015). Each read of a
 * fresh value refreshes it early with probability
 * `exp(−(expiry − now) / (delta · beta))`, where `delta` is how long the last
 * load took. A hot key is thus refreshed shortly before it expires by about
 * one reader, and never expires under load at all.
 *
 * The test `−delta·beta·ln(r) ≥ expiry − now` is the paper's. The early exit
 * is ours: once `expiry − now` exceeds 36·delta·beta the probability is below
 * e^−36 ≈ 2·10^−16, so the hit path skips the logarithm and the random draw
 * for all but the last moments of a value's life.
 */
export function shouldRefreshEarly(now: number, freshUntil: number, loadMs: number, beta: number, random: () => number): boolean {
  const scale = loadMs * beta;
  const left = freshUntil - now;
  if (scale <= 0 || left > 36 * scale) return false;
  return -scale * Math.log(random()) >= left;
}
