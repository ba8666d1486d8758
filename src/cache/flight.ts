import assert from 'node:assert/strict';

/** How a load ended: data, never a rejection, so no rejection goes unhandled however many callers leave early. */
export type Outcome<V> = { readonly ok: true; readonly value: V } | { readonly ok: false; readonly error: unknown };

/**
 * Why a load was started, which decides how it goes:
 * - `read`: a caller waits for it (nothing to serve meanwhile); it queues in
 *   the origin budget at the call's priority.
 * - `revalidate`: stale-while-revalidate; the caller got the stale value, so
 *   the load runs at `background` priority and does not queue.
 * - `warm`: started by `cache.warm`; it does not queue (it takes only spare
 *   capacity) yet keeps its own priority, and a refusal by the origin budget
 *   is not held against the key.
 * - `early`: an early (XFetch) refresh of a value still fresh; a fresh copy in
 *   the shared tier does not end it.
 */
export type FlightKind = 'read' | 'revalidate' | 'warm' | 'early';

/** One load in flight for one key, shared by every caller that wants it. */
export interface Flight<V> {
  readonly kind: FlightKind;
  readonly promise: Promise<Outcome<V>>;
  /** Set by `set`/`delete`/`clear`: the result still reaches its waiters but is not stored. */
  readonly superseded: boolean;
  /** Tags invalidated while it flew: a value it brings carrying one may predate that, and is stored stale. */
  readonly invalidatedTags: readonly string[] | undefined;
  /**
   * The superseded flight of the same key still running when this one
   * started, or undefined: this flight calls the origin only once that one
   * has landed (see {@link Flights}).
   */
  readonly predecessor: Flight<V> | undefined;
}

/** The mutable side of a flight, held by {@link Flights} alone. */
interface OwnedFlight<V> extends Flight<V> {
  promise: Promise<Outcome<V>>;
  superseded: boolean;
  invalidatedTags: string[] | undefined;
}

/**
 * The loads in flight of one cache, at most one per key (principle 2, in
 * this process; `ClusterFlight`, cluster-flight.ts, is its cluster half). Go's
 * `singleflight` is the model: a map of calls in flight; a caller that finds
 * one joins it; `supersede` plays `Forget`: the flight runs to its end for
 * those waiting on it, but a newer write (set, delete, clear) has taken the
 * key, so the cache must not store what it brings.
 *
 * Unlike `Forget`, a superseded flight still holds the key's place at the
 * origin until it lands: the next flight of the key is joinable at once, but
 * calls the origin only after its predecessor has landed. Otherwise every
 * `set` during a load that hangs would let one more load of the key start
 * against the origin that hangs it (principle 2), each one held until its
 * load timeout. The successor never takes its predecessor's result: that
 * value was read before the write that superseded it.
 */
export class Flights<V> {
  private readonly byKey = new Map<string, OwnedFlight<V>>();
  /** Superseded flights not yet landed, the newest per key: what the key's next flight waits for. */
  private readonly draining = new Map<string, OwnedFlight<V>>();

  /** Loads in flight now, superseded ones that have not landed included: each may be holding the origin. */
  get size(): number {
    return this.byKey.size + this.draining.size;
  }

  /** The flight for `key`, to join, or undefined. */
  get(key: string): Flight<V> | undefined {
    return this.byKey.get(key);
  }

  has(key: string): boolean {
    return this.byKey.has(key);
  }

  /**
   * Starts the one flight for `key`: `run` gets the flight (to read its kind
   * and whether it was superseded) and returns its outcome. The flight lands
   * (leaves the map) once that outcome is decided, before its waiters hear
   * it, so a caller who reads the key on the outcome's heels starts a new
   * load rather than join the old one.
   */
  start(key: string, kind: FlightKind, run: (flight: Flight<V>) => Promise<Outcome<V>>): Flight<V> {
    assert(!this.byKey.has(key), 'one load per key in flight');
    const predecessor = this.draining.get(key);
    const flight: OwnedFlight<V> = { kind, promise: undefined as unknown as Promise<Outcome<V>>, superseded: false, invalidatedTags: undefined, predecessor };
    this.byKey.set(key, flight);
    // singleflight's doCall: the call runs, the flight leaves the map, then its waiters hear the outcome.
    flight.promise = run(flight).then((outcome) => {
      this.land(key, flight);
      return outcome;
    });
    return flight;
  }

  /** Ends `flight`'s hold on `key` (its outcome is decided): the key's place, or its place at the origin once superseded. */
  private land(key: string, flight: Flight<V>): void {
    if (this.byKey.get(key) === flight) this.byKey.delete(key);
    else if (this.draining.get(key) === flight) this.draining.delete(key);
  }

  /**
   * A newer write took `key`: its flight, if any, still answers its waiters
   * but stores nothing, and holds the origin until it lands. A flight that
   * has a predecessor waits for it, so only the newest superseded flight of a
   * key need be remembered.
   */
  supersede(key: string): void {
    const flight = this.byKey.get(key);
    if (flight === undefined) return;
    flight.superseded = true;
    this.byKey.delete(key);
    this.draining.set(key, flight);
  }

  /** `tags` were invalidated: every flight now in the air learns it (see {@link Flight.invalidatedTags}). */
  invalidateTags(tags: readonly string[]): void {
    for (const flight of this.byKey.values()) (flight.invalidatedTags ??= []).push(...tags);
  }

  /** Every key at once (`clear`). */
  supersedeAll(): void {
    for (const [key, flight] of this.byKey) {
      flight.superseded = true;
      this.draining.set(key, flight);
    }
    this.byKey.clear();
  }
}
