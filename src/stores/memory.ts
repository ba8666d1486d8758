import { LRUCache } from 'lru-cache';
import { integer, optionalFunction, optionsObject } from '../config.js';
import { ConfigError, describe } from '../errors.js';

/** Options for {@link MemoryStore}. */
export interface MemoryStoreOptions<E> {
  /** Most entries held. */
  maxEntries: number;
  /** Optional bound on the summed `sizeOf` of all entries. */
  maxBytes?: number | undefined;
  /** Size of one entry, for `maxBytes`. Required with it. */
  sizeOf?: ((entry: E, key: string) => number) | undefined;
  /** Called when an entry is pushed out to make room (not on delete or overwrite). */
  onEvict?: ((key: string, entry: E) => void) | undefined;
}

/** The most entries an in-process tier may be given: 2^24, about 335 MB of index allocated at once. */
export const MAX_ENTRIES = 2 ** 24;

/**
 * The in-process tier: a bounded LRU map. Storage only: freshness, staleness
 * and error state live in damper's own entries, so lru-cache is used without
 * its TTL machinery. That keeps every time read on damper's `Clock` (lru-cache
 * would otherwise read `performance.now` and arm a real timer).
 */
export class MemoryStore<E extends object> {
  private readonly lru: LRUCache<string, E>;
  private readonly sizeOf: ((entry: E, key: string) => number) | undefined;
  readonly maxBytes: number | undefined;

  constructor(storeOptions: MemoryStoreOptions<E>) {
    if (storeOptions === undefined) throw new ConfigError('MemoryStore needs options with maxEntries');
    const options = optionsObject('MemoryStore options', storeOptions);
    const max = integer('maxEntries', options.maxEntries, 1);
    // lru-cache allocates its index for `max` entries up front (≈ 20 bytes each, 200 MB for 10 million):
    // past this, a typo would take the process down at construction.
    if (max > MAX_ENTRIES) throw new ConfigError(`maxEntries must be at most ${MAX_ENTRIES} (lru-cache allocates its index for every entry up front), got ${max}`);
    this.maxBytes = options.maxBytes === undefined ? undefined : integer('maxBytes', options.maxBytes, 1);
    if (this.maxBytes !== undefined && typeof options.sizeOf !== 'function') {
      throw new ConfigError('maxBytes needs a size function (`size: (value) => bytes`) to measure entries');
    }
    this.sizeOf = this.maxBytes === undefined ? undefined : options.sizeOf;
    optionalFunction('sizeOf', options.sizeOf);
    const onEvict = optionalFunction('onEvict', options.onEvict);
    this.lru = new LRUCache<string, E>({
      max,
      ...(this.maxBytes === undefined ? {} : { maxSize: this.maxBytes }),
      ...(onEvict === undefined
        ? {}
        : {
            dispose: (entry: E, key: string, reason: LRUCache.DisposeReason) => {
              if (reason === 'evict') onEvict(key, entry);
            },
          }),
    });
  }

  get size(): number {
    return this.lru.size;
  }

  /** Reads and marks as recently used. */
  get(key: string): E | undefined {
    return this.lru.get(key);
  }

  /** Reads without touching recency. */
  peek(key: string): E | undefined {
    return this.lru.peek(key);
  }

  /**
   * Stores `entry`. Returns false, storing nothing and leaving any previous
   * entry in place, when the entry alone is larger than `maxBytes`.
   */
  set(key: string, entry: E): boolean {
    if (this.sizeOf === undefined) {
      this.lru.set(key, entry);
      return true;
    }
    const measured = this.sizeOf(entry, key);
    if (typeof measured !== 'number' || !Number.isFinite(measured) || measured < 0) {
      throw new ConfigError(`size function returned ${describe(measured)} for key "${key}"; it must return a finite number ≥ 0`);
    }
    const size = Math.max(1, Math.ceil(measured));
    if (size > (this.maxBytes as number)) return false;
    this.lru.set(key, entry, { size });
    return true;
  }

  /** Every entry, least recently used first, without touching recency: inserting them in this order rebuilds it. */
  *entriesOldestFirst(): Generator<[string, E]> {
    for (const [key, entry] of this.lru.rentries()) yield [key as string, entry as E];
  }

  delete(key: string): boolean {
    return this.lru.delete(key);
  }

  clear(): void {
    this.lru.clear();
  }
}
