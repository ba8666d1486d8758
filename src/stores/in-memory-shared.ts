import { clockOption, duration, optionsObject, or } from '../config.js';
import { type Clock } from '../time/clock.js';
import { type LeaseGrant, type SharedBackend, type SharedRead } from './backend.js';
import { SharedSlots } from './shared-slots.js';

/** Options for {@link InMemorySharedStore}. */
export interface InMemorySharedStoreOptions {
  /** Time for expiries and for the simulated round trip. Default `systemClock`. */
  clock?: Clock;
  /** Simulated one-way latency of every call, ms. Default 0 (answers on the next timer turn). */
  latencyMs?: number;
}

/**
 * A shared tier held in this process, on a {@link Clock}: the same atomic
 * operations as `RedisStore`, for several `Cache` instances that stand for
 * several processes in one test or one simulation. The incident lab runs the
 * shared-tier logic over it in virtual time; it is also a fine shared tier for
 * caches inside one process.
 *
 * Faults are injected by setting {@link outage}: `'hang'` leaves every call
 * unanswered until the outage ends (a SIGSTOPped Redis), `'error'` rejects at
 * once (a refused connection). Values survive an outage; `flush()` loses them
 * (a restarted Redis without persistence).
 */
export class InMemorySharedStore implements SharedBackend {
  private readonly clock: Clock;
  private readonly latencyMs: number;
  private readonly slots: SharedSlots;
  private readonly channels = new Map<string, Set<(message: string) => void>>();
  /** The `interrupted` callbacks of the subscriptions. */
  private readonly interruptions = new Set<() => void>();
  private readonly hung: (() => void)[] = [];
  private state: 'none' | 'hang' | 'error' = 'none';
  /**
   * Lose every bus message while commands still work: a subscriber connection
   * that died without the client noticing.
   */
  dropMessages = false;
  /** Calls answered, by operation: for tests and the lab's metrics. */
  readonly calls = { read: 0, acquire: 0, fill: 0, fail: 0, release: 0, write: 0, remove: 0, markTag: 0, tagAge: 0, publish: 0 };

  constructor(storeOptions?: InMemorySharedStoreOptions) {
    const options = optionsObject('InMemorySharedStore options', storeOptions);
    this.clock = clockOption('clock', options.clock);
    this.latencyMs = duration('latencyMs', or(options.latencyMs, 0), { timer: true });
    this.slots = new SharedSlots(this.clock);
  }

  /** The injected fault; setting `'none'` answers every call held by a `'hang'`. */
  get outage(): 'none' | 'hang' | 'error' {
    return this.state;
  }

  set outage(state: 'none' | 'hang' | 'error') {
    this.state = state;
    if (state !== 'hang') for (const resume of this.hung.splice(0)) resume();
  }

  /** Loses every value, lease and failure count (a restart without persistence). */
  flush(): void {
    this.slots.clear();
  }

  read(key: string): Promise<SharedRead | undefined> {
    return this.op('read', () => this.slots.read(key));
  }

  acquire(key: string, token: string, ttlMs: number): Promise<LeaseGrant> {
    return this.op('acquire', () => this.slots.acquire(key, token, ttlMs));
  }

  fill(key: string, token: string, value: string, ttlMs: number): Promise<boolean> {
    return this.op('fill', () => this.slots.fill(key, token, value, ttlMs));
  }

  fail(key: string, token: string, failures: number, backoffMs: number): Promise<boolean> {
    return this.op('fail', () => this.slots.fail(key, token, failures, backoffMs));
  }

  release(key: string, token: string): Promise<void> {
    return this.op('release', () => this.slots.release(key, token));
  }

  write(key: string, value: string, ttlMs: number): Promise<void> {
    return this.op('write', () => this.slots.write(key, value, ttlMs));
  }

  remove(key: string): Promise<void> {
    return this.op('remove', () => this.slots.remove(key));
  }

  markTag(tag: string, retainMs: number): Promise<void> {
    return this.op('markTag', () => this.slots.markTag(tag, retainMs));
  }

  tagAge(tag: string): Promise<number | undefined> {
    return this.op('tagAge', () => this.slots.tagAge(tag));
  }

  publish(channel: string, message: string): Promise<void> {
    return this.op('publish', () => {
      // Delivered on a later turn, as a real bus would: never inside the publisher's call.
      for (const listener of this.channels.get(channel) ?? []) this.later(() => listener(message));
    });
  }

  subscribe(channel: string, listener: (message: string) => void, interrupted?: () => void): Promise<() => Promise<void>> {
    let set = this.channels.get(channel);
    if (set === undefined) this.channels.set(channel, (set = new Set()));
    const listeners = set;
    // Wrapped so one listener subscribed twice is two subscriptions, as on Redis.
    const wrapped = (message: string): void => {
      if (this.state === 'none' && !this.dropMessages) listener(message);
    };
    const cut = interrupted === undefined ? undefined : (): void => interrupted();
    listeners.add(wrapped);
    if (cut !== undefined) this.interruptions.add(cut);
    return Promise.resolve(async () => {
      listeners.delete(wrapped);
      if (cut !== undefined) this.interruptions.delete(cut);
    });
  }

  /**
   * Cuts every subscription for a moment, as a reconnect does: each
   * subscriber is told it may have lost messages (on a later turn), and
   * stays subscribed. Messages are lost only while `dropMessages` is set.
   */
  interruptSubscriptions(): void {
    for (const cut of this.interruptions) this.later(cut);
  }

  /**
   * Runs `fn` after the simulated latency. With none, on a microtask rather
   * than a timer: the system clock's timers are unref'd, and a process whose
   * only pending work is a call to this store must not exit under it.
   */
  private later(fn: () => void): void {
    if (this.latencyMs > 0) this.clock.setTimer(fn, this.latencyMs);
    else void Promise.resolve().then(fn);
  }

  /** One call: applied after the latency, or held by a hang, or refused by an error outage. */
  private op<T>(name: keyof InMemorySharedStore['calls'], apply: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const attempt = (): void => {
        if (this.state === 'error') return reject(new Error(`shared store unavailable (${name})`));
        if (this.state === 'hang') return void this.hung.push(attempt);
        this.calls[name]++;
        resolve(apply());
      };
      this.later(attempt);
    });
  }
}
