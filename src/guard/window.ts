import { type Clock } from '../time/clock.js';

/**
 * Counts over a sliding window of time, kept in a fixed ring of buckets: the
 * memory is `slots × fields` numbers whatever the call rate, and nothing is
 * recorded per call. The retry budget and the adaptive throttle both need
 * "how many X in the last W ms" on every call of a dependency in trouble,
 * which is exactly when a per-call log would grow without bound.
 *
 * The window moves a bucket at a time: bucket `e` holds the events of
 * `[e·width, (e+1)·width)`, and the ring holds the current bucket and the
 * `slots − 1` before it. Older buckets are zeroed as time passes them, so an
 * event is forgotten at most `slots × width` after it happened.
 *
 * @internal
 */
export class RollingWindow {
  readonly width: number;
  readonly slots: number;
  private readonly fields: number;
  private readonly counts: Float64Array;
  /** Per field, the sum over the whole ring, kept up to date so the common query is O(1) on the hot path. */
  private readonly totals: Float64Array;
  private epoch: number;
  /** Ring slot of `epoch`, kept so the common add (same bucket as the last) does no modulo. */
  private head: number;
  /** Below this instant `epoch` is still the current bucket: the common add compares, with no division. */
  private headEnd: number;

  constructor(
    private readonly clock: Clock,
    width: number,
    slots: number,
    fields: number,
  ) {
    this.width = width;
    this.slots = slots;
    this.fields = fields;
    this.counts = new Float64Array(slots * fields);
    this.totals = new Float64Array(fields);
    this.epoch = bucketOf(clock.now(), width);
    this.head = this.slotOf(this.epoch);
    this.headEnd = endOf(this.epoch, width);
  }

  /** The ring slot of the current bucket, after zeroing the buckets time has left behind. */
  private current(): number {
    const now = this.clock.now();
    if (now < this.headEnd) return this.head;
    const e = bucketOf(now, this.width);
    // A clock that steps back (it should not: clocks are monotonic) keeps the current bucket.
    if (e > this.epoch) this.advance(e);
    return this.head;
  }

  private advance(e: number): void {
    const stale = Math.min(e - this.epoch, this.slots);
    for (let i = 1; i <= stale; i++) {
      const slot = this.slotOf(this.epoch + i);
      for (let f = 0; f < this.fields; f++) {
        this.totals[f]! -= this.counts[slot * this.fields + f]!;
        this.counts[slot * this.fields + f] = 0;
      }
    }
    this.epoch = e;
    this.head = this.slotOf(e);
    this.headEnd = endOf(e, this.width);
  }

  private slotOf(epoch: number): number {
    return ((epoch % this.slots) + this.slots) % this.slots;
  }

  /** Adds `delta` to `field` in the current bucket. */
  add(field: number, delta = 1): void {
    this.counts[this.current() * this.fields + field]! += delta;
    this.totals[field]! += delta;
  }

  /**
   * Sum of `field` over the ring as of the last `add` or `sum`, without
   * looking at the clock: for a rule checked right after an `add` at the same
   * instant (the breaker's rates on every call), where a second clock read
   * and bucket check would buy nothing.
   */
  total(field: number): number {
    return this.totals[field]!;
  }

  /** Forgets every count (a breaker that closed starts from an empty window). */
  clear(): void {
    this.counts.fill(0);
    this.totals.fill(0);
  }

  /** Sum of `field` over the `n` most recent buckets (current included); all of the ring by default. */
  sum(field: number, n = this.slots): number {
    this.current();
    if (n >= this.slots) return this.totals[field]!;
    let total = 0;
    for (let i = 0; i < n; i++) total += this.counts[this.slotOf(this.epoch - i) * this.fields + field]!;
    return total;
  }
}

/**
 * The bucket holding instant `t`. A width that is not a whole number (a 10 s
 * window in 7 buckets) makes `t / width` land a hair below an integer at a
 * bucket's exact start (10 000 / 1428.571… = 6.9999…), which kept an event one
 * bucket longer than its window: the nudge absorbs that rounding.
 */
function bucketOf(t: number, width: number): number {
  return Math.floor(t / width + 1e-9);
}

/**
 * An instant before which bucket `e` is surely still current: a hair before
 * its end, so rounding can only send an instant to {@link bucketOf}, which
 * decides, never keep one in a bucket it has left.
 */
function endOf(e: number, width: number): number {
  return (e + 1 - 2e-9) * width;
}
