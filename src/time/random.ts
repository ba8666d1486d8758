import { ArgumentError, describe } from '../errors.js';

/**
 * A small, fast, seeded pseudo-random generator (sfc32). The same seed gives the
 * same sequence on every machine, which is what makes a lab run reproducible.
 * It is not cryptographic: damper uses randomness only for jitter and early
 * refresh, where predictability by an attacker costs nothing.
 */
export function seededRandom(seed: number): () => number {
  // A NaN or a string would silently become seed 0: every run the same "random" one.
  if (typeof seed !== 'number' || !Number.isFinite(seed)) throw new ArgumentError(`seed must be a finite number, got ${describe(seed)}`);
  // splitmix32 spreads a small integer seed over the four words of state, so
  // seeds 1, 2, 3 do not start correlated.
  let s = seed >>> 0;
  const next = (): number => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
  let a = next();
  let b = next();
  let c = next();
  let d = next();
  return () => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4_294_967_296;
  };
}
