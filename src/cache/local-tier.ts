import assert from 'node:assert/strict';
import { type Events } from '../events.js';
import { type Backoff } from '../guard/backoff.js';
import { MemoryStore } from '../stores/memory.js';
import { type Clock } from '../time/clock.js';
import { type CacheEvents } from './cache.js';
import { emptyEntry, type Entry, isServable } from './entry.js';
import { type ResolvedLoadOptions } from './options.js';
import { refusedByBudget } from './refusal.js';
import { type SnapshotEntry } from './snapshot.js';
import { type CacheCounters } from './stats.js';
import { TagIndex } from './tags.js';
import { invalidity } from './validate.js';

/** Where a stored value came from: only a value this process loaded is a `load` event. */
export type Source = 'load' | 'shared' | 'set';

/** What the in-process tier is made with: the cache's own parts, and its memory bounds. */
export interface LocalTierParts<V> {
  readonly clock: Clock;
  /** The clock's `random`, bound. */
  readonly random: () => number;
  readonly backoff: Backoff;
  readonly events: Events<CacheEvents>;
  readonly counts: CacheCounters;
  /** Share of a ttl by which a value's freshness may be cut at random (`ttlJitter`). */
  readonly ttlJitter: number;
  readonly maxEntries: number;
  readonly maxBytes: number | undefined;
  readonly sizeOf: ((value: V, key: string) => number) | undefined;
  /** The longest a value stored now may be fresh, ms: `freshWithoutBus` while the shared tier's bus is lost, else unbounded. */
  readonly freshCap: () => number;
}

/**
 * The in-process tier (L1): each key's {@link Entry} (its value, windows,
 * error record and tags) and every rule that writes one. Reads of an entry go
 * through the rules in entry.ts; writes come here, so "an error is not a
 * value" and "a stale window starts where freshness ends" are asserted in the
 * one place entries change. The read path (read-path.ts) and the cache's
 * public calls (cache.ts) decide *when*; this says *what* a key's state
 * becomes.
 */
export class LocalTier<V> {
  /** The bounded map of entries (lru-cache). Read directly by the hit path: one lookup, no call in between. */
  readonly store: MemoryStore<Entry<V>>;
  /** Which keys carry which tag: `staleTags` finds them without a scan. */
  private readonly tagged = new TagIndex();
  private readonly parts: LocalTierParts<V>;

  constructor(parts: LocalTierParts<V>) {
    this.parts = parts;
    const size = parts.sizeOf;
    this.store = new MemoryStore<Entry<V>>({
      maxEntries: parts.maxEntries,
      maxBytes: parts.maxBytes,
      sizeOf: size === undefined ? undefined : (e, key) => (e.hasValue ? size(e.value, key) : 1),
      onEvict: (key, entry) => {
        this.tagged.remove(key, entry.tags);
        this.evicted(key, 'capacity');
      },
    });
  }

  /** Keys held (with a value or an error record). */
  get size(): number {
    return this.store.size;
  }

  peek(key: string): Entry<V> | undefined {
    return this.store.peek(key);
  }

  /** How long a value stored now stays fresh: its ttl (or `absentTtl`), shortened by jitter only (never fresh for longer than its ttl). */
  freshFor(value: V, o: Pick<ResolvedLoadOptions, 'ttl' | 'absentTtl'>): number {
    const ttl = value === undefined ? o.absentTtl : o.ttl;
    return ttl * (1 - this.parts.ttlJitter * this.parts.clock.random());
  }

  /**
   * Stores a good value, fresh for `freshMs` and servable for `servableMs`
   * from now, backoff cleared. While the shared tier's bus is lost, nothing is
   * fresh for longer than `freshWithoutBus`: an invalidation could not reach us.
   * Only a value this process loaded is a `load` event: a `set` or a copy from
   * the shared tier took no load here, and a `load` with `ms: 0` would drag
   * down every load-duration histogram built on the event.
   */
  commit(key: string, value: V, freshMs: number, servableMs: number, loadMs: number, source: Source, tags: readonly string[] | undefined): void {
    const { clock, events } = this.parts;
    const now = clock.now();
    const fresh = Math.min(freshMs, this.parts.freshCap());
    const entry: Entry<V> = { value, hasValue: true, freshUntil: now + fresh, staleUntil: now + servableMs, loadMs, failures: 0, retryAt: 0, error: undefined, tags };
    assert(fresh >= 0 && entry.staleUntil >= entry.freshUntil, 'a stale window starts where freshness ends');
    const before = this.store.peek(key)?.tags;
    if (this.store.set(key, entry)) {
      this.tagged.replace(key, before, tags);
    } else {
      this.tagged.remove(key, before);
      this.store.delete(key);
      this.evicted(key, 'oversize');
    }
    if (source === 'load' && events.has('load')) events.emit('load', { key, ms: loadMs, absent: value === undefined });
  }

  /**
   * Stores a restored value (`cache.restore`) as it is given: windows,
   * tags, and the key's error record if it had one. False when it is too
   * large to keep (reported as an eviction).
   */
  restore(key: string, entry: Entry<V>): boolean {
    const before = this.store.peek(key)?.tags;
    if (!this.store.set(key, entry)) {
      this.evicted(key, 'oversize');
      return false;
    }
    this.tagged.replace(key, before, entry.tags);
    return true;
  }

