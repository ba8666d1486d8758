import { type Clock } from '../time/clock.js';

/**
 * Processes waiting for another process's lease on a key: woken by the bus
 * when the holder fills (or fails), else by a bounded poll. One entry per key
 * a flight waits on; a flight is already one per key in this process, so this
 * never holds more than one waiter per key in practice, but it allows more.
 */
export class LeaseWaiters {
  private readonly byKey = new Map<string, Set<() => void>>();

  /** Resolves when `key` is woken, after `ms`, or when `signal` aborts, whichever is first. Never rejects. */
  wait(key: string, ms: number, signal: AbortSignal, clock: Clock): Promise<void> {
    return new Promise<void>((resolve) => {
      let set = this.byKey.get(key);
      if (set === undefined) this.byKey.set(key, (set = new Set()));
      const waiters = set;
      const done = (): void => {
        timer.cancel();
        signal.removeEventListener('abort', done);
        waiters.delete(done);
        if (waiters.size === 0 && this.byKey.get(key) === waiters) this.byKey.delete(key);
        resolve();
      };
      const timer = clock.setTimer(done, ms);
      waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** Wakes every waiter on `key`. */
  wake(key: string): void {
    const set = this.byKey.get(key);
    if (set !== undefined) for (const done of [...set]) done();
  }

  /** Wakes everyone (on close). */
  wakeAll(): void {
    for (const key of [...this.byKey.keys()]) this.wake(key);
  }
}
