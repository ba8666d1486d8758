/**
 * A first-in first-out queue for the simulated servers (database, cache
 * nodes, the retry-storm server). An array with a moving head: `shift` on a
 * long array is O(n), and in an overload these queues hold thousands of
 * entries served one per millisecond. The dead prefix is dropped now and then
 * so memory does not grow without bound.
 */
export class Fifo<T> {
  private items: (T | undefined)[] = [];
  private head = 0;

  get size(): number {
    return this.items.length - this.head;
  }

  /** The oldest entry, left in place; undefined when empty. */
  get oldest(): T | undefined {
    return this.items[this.head];
  }

  push(item: T): void {
    this.items.push(item);
  }

  /** The oldest entry, removed; undefined when empty. */
  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head > 4096 && this.head * 2 > this.items.length) {
      this.items.splice(0, this.head);
      this.head = 0;
    }
    return item;
  }

  /** Every entry, oldest first, removed. */
  drain(): T[] {
    const rest = this.items.slice(this.head) as T[];
    this.items = [];
    this.head = 0;
    return rest;
  }
}