  /**
   * Records a failed load. The value, if any, is untouched: an error is not a
   * value (principle 1). The key backs off for a capped, jittered, growing
   * delay (principle 3); with a shared tier, `failures` and `retryInMs` are
   * the cluster's, so backoff grows per key, not per process.
   */
  fail(key: string, error: unknown, ms: number, failures?: number, retryInMs?: number): void {
    const { clock, events } = this.parts;
    const now = clock.now();
    let entry = this.store.peek(key);
    if (entry === undefined) {
      entry = emptyEntry<V>();
      this.store.set(key, entry);
    }
    const had = entry.hasValue;
    const kept = entry.value;
    entry.failures = failures ?? entry.failures + 1;
    let delay = retryInMs ?? this.parts.backoff.delay(entry.failures, this.parts.random);
    // Refused by the origin budget while a value is served: the budget is a
    // queue for refreshes, not an outage, so the retry waits at most
    // REFUSED_RETRY_MAX_MS (an exponential backoff to 30 s would leave the key
    // stale that long for being one of many due at once).
    if (refusedByBudget(error) && entry.hasValue) delay = Math.min(delay, REFUSED_RETRY_MAX_MS * (1 - 0.2 * clock.random()));
    entry.retryAt = now + delay;
    entry.error = error;
    // Principle 1, the Facebook 2010 loop's first half: a failure is recorded beside the value, never in its place.
    assert(entry.hasValue === had && entry.value === kept, 'an error is not a value: a failed load leaves the value as it was');
    const invalid = invalidity(error);
    if (invalid !== undefined) {
      events.emit('invalid', { key, reason: invalid.reason, issues: invalid.issues, failures: entry.failures, retryInMs: delay, ms });
    } else {
      events.emit('error', { key, error, failures: entry.failures, retryInMs: delay, ms });
    }
  }

  /** No load for `key` before `ms` from now, without counting a failure (the shared tier asked us to look again later). */
  defer(key: string, ms: number): void {
    const entry = this.store.peek(key);
    if (entry !== undefined) entry.retryAt = Math.max(entry.retryAt, this.parts.clock.now() + ms);
  }

  /** Another process refilled `key`: our copy is outdated but still the last known good, stale from now. */
  expire(key: string): void {
    const entry = this.store.peek(key);
    if (entry !== undefined && entry.hasValue) {
      entry.freshUntil = Math.min(entry.freshUntil, this.parts.clock.now());
      entry.retryAt = 0;
    }
  }

  /** Forgets `key`: value, error record, tags. Whether it was held. */
  delete(key: string): boolean {
    this.tagged.remove(key, this.store.peek(key)?.tags);
    return this.store.delete(key);
  }

  clear(): void {
    this.store.clear();
    this.tagged.clear();
  }

  /**
   * Every value carrying one of `tags` is stale from now: still the last
   * known good, served for its stale window (which starts now, as if the
   * value had aged out: with `staleFor: 0` it is not served at all) while it
   * is refreshed. A key backing off after failures keeps its backoff.
   * Returns how many values it made stale.
   */
  staleTags(tags: readonly string[]): number {
    const now = this.parts.clock.now();
    let staled = 0;
    for (const tag of tags) {
      for (const key of this.tagged.keysOf(tag)) {
        const entry = this.store.peek(key);
        if (entry === undefined || !entry.hasValue || entry.tags?.includes(tag) !== true) continue;
        if (entry.freshUntil > now) {
          entry.staleUntil = now + (entry.staleUntil - entry.freshUntil);
          entry.freshUntil = now;
          staled++;
        }
        if (entry.failures === 0) entry.retryAt = 0;
      }
    }
    return staled;
  }

  /**
   * No value is fresh past `until` (the bus was lost: `now + freshWithoutBus`;
   * messages on it were lost: `now`, the instant the caller read). Returns how
   * many values it made stale at once (when `until` is `now`).
   */
  capFreshness(until: number, now: number): number {
    let staled = 0;
    for (const [, entry] of this.store.entriesOldestFirst()) {
      if (entry.freshUntil <= until) continue;
      entry.freshUntil = until;
      if (until === now && entry.hasValue) staled++;
    }
    return staled;
  }

  /** The servable values, least recently used first, with the windows they have left: `cache.snapshot`'s entries. */
  servable(): SnapshotEntry<V>[] {
    const now = this.parts.clock.now();
    const entries: SnapshotEntry<V>[] = [];
    for (const [key, e] of this.store.entriesOldestFirst()) {
      if (!isServable(e, now) || e.value === undefined) continue;
      const windows = { key, value: e.value, freshMs: Math.max(0, e.freshUntil - now), servableMs: e.staleUntil - now };
      entries.push(e.tags === undefined ? windows : { ...windows, tags: e.tags });
    }
    return entries;
  }

  private evicted(key: string, reason: 'capacity' | 'oversize'): void {
    this.parts.counts.evictions++;
    this.parts.events.emit('evict', { key, reason });
  }
}

/** Longest wait before a key whose refresh the origin budget refused tries again, ms. */
const REFUSED_RETRY_MAX_MS = 1_000;
