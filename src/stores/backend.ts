/**
 * The shared tier's backend: the few atomic operations damper's shared-tier
 * logic (leases and fail-closed rules, `src/cache/cluster-flight.ts`; breaker,
 * time limit and invalidation bus, `src/cache/shared-tier.ts`) needs from a
 * store that every process sees. `RedisStore` implements it over
 * Redis or Redis Cluster; the incident lab implements it over simulated cache
 * nodes, so the same lease and breaker code runs in both.
 *
 * Keys arrive namespaced and opaque. Tags (`markTag`, `tagAge`) are a space of
 * their own: a tag and a key spelled alike are kept apart. A backend keeps, per key, three things
 * that must live together (one Redis Cluster slot):
 * - the value: an opaque string (damper's envelope) with a time to live;
 * - the lease: a token, or a failure marker, with its own time to live;
 * - the failure count of the key's last loads, kept across leases so backoff
 *   grows cluster-wide, not per process.
 *
 * Remaining lifetimes are reported as durations measured on the backend's own
 * clock (Redis `PTTL`), never as instants: processes on different machines do
 * not share a clock, and a duration needs none.
 *
 * Every method may reject (connection lost, timeout of the backend's own); the
 * shared tier bounds each call with its own timeout and breaker, so a backend
 * need not. No method may throw synchronously.
 */
export interface SharedBackend {
  /** The value of `key` and its remaining lifetime in ms, or `undefined` when there is none. */
  read(key: string): Promise<SharedRead | undefined>;

  /**
   * Takes the lease on `key` for `ttlMs` with `token` unless a lease (or a
   * failure marker) is held. Atomic: of any number of concurrent callers in
   * any number of processes, at most one is granted.
   */
  acquire(key: string, token: string, ttlMs: number): Promise<LeaseGrant>;

  /**
   * Stores `value` for `ttlMs` if and only if `token` still holds the lease,
   * then drops the lease and the failure count. Returns false, storing
   * nothing, when the lease is gone: it expired, or a `write`/`remove` came
   * after it was granted, so this value may be older than that write.
   */
  fill(key: string, token: string, value: string, ttlMs: number): Promise<boolean>;

  /**
   * The lease holder's load failed: if `token` still holds the lease, replace
   * it with a failure marker for `backoffMs` (no process loads the key until it
   * expires) and record `failures`. Returns false when the lease was gone.
   */
  fail(key: string, token: string, failures: number, backoffMs: number): Promise<boolean>;

  /** Drops the lease if `token` holds it (the holder gave up without a result worth recording). */
  release(key: string, token: string): Promise<void>;

  /** Stores `value` unconditionally for `ttlMs` and drops any lease and failure count (an explicit `set`). */
  write(key: string, value: string, ttlMs: number): Promise<void>;

  /** Removes the value, the lease and the failure count: a lease granted before this can no longer fill. */
  remove(key: string): Promise<void>;

  /**
   * Records that `tag` was invalidated now, on the backend's clock, and keeps
   * the record for `retainMs` (a later mark replaces it). A value whose data
   * is older than the mark is stale to every reader: `cache.invalidateTags`.
   */
  markTag(tag: string, retainMs: number): Promise<void>;

  /**
   * How long ago `tag` was last marked, ms on the backend's clock (≥ 0), or
   * `undefined` when it never was or its record expired. A duration, like
   * every lifetime here: readers on other machines need no shared clock.
   */
  tagAge(tag: string): Promise<number | undefined>;

  /** Sends `message` to every subscriber of `channel`, in every process, this one included. */
  publish(channel: string, message: string): Promise<void>;

  /**
   * Delivers every message later published on `channel` to `listener` until
   * the returned function is called. Resolves once the subscription is live.
   *
   * `interrupted`, when given, is called each time the subscription may
   * have lost messages (its connection closed; it is re-made by the backend
   * if it can), as soon as the backend knows. A backend that cannot tell
   * may never call it: the shared tier also finds lost messages by their
   * numbers, at the sender's next message.
   */
  subscribe(channel: string, listener: (message: string) => void, interrupted?: () => void): Promise<() => Promise<void>>;
}

/** A value read from the shared tier. */
export interface SharedRead {
  readonly value: string;
  /** Remaining lifetime on the backend's clock, ms (> 0). */
  readonly ttlMs: number;
  /**
   * How far `ttlMs` may be from the truth, ms, when the backend estimated it
   * rather than asked (`RedisStore`'s `'server-clock'` freshness: half the
   * round trip its estimate of Redis's clock rests on). Absent when exact.
   * A reader that compares the value's age with another duration (a tag's
   * age) allows for it, towards stale.
   */
  readonly ttlErrorMs?: number;
}

/** The answer to {@link SharedBackend.acquire}. */
export type LeaseGrant =
  | {
      readonly granted: true;
      /** Failed loads recorded for the key before this lease (0 when none). */
      readonly failures: number;
    }
  | {
      readonly granted: false;
      /** `loading`: another process holds the lease; `failed`: the key backs off after a failed load. */
      readonly holder: 'loading' | 'failed';
      /** How long until the lease or the failure marker expires, ms. */
      readonly ttlMs: number;
      readonly failures: number;
    };
