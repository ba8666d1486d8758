/**
 * Consistent hashing with virtual nodes, as a cache cluster's clients place
 * keys on its nodes (ketama, twemproxy, Discord's own ring). Each node owns
 * `vnodes` points on a 32-bit circle; a key belongs to the first point at or
 * after its hash. Removing a node (an ejection) moves only the keys that were
 * on it, each to the next point clockwise: keys on the other nodes stay where
 * they were. The moved keys arrive cold on their new nodes: misses.
 */
export class HashRing {
  private points: Uint32Array = new Uint32Array(0);
  private owners: Int32Array = new Int32Array(0);
  private readonly members = new Set<number>();

  /** `vnodes` points per node: more spread the keys more evenly. */
  constructor(private readonly vnodes = 160) {}

  /** Nodes on the ring, ascending. */
  get nodes(): number[] {
    return [...this.members].sort((a, b) => a - b);
  }

  has(node: number): boolean {
    return this.members.has(node);
  }

  add(node: number): void {
    if (this.members.has(node)) return;
    this.members.add(node);
    this.rebuild();
  }

  remove(node: number): void {
    if (!this.members.delete(node)) return;
    this.rebuild();
  }

  /** The node that owns `key`; -1 when the ring is empty. */
  nodeOf(key: string): number {
    const n = this.points.length;
    if (n === 0) return -1;
    const h = fnv1a(key);
    // First point ≥ h, wrapping around to the first point.
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.points[mid]! < h) lo = mid + 1;
      else hi = mid;
    }
    return this.owners[lo === n ? 0 : lo]!;
  }

  private rebuild(): void {
    const all: { point: number; owner: number }[] = [];
    for (const node of this.members) {
      for (let v = 0; v < this.vnodes; v++) all.push({ point: fnv1a(`node-${node}#${v}`), owner: node });
    }
    // Ties (two points on one hash) go to the lower node, so placement never depends on insertion order.
    all.sort((a, b) => a.point - b.point || a.owner - b.owner);
    this.points = Uint32Array.from(all, (p) => p.point);
    this.owners = Int32Array.from(all, (p) => p.owner);
  }
}

/** FNV-1a, 32 bits, with a final avalanche (murmur3's fmix32) so short, similar keys spread over the circle. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * The reads/s a ring of nodes answers of `offered` that need a node: each
 * node in the ring gets an even share (its virtual nodes make it so, within
 * a few per cent) and answers up to its `capacities[i]` (calls/s left; 0
 * for a node that is down); a node out of the ring (`null`) gets none, its
 * keys having moved to the others. A bound's arithmetic, not a simulation.
 */
export function ringThroughput(capacities: readonly (number | null)[], offered: number): number {
  const inRing = capacities.filter((c): c is number => c !== null);
  const perNode = inRing.length === 0 ? 0 : offered / inRing.length;
  return inRing.reduce((sum, c) => sum + Math.min(perNode, c), 0);
}
