/**
 * A binary min-heap of timers ordered by (due time, insertion sequence). The
 * sequence makes ties fire in the order they were set, which keeps virtual runs
 * deterministic; a plain sort by time alone would not.
 */
export interface QueuedTimer {
  readonly due: number;
  readonly seq: number;
  readonly fn: () => void;
  cancelled: boolean;
}

export class TimerQueue {
  private readonly heap: QueuedTimer[] = [];

  get size(): number {
    return this.heap.length;
  }

  push(t: QueuedTimer): void {
    const h = this.heap;
    h.push(t);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  /** The earliest timer that is not cancelled, dropping cancelled ones on the way. */
  peek(): QueuedTimer | undefined {
    while (this.heap.length > 0 && this.heap[0]!.cancelled) this.pop();
    return this.heap[0];
  }

  pop(): QueuedTimer | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (h.length > 0 && last !== undefined) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && before(h[l]!, h[m]!)) m = l;
        if (r < h.length && before(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }
}

function before(a: QueuedTimer, b: QueuedTimer): boolean {
  return a.due < b.due || (a.due === b.due && a.seq < b.seq);
}
