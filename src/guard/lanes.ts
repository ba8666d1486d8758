import assert from 'node:assert/strict';

/**
 * Callers waiting for a guard, by priority: one lane per rank, highest rank
 * served first, and within a lane oldest first. The order of a `WaitQueue`
 * (src/guard/wait-queue.ts), in front of the `ConcurrencyLimiter` (waiting
 * for a slot) and the `RateLimiter` (waiting for a token). Lanes are arrays
 * used as deques and exist only while they hold someone, so a queue that
 * never sees a priority pays nothing for it; abandoned waiters (timeout,
 * abort) are removed eagerly.
 */
export class PriorityLanes<W extends { readonly rank: number }> {
  /** Lanes by rank, highest first. */
  private readonly lanes: { readonly rank: number; readonly waiters: W[] }[] = [];
  private count = 0;

  /** Waiters in all lanes. */
  get size(): number {
    return this.count;
  }

  /** The rank served next, or undefined when nobody waits. */
  get topRank(): number | undefined {
    return this.lanes[0]?.rank;
  }

  /** The oldest waiter of the highest rank: the one served next in FIFO order. */
  first(): W | undefined {
    return this.lanes[0]?.waiters[0];
  }

  /** The newest waiter of the highest rank (LIFO order, for a standing queue). */
  last(): W | undefined {
    return this.lanes[0]?.waiters.at(-1);
  }

  /** The newest waiter of the lowest rank: the one to shed for a more important arrival. */
  lowest(): W | undefined {
    return this.lanes.at(-1)?.waiters.at(-1);
  }

  /** The oldest waiter of every rank. */
  *oldestOfEachRank(): Generator<W> {
    for (const lane of this.lanes) yield lane.waiters[0]!;
  }

  add(w: W): void {
    let i = this.lanes.findIndex((l) => l.rank <= w.rank);
    if (i === -1 || this.lanes[i]!.rank !== w.rank) {
      i = i === -1 ? this.lanes.length : i;
      this.lanes.splice(i, 0, { rank: w.rank, waiters: [] });
    }
    this.lanes[i]!.waiters.push(w);
    this.count++;
  }

  /** Takes `w` out if it waits; says whether it was the one served next. */
  remove(w: W): boolean {
    const i = this.lanes.findIndex((l) => l.rank === w.rank);
    if (i === -1) return false;
    const lane = this.lanes[i]!;
    const j = lane.waiters.indexOf(w);
    if (j === -1) return false;
    lane.waiters.splice(j, 1);
    this.count--;
    assert.ok(this.count >= 0, 'negative queue length');
    if (lane.waiters.length === 0) this.lanes.splice(i, 1);
    return i === 0 && j === 0;
  }
}
