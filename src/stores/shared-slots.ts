import { hasMethods } from '../config.js';
import { ConfigError } from '../errors.js';
import { type Clock } from '../time/clock.js';
import { type LeaseGrant, type SharedRead } from './backend.js';

interface Slot {
  value?: { text: string; expiresAt: number };
  lease?: { token: string; expiresAt: number };
  failures?: { count: number; expiresAt: number };
}

/** What a lease key holds while a failed load backs off; never equal to a token. */
const FAILED = '\0failed';

/**
 * The atomic operations of a shared tier (`SharedBackend`) on data held in
 * this process, synchronously, with expiries on a {@link Clock}: the
 * semantics RedisStore's Lua scripts have, in one place. `InMemorySharedStore`
 * wraps it with latency and faults; the incident lab's cache nodes each hold
 * one. Each method is one atomic step, as one script is on Redis.
 *
 * Public for whoever writes a `SharedBackend` of their own that holds its
 * data in process (a simulated cluster with its own queues and faults, as
 * the lab's, or a test double): these are the semantics every backend must
 * keep, so the shared tier's leases run over it unchanged.
 */
export class SharedSlots {
  private readonly slots = new Map<string, Slot>();
  /** Tag marks: when each tag was last invalidated, and until when the record is kept. */
  private readonly tags = new Map<string, { readonly at: number; readonly expiresAt: number }>();

  constructor(private readonly clock: Clock) {
    if (!hasMethods(clock, ['now'])) throw new ConfigError('SharedSlots needs the Clock its expiries are read on');
  }

  /** Keys holding anything (value, lease or failure count), expired parts included until next touched. */
  get size(): number {
    return this.slots.size;
  }

  read(key: string): SharedRead | undefined {
    const v = this.live(key).value;
    return v === undefined ? undefined : { value: v.text, ttlMs: v.expiresAt - this.clock.now() };
  }

  acquire(key: string, token: string, ttlMs: number): LeaseGrant {
    const slot = this.live(key);
    const failures = slot.failures?.count ?? 0;
    if (slot.lease !== undefined) return { granted: false, holder: slot.lease.token === FAILED ? 'failed' : 'loading', ttlMs: slot.lease.expiresAt - this.clock.now(), failures };
    slot.lease = { token, expiresAt: this.clock.now() + ttlMs };
    this.slots.set(key, slot);
    return { granted: true, failures };
  }

  fill(key: string, token: string, value: string, ttlMs: number): boolean {
    if (this.live(key).lease?.token !== token) return false;
    this.write(key, value, ttlMs);
    return true;
  }

  fail(key: string, token: string, failures: number, backoffMs: number): boolean {
    const slot = this.live(key);
    if (slot.lease?.token !== token) return false;
    const now = this.clock.now();
    slot.lease = { token: FAILED, expiresAt: now + backoffMs };
    // The count outlives the marker, so the next failure's backoff grows from it.
    slot.failures = { count: failures, expiresAt: now + Math.max(backoffMs * 4, 60_000) };
    return true;
  }

  release(key: string, token: string): void {
    const slot = this.live(key);
    if (slot.lease?.token === token) delete slot.lease;
  }

  /** Stores a value and drops any lease and failure count. */
  write(key: string, value: string, ttlMs: number): void {
    this.slots.set(key, { value: { text: value, expiresAt: this.clock.now() + ttlMs } });
  }

  remove(key: string): void {
    this.slots.delete(key);
  }

  markTag(tag: string, retainMs: number): void {
    const now = this.clock.now();
    this.tags.set(tag, { at: now, expiresAt: now + retainMs });
  }

  tagAge(tag: string): number | undefined {
    const mark = this.tags.get(tag);
    if (mark === undefined) return undefined;
    const now = this.clock.now();
    if (mark.expiresAt <= now) {
      this.tags.delete(tag);
      return undefined;
    }
    return now - mark.at;
  }

  clear(): void {
    this.slots.clear();
    this.tags.clear();
  }

  /** The slot of `key` with expired parts dropped (Redis expires them the same way). */
  private live(key: string): Slot {
    const slot = this.slots.get(key);
    if (slot === undefined) return {};
    const now = this.clock.now();
    if (slot.value !== undefined && slot.value.expiresAt <= now) delete slot.value;
    if (slot.lease !== undefined && slot.lease.expiresAt <= now) delete slot.lease;
    if (slot.failures !== undefined && slot.failures.expiresAt <= now) delete slot.failures;
    if (slot.value === undefined && slot.lease === undefined && slot.failures === undefined) this.slots.delete(key);
    return slot;
  }
}
