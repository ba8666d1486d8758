import { type StaleReason } from './cache.js';

/**
 * What a {@link Cache} has done since it was made, and holds now: what an
 * operator reads to see a loop forming before it is an outage. Each outage in
 * docs/design.md showed first in one of these: the share of reads that reach
 * the origin (`loads ÷ requests`, Facebook 2010), stale served and backoff
 * refusals while a dependency fails, a shared tier's errors (Discord 2019).
 *
 * Every get() ends as exactly one of `hits`, `stale`, `misses` or `errors`, so
 * `requests` is their sum (a get still waiting is counted when it ends).
 * Counters only grow; `entries` and `loading` are levels now.
 */
export interface CacheStats {
  /** get() calls that ended: the sum of the four outcomes below. */
  readonly requests: number;
  /** Fresh values served from memory. */
  readonly hits: number;
  /** Values past their ttl served, for any reason: the sum of `staleBy`. */
  readonly stale: number;
  /**
   * Stale served by why: `revalidate` is routine (stale-while-revalidate, the
   * refresh runs behind the read); `error`, `backoff` and `timeout` mean the
   * origin failed or was slow and the cache covered for it. Only those three
   * are the stale ratio an operator alerts on: a cache that revalidates every
   * expired key would otherwise alarm on a healthy day.
   */
  readonly staleBy: { readonly [R in StaleReason]: number };
  /** get() calls answered by a load: this process's, one they joined, or the shared tier's copy. */
  readonly misses: number;
  /** get() calls that rejected (no value to serve). */
  readonly errors: number;
  /** Loader calls: the queries that reached the origin, every attempt of a guard's retries included, warm-up's too. */
  readonly loads: number;
  /**
   * Of those, the ones `warm()` started. Warm-up loads on purpose before the
   * reads arrive (principle 7), so they are not read-driven origin load: the
   * origin amplification counts `loads − warmLoads`.
   */
  readonly warmLoads: number;
  /** Loader calls that failed (threw, rejected, or were abandoned at their timeout or abort). */
  readonly loadErrors: number;
  /** get() calls answered from a key's backoff (its stale value or its remembered error) without a load. */
  readonly backoffRefusals: number;
  /** Loaded values that `validate` rejected: dropped, the last known good kept (principle 6). */
  readonly validationRejections: number;
  /** get() calls that joined a load already in flight rather than start one (principle 2). */
  readonly coalesced: number;
  /** Entries pushed out to bound memory, or values too large to keep. */
  readonly evictions: number;
  /** Keys held now, with a value or an error record. */
  readonly entries: number;
  /** Loads in flight now; a load superseded by a write counts until it ends, so one key can count twice. */
  readonly loading: number;
  /** The shared tier's counters, when there is one. */
  readonly shared: SharedTierStats | undefined;
}

/** What a cache's shared tier (Redis) has done, and its bus now. */
export interface SharedTierStats {
  /** Reads of a key's shared value. */
  readonly reads: number;
  /** Of those, the ones that found it fresh: an origin load saved by the cluster. */
  readonly hits: number;
  /** Calls to the store that failed, timed out, or were refused by its breaker. */
  readonly errors: number;
  /** Waits for another process's lease on a key (principle 2's cluster half). */
  readonly leaseWaits: number;
  /** Whether the invalidation bus is up now: while down, nothing in memory is fresh for longer than `freshWithoutBus`. */
  readonly busUp: boolean;
  /**
   * Times messages on the bus were found lost (a subscription the store
   * reported cut, or a hole in a sender's numbering): each made every value
   * in memory stale. Rising: subscriptions are being dropped (reconnects,
   * failovers, Redis's `client-output-buffer-limit`).
   */
  readonly busGaps: number;
  /** Tag invalidations other processes sent that reached this one (`invalidateTags`), each applied on arrival. */
  readonly tagInvalidationsHeard: number;
}

/**
 * The counters a cache keeps for {@link CacheStats}: plain fields bumped where
 * each thing happens (one increment on the hit path, nothing allocated).
 */
export class CacheCounters {
  hits = 0;
  readonly stale: { [R in StaleReason]: number } = { revalidate: 0, error: 0, backoff: 0, timeout: 0 };
  misses = 0;
  errors = 0;
  loads = 0;
  warmLoads = 0;
  loadErrors = 0;
  backoffRefusals = 0;
  validationRejections = 0;
  coalesced = 0;
  evictions = 0;

  /** The snapshot, with the levels the cache reads now. */
  snapshot(entries: number, loading: number, shared: SharedTierStats | undefined): CacheStats {
    const { hits, misses, errors } = this;
    const staleBy = { ...this.stale };
    const stale = staleBy.revalidate + staleBy.error + staleBy.backoff + staleBy.timeout;
    return {
      requests: hits + stale + misses + errors,
      hits,
      stale,
      staleBy,
      misses,
      errors,
      loads: this.loads,
      warmLoads: this.warmLoads,
      loadErrors: this.loadErrors,
      backoffRefusals: this.backoffRefusals,
      validationRejections: this.validationRejections,
      coalesced: this.coalesced,
      evictions: this.evictions,
      entries,
      loading,
      shared,
    };
  }
}
