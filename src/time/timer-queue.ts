import { type Timer } from './clock.js';

const NOOP = (): void => {};

/**
 * One timer of a {@link TimerQueue}, and the handle its setter gets back: one
 * object per timer rather than an entry, a handle and a `cancel` closure, since
 * the lab sets about two million of them a run.
 */
export class QueuedTimer implements Timer {
  /** True once cancelled or fired: nothing it does counts any more. */
  cancelled = false;

  constructor(
    private readonly queue: TimerQueue,
    readonly due: number,
    readonly seq: number,
    public fn: () => void,
  ) {}

  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    // Let go of the callback now, not when the sweep or the top of the heap
    // reaches it: what it holds (a call's signal, its closures) dies young.
    this.fn = NOOP;
    this.queue.forget();
  }
}

/**
 * A binary min-heap of timers ordered by (due time, insertion sequence). The
 * sequence makes ties fire in the order they were set, which keeps virtual runs
 * deterministic; a plain sort by time alone would not. The order is total, so
 * the heap's shape never changes which timer comes out next.
 *
 * A cancelled timer stays in the heap until it reaches the top, unless the
 * cancelled ones come to outnumber the live ones: then they are swept out in
 * one pass. Cancelling is the common fate of a timer (a timeout whose call
 * answered first), and the lab's 5 s client timeouts otherwise kept the heap
 * several times larger than the live timers, every push and pop paying for it.
 */
export class TimerQueue {
  private heap: QueuedTimer[] = [];
  /** Timers in the heap not cancelled nor fired. */
  private alive = 0;

  /** Timers still scheduled and not cancelled. */
  get live(): number {
    return this.alive;
  }

  push(t: QueuedTimer): void {
    this.alive++;
    const h = this.heap;
    let i = h.length;
    h.push(t);
    // Sift up by moving parents down into the hole: one write per level, no swaps.
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = h[parent]!;
      if (!before(t, p)) break;
      h[i] = p;
      i = parent;
    }
    h[i] = t;
  }

  /** The earliest timer that is not cancelled, dropping cancelled ones on the way. */
  peek(): QueuedTimer | undefined {
    const h = this.heap;
    while (h.length > 0 && h[0]!.cancelled) this.removeTop();
    return h[0];
  }

  /** Takes out the earliest live timer (the one {@link peek} returns) and marks it spent: a later `cancel` is a no-op. */
  take(): QueuedTimer | undefined {
    const top = this.peek();
    if (top === undefined) return undefined;
    this.removeTop();
    top.cancelled = true;
    this.alive--;
    return top;
  }

  /** Called by a timer as it is cancelled. */
  forget(): void {
    this.alive--;
    // Sweep when the dead outnumber the living; amortised O(1) per cancel.
    if (this.heap.length > 64 && this.alive * 2 < this.heap.length) this.sweep();
  }

  private removeTop(): void {
    const h = this.heap;
    const last = h.pop()!;
    const n = h.length;
    if (n === 0) return;
    // Sift the last element down from the root into the hole.
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && before(h[r]!, h[l]!) ? r : l;
      const child = h[c]!;
      if (!before(child, last)) break;
      h[i] = child;
      i = c;
    }
    h[i] = last;
  }

  /** Drops every cancelled timer and rebuilds the heap (Floyd's, O(n)). */
  private sweep(): void {
    const h = this.heap.filter((t) => !t.cancelled);
    for (let i = (h.length >> 1) - 1; i >= 0; i--) {
      const t = h[i]!;
      let j = i;
      for (;;) {
        const l = 2 * j + 1;
        if (l >= h.length) break;
        const r = l + 1;
        const c = r < h.length && before(h[r]!, h[l]!) ? r : l;
        const child = h[c]!;
        if (!before(child, t)) break;
        h[j] = child;
        j = c;
      }
      h[j] = t;
    }
    this.heap = h;
  }
}

function before(a: QueuedTimer, b: QueuedTimer): boolean {
  return a.due < b.due || (a.due === b.due && a.seq < b.seq);
}
