import { meanMs } from '../engine/delay.js';
import { type Population } from '../schema/common.js';
import { type HotKey, ZipfKeys } from './zipf.js';

/** A population as the key sets see it: its name, its read rate, and the keys of its own, if any. */
export type KeyReader = Pick<Population, 'name' | 'rate' | 'closed'> & { readonly keys?: OwnKeys };

/** A population's own keys: `<name>:0` (the most read) … `<name>:<count − 1>`, Zipf at `exponent` (0: uniform). */
export interface OwnKeys {
  readonly count: number;
  readonly exponent: number;
}

/** The scenario's shared keys: `key:0` … `key:<count − 1>` by Zipf's law, beside the named `hot` ones. */
export interface SharedKeys {
  readonly count: number;
  readonly exponent: number;
  readonly hot?: readonly HotKey[];
}

/**
 * Reads a second a population sends at the scenario's own load: an open
 * one's rate, and each closed user at most one call per think time (a
 * bound: it also waits for its answers).
 */
export function readRate(p: Pick<Population, 'rate' | 'closed'>): number {
  return p.closed === undefined ? p.rate : (p.closed.users * 1000) / Math.max(1, meanMs(p.closed.thinkTime));
}

/**
 * The keys a service scenario's populations read: the scenario's shared
 * `keys`, read by every population without keys of its own, and each
 * population's own set (Discord 2019's push-notification settings, read by
 * their own low-priority population beside the user objects). A key's share
 * of all reads is its readers' share of the read rate times its share within
 * its set; `keys` lists every key by that share, most read first, which is
 * what a steady state fills first and what an ideal policy keeps in memory.
 */
export class KeySets {
  /** Every key, most read first (hot keys and each set's ranks in order; sets merged by share). */
  readonly keys: readonly string[];
  /** shares[i]: the share of all reads that go to keys[i]. */
  readonly shares: Float64Array;
  /** cumulative[i]: the share of all reads that go to keys[0…i]. */
  private readonly cumulative: Float64Array;
  private readonly pickers = new Map<string, (random: () => number) => string>();
  private readonly held = new Map<number, Float64Array>();

  constructor(clients: readonly KeyReader[], shared: SharedKeys | undefined) {
    const total = clients.reduce((sum, p) => sum + readRate(p), 0);
    const sets: { readonly zipf: ZipfKeys; readonly weight: number }[] = [];
    const sharedReaders = clients.filter((p) => p.keys === undefined);
    if (shared !== undefined && sharedReaders.length > 0) {
      const zipf = new ZipfKeys(shared.count, shared.exponent, shared.hot);
      sets.push({ zipf, weight: sharedReaders.reduce((sum, p) => sum + readRate(p), 0) });
      for (const p of sharedReaders) this.pickers.set(p.name, (random) => zipf.pick(random));
    }
    for (const p of clients) {
      if (p.keys === undefined) continue;
      const zipf = new ZipfKeys(p.keys.count, p.keys.exponent, [], p.name);
      sets.push({ zipf, weight: readRate(p) });
      this.pickers.set(p.name, (random) => zipf.pick(random));
    }
    // Without any reads (closed users only, or a rate of 0) each set counts alike.
    const norm = total > 0 ? total : sets.length;
    const ranked = mergeByShare(sets.map(({ zipf, weight }) => ({ zipf, weight: (total > 0 ? weight : 1) / norm })));
    this.keys = ranked.keys;
    this.shares = ranked.shares;
    this.cumulative = new Float64Array(this.shares.length);
    let sum = 0;
    this.shares.forEach((s, i) => (this.cumulative[i] = sum += s));
  }

  /** The picker of `population`'s keys, a draw of `random` each. */
  pickerOf(population: string): (random: () => number) => string {
    const picker = this.pickers.get(population);
    if (picker === undefined) throw new Error(`damper lab: population "${population}" reads no keys`);
    return picker;
  }

  /** For each of `keys`, the probability that an LRU of `capacity` entries holds it in the steady state ({@link lruHeld}; worked out once per capacity). */
  heldIn(capacity: number): Float64Array {
    let held = this.held.get(capacity);
    if (held === undefined) this.held.set(capacity, (held = lruHeld(this.shares, capacity)));
    return held;
  }

  /** The share of reads that go to the `top` most read keys (0 for none, 1 for all). */
  shareOfTop(top: number): number {
    const n = Math.min(this.keys.length, Math.floor(top));
    return n <= 0 ? 0 : this.cumulative[n - 1]!;
  }
}

/** The sets' keys merged most read first, each key's share its set's weight × its share in the set (each set is ranked already). */
function mergeByShare(sets: readonly { readonly zipf: ZipfKeys; readonly weight: number }[]): { keys: string[]; shares: Float64Array } {
  const size = sets.reduce((sum, s) => sum + s.zipf.keys.length, 0);
  const keys: string[] = [];
  const shares = new Float64Array(size);
  const next = sets.map(() => 0);
  const shareAt = (s: number): number => {
    const { zipf, weight } = sets[s]!;
    const i = next[s]!;
    return i >= zipf.keys.length ? -1 : weight * (zipf.shareOfTop(i + 1) - zipf.shareOfTop(i));
  };
  while (keys.length < size) {
    let best = 0;
    for (let s = 1; s < sets.length; s++) if (shareAt(s) > shareAt(best)) best = s;
    shares[keys.length] = shareAt(best);
    keys.push(sets[best]!.zipf.keys[next[best]!]!);
    next[best]!++;
  }
  return { keys, shares };
}

/**
 * The probability that an LRU cache of `capacity` entries holds each key in
 * the steady state, keys read independently at `shares` (Che's
 * approximation: key i is held when it was read within the cache's
 * characteristic time T, `1 − e^(−shares[i] × T)`, T chosen so the
 * probabilities add up to `capacity`). Under Zipf's law the popular keys
 * are held almost surely; under uniform reads each key alike, a random
 * subset per process (Discord 2019's processes).
 */
export function lruHeld(shares: Float64Array, capacity: number): Float64Array {
  const held = new Float64Array(shares.length);
  if (capacity >= shares.length) return held.fill(1);
  const filled = (t: number): number => shares.reduce((sum, s) => sum + -Math.expm1(-s * t), 0);
  let lo = 0;
  let hi = 1;
  // Keys nobody reads are never held: a capacity beyond the others' count is reached by none.
  while (filled(hi) < capacity && hi < 1e300) hi *= 2;
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (filled(mid) < capacity) lo = mid;
    else hi = mid;
  }
  shares.forEach((s, i) => (held[i] = -Math.expm1(-s * hi)));
  return held;
}
