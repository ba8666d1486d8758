/**
 * One key's state in the in-process tier. A key may have a value, an error
 * record, or both: the two are kept apart because an error is not a value
 * (principle 1). A failed load updates `failures`, `retryAt` and `error` and
 * never touches `value`.
 */
export interface Entry<V> {
  /** The last known good value; meaningful only when `hasValue`. */
  value: V;
  hasValue: boolean;
  /** Until this instant the value is fresh. */
  freshUntil: number;
  /** Until this instant the value may be served stale (`freshUntil + staleFor`). */
  staleUntil: number;
  /** How long the load that produced `value` took, ms: the `delta` of early refresh. */
  loadMs: number;
  /** Consecutive failed loads (errors, timeouts, invalid values); 0 after a success. */
  failures: number;
  /** No load may start before this instant (error backoff); 0 when not backing off. */
  retryAt: number;
  /** The last failure, given to callers that have no value while the key backs off. */
  error: unknown;
  /** The value's tags (`invalidateTags` makes it stale), or undefined when it has none. */
  tags: readonly string[] | undefined;
}

/** An entry that records only failures: the key has never had a valid value. */
export function emptyEntry<V>(): Entry<V> {
  return { value: undefined as V, hasValue: false, freshUntil: 0, staleUntil: 0, loadMs: 0, failures: 0, retryAt: 0, error: undefined, tags: undefined };
}

/** An entry with a value: what {@link isFresh} and {@link isServable} narrow to (an entry that fails them may still hold an error record). */
export type Valued<V> = Entry<V> & { hasValue: true };

// The rules on an entry, written once: what the cache, its warm-up and its
// loads ask of a key's state. Each takes the instant it judges at, read once
// by the caller, so one decision never sees two clocks.

/** Its value may be served as fresh at `now`: no load is needed. */
export function isFresh<V>(entry: Entry<V> | undefined, now: number): entry is Valued<V> {
  return entry !== undefined && entry.hasValue && now < entry.freshUntil;
}

/** Its value may be served at `now`, fresh or within its stale window. */
export function isServable<V>(entry: Entry<V> | undefined, now: number): entry is Valued<V> {
  return entry !== undefined && entry.hasValue && now < entry.staleUntil;
}

/**
 * No load may start at `now`: the key backs off after a failure (principle
 * 3), or the shared tier deferred it. A deferral only ever covers a key with a
 * value to serve meanwhile: once that value has aged out, a load may start.
 */
export function isBackingOff<V>(entry: Entry<V>, now: number): boolean {
  return now < entry.retryAt && (entry.failures > 0 || isServable(entry, now));
}

