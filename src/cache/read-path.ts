import { AbortedError, type DamperError, isError, LoaderError, LoadTimeoutError, ValidationError } from '../errors.js';
import { type Events } from '../events.js';
import { type Backoff } from '../guard/backoff.js';
import { beforeAbort } from '../guard/abort.js';
import { runAbandonable } from '../guard/abandon.js';
import { type Guard } from '../guard/guard.js';
import { type Priority } from '../guard/priority.js';
import { type Clock, preciseNow, type Timer } from '../time/clock.js';
import { type CacheEvents, type Loader, type StaleReason } from './cache.js';
import { type Resolution } from './cluster-flight.js';
import { type Entry, isBackingOff, isFresh, isServable } from './entry.js';
import { type Flight, type FlightKind, Flights, type Outcome } from './flight.js';
import { HardTimeout } from './hard-timeout.js';
import { type LocalTier } from './local-tier.js';
import { type ResolvedLoadOptions } from './options.js';
import { countsAgainstKey, unreachedRefusal } from './refusal.js';
import { type Lookup, type SharedTier } from './shared-tier.js';
import { type CacheCounters } from './stats.js';
import { checkTags, sharesTag } from './tags.js';
import { type Verdict, verdictBefore, verdictWithin } from './validate.js';
import { type WarmKeyOutcome } from './warm.js';

/** What the read path is made with: the cache's parts it reads and writes through. */
export interface ReadPathParts<V> {
  readonly clock: Clock;
  /** The clock's `random`, bound. */
  readonly random: () => number;
  readonly local: LocalTier<V>;
  readonly shared: SharedTier | undefined;
  /** The origin budget: every load passes through it. */
  readonly guard: Guard;
  readonly check: ((value: V) => Verdict<V> | Promise<Verdict<V>>) | undefined;
  readonly backoff: Backoff;
  readonly defaults: ResolvedLoadOptions;
  readonly events: Events<CacheEvents>;
  readonly counts: CacheCounters;
}

/**
 * One load of one key, from its start to its outcome: what every step of it
 * needs, carried as one object rather than re-passed to each.
 */
interface Load<V> {
  readonly key: string;
  readonly flight: Flight<V>;
  readonly loader: Loader<V>;
  readonly o: ResolvedLoadOptions;
  /** The key's entry when the load started: its value is the loader's `stale`, its servability the lease's rule. */
  readonly entry: Entry<V> | undefined;
  /** Precise clock reading at the start, for the load's duration. */
  readonly started: number;
  /** When the get's `loadTimeout` ends, on the clock: the one bound of the whole load. */
  readonly deadline: number;
  /** Validates a value read from the shared tier (untrusted bytes) within what is left of the load's time. */
  readonly accept: (value: unknown) => Verdict<V> | Promise<Verdict<V>>;
  /** The tags of the value it brings: the call's, until its loader sets its own. */
  tags: readonly string[] | undefined;
}

/**
 * Everything a `get` does past a fresh hit, in the order it happens:
 *
 * 1. **memory** (`miss`): a key backing off answers from memory; else the
 *    caller joins the key's flight or starts it, and is served stale at once
 *    when it has a value to serve (stale-while-revalidate);
 * 2. **the flight** (`start`): one load per key in this process (flight.ts);
 * 3. **the shared tier's value** (`run`): fresh there, it is the answer (the
 *    L2 hit, taken without arming anything else);
 * 4. **the lease** (`resolve`, through `SharedTier.resolve`): one load per key
 *    in the cluster (cluster-flight.ts), or the store's stale value, or a
 *    deferral when the store does not answer;
 * 5. **the origin** (`fromOrigin`): through the origin budget, validated,
 *    under the load's hard timeout;
 * 6. **the outcome** (`settle`): written to memory (local-tier.ts), and
 *    handed to every caller waiting (`wait`, `answer`).
 *
 * The cache (cache.ts) is the public face: the hit path, writes, tags,
 * warm-up and snapshots; it calls `miss` and `refresh` here.
 */
export class ReadPath<V> {
  readonly flights = new Flights<V>();
  private readonly parts: ReadPathParts<V>;

  constructor(parts: ReadPathParts<V>) {
    this.parts = parts;
  }

  /** Everything but a fresh hit. Synchronous up to the wait, so a miss keeps no suspended frame; what it throws rejects `get`. */
  miss(key: string, entry: Entry<V> | undefined, loader: Loader<V>, o: ResolvedLoadOptions): V | Promise<V> {
    const { counts } = this.parts;
    if (o.signal?.aborted === true) {
      counts.errors++;
      throw new AbortedError(`get("${key}") aborted before it started`, o.signal.reason);
    }
    const now = this.parts.clock.now();
    const servable = isServable(entry, now) ? entry : undefined;

    // Backing off after a failure (or deferred by the shared tier): answer
    // from memory, do not touch the origin.
    if (entry !== undefined && isBackingOff(entry, now)) {
      counts.backoffRefusals++;
      if (servable !== undefined) return this.serveStale(key, servable, 'backoff', now);
      counts.errors++;
      throw entry.error;
    }

    // Queue for the origin budget only if this caller will wait for the result.
    const joined = this.flights.get(key);
    const flight = joined ?? this.start(key, entry, loader, o, servable === undefined || !o.staleWhileRevalidate ? 'read' : 'revalidate');
    if (servable !== undefined && o.staleWhileRevalidate) return this.serveStale(key, servable, 'revalidate', now);
    if (joined !== undefined) counts.coalesced++;
    return this.wait(key, flight, o, servable !== undefined);
  }

  /** Starts a background (early) refresh of a key that has a value, unless one runs or the key backs off. */
  refresh(key: string, entry: Entry<V>, loader: Loader<V>, now: number): void {
    if (this.flights.has(key) || isBackingOff(entry, now)) return;
    this.start(key, entry, loader, this.parts.defaults, 'early');
  }

  /** One warm-up key through the normal load path; joins a load in flight. Never rejects. */
  async warm(key: string, loader: Loader<V>, priority: Priority): Promise<WarmKeyOutcome> {
    const entry = this.parts.local.peek(key);
    const now = this.parts.clock.now();
    if (isFresh(entry, now)) return { status: 'skipped' };
    let flight = this.flights.get(key);
    if (flight === undefined) {
      if (entry !== undefined && isBackingOff(entry, now)) return entry.failures > 0 ? { status: 'failed', error: entry.error } : { status: 'skipped' };
      flight = this.start(key, entry, loader, { ...this.parts.defaults, priority }, 'warm');
    }
    const outcome = await flight.promise;
    return outcome.ok ? { status: 'loaded' } : { status: 'failed', error: outcome.error };
  }

  private start(key: string, entry: Entry<V> | undefined, loader: Loader<V>, o: ResolvedLoadOptions, kind: FlightKind): Flight<V> {
    return this.flights.start(key, kind, (flight) => this.run(key, flight, loader, o, entry));
  }

  /**
   * Runs one load to its end. Never rejects: the outcome is data, so no
   * rejection goes unhandled. The hard timeout covers the whole load (the
   * origin budget's queue, every attempt a guard makes, the loader), and is
   * handed to the guard as the load's deadline, so a retry never starts an
   * attempt that could not finish in time.
   */
  private run(key: string, flight: Flight<V>, loader: Loader<V>, o: ResolvedLoadOptions, entry: Entry<V> | undefined): Promise<Outcome<V>> {
    const { clock, shared } = this.parts;
    // Durations read the clock precisely (a load of 0.36 ms is not 0 ms); deadlines read it as every decision does.
    const started = preciseNow(clock);
    const deadline = clock.now() + o.loadTimeout;
    const load: Load<V> = { key, flight, loader, o, entry, started, deadline, accept: this.acceptBy(deadline), tags: o.tags };
    if (shared === undefined || flight.kind === 'early') return this.resolve(load, undefined);
    // The common miss in a cluster: the value is fresh in the shared tier. It
    // needs no signal, no hard-timeout timer and no lease (the store's own time
    // limit bounds the read), so none is made: this is the L2 hit path, chained
    // rather than awaited, so no suspended frame is kept per miss.
    return shared.lookup(key, load.accept).then((first) => {
      if (first.kind !== 'hit') return this.resolve(load, first);
      return this.settle(load, first);
    });
  }

  /** The rest of a load once the shared tier (if any) has no fresh value: the lease, the origin, the outcome. */
  private async resolve(load: Load<V>, first: Lookup<V> | undefined): Promise<Outcome<V>> {
    const { key, flight, o, entry, started, deadline } = load;
    const { clock, shared } = this.parts;
    // Armed for what is left of loadTimeout after the first read: the get's one bound, from its start.
    const hard = new HardTimeout(clock, key, o.loadTimeout, deadline - clock.now());
    const fromOrigin = (): Promise<V> => this.fromOrigin(load, hard);
    try {
      if (shared !== undefined) {
        const resolution = await shared.resolve<V>({
          key,
          hard,
          servable: isServable(entry, started),
          early: flight.kind === 'early',
          failures: entry?.failures ?? 0,
          deadline,
          staleFor: o.staleFor,
          freshFor: (value) => this.parts.local.freshFor(value, o),
          backoff: (failures) => this.parts.backoff.delay(failures, this.parts.random),
          accept: load.accept,
          load: fromOrigin,
          tags: () => load.tags,
        }, first);
        return this.settle(load, resolution);
      }
      const value = await fromOrigin();
      if (!flight.superseded) {
        const fresh = this.parts.local.freshFor(value, o);
        this.parts.local.commit(key, value, this.unlessTagged(flight, load.tags, fresh), fresh + o.staleFor, preciseNow(clock) - started, 'load', load.tags);
      }
      return { ok: true, value };
    } catch (thrown) {
      // Past the hard timeout, whatever a guard rejected with, the cause is the timeout.
      const error = hard.expired ?? thrown;
      if (!flight.superseded && countsAgainstKey(flight.kind, error)) this.parts.local.fail(key, error, preciseNow(clock) - started);
      return { ok: false, error };
    } finally {
      hard.cancel();
    }
  }

  /** One origin load: through the guard (the origin budget), then validated. Rejects on any failure. */
  private async fromOrigin(load: Load<V>, hard: HardTimeout): Promise<V> {
    const { key, flight, o, deadline } = load;
    const { check, counts } = this.parts;
    // Only a caller who waits queues for the origin budget; a warm-up keeps its priority, a background refresh has none.
    const wait = flight.kind === 'read';
    const context = { key, signal: hard.signal, wait, priority: wait || flight.kind === 'warm' ? o.priority : 'background', deadline };
    // A superseded load of this key still holds the origin: wait for it to land, within this load's time.
    // Its outcome is not this load's (it was read before the write that superseded it), and it never rejects.
    if (flight.predecessor !== undefined) await beforeAbort<unknown>(flight.predecessor.promise, hard.signal, () => undefined);
    let reached = false;
    let loaded: V;
    try {
      // Awaited as it was (no .catch in between): the lab's replays keep their order of microtasks.
      loaded = await this.parts.guard.run((attempt) => {
        reached = true;
        return this.callLoader(load, attempt);
      }, context);
    } catch (error) {
      // Timed out, or past its deadline, while the guard held it back (its queue): it never reached the origin (refusal.ts).
      throw reached ? error : unreachedRefusal(error, hard.expired);
    }
    if (check === undefined || loaded === undefined) return loaded;
    const checked = check(loaded);
    // The hard timeout covers validation too: an async validator that never settles ends with the load's LoadTimeoutError.
    // A synchronous verdict is awaited all the same: one microtask, as before this bound, so the lab's replays keep their order of events.
    const verdict = await (checked instanceof Promise ? verdictBefore(checked, hard.signal) : Promise.resolve(checked));
    if (!verdict.ok) {
      counts.validationRejections++;
      throw new ValidationError(key, verdict.reason, verdict.issues);
    }
    return verdict.value;
  }

  /** Applies what the shared tier decided to this process's memory, and turns it into the flight's outcome. */
  private settle(load: Load<V>, r: Resolution<V>): Outcome<V> {
    const { key, flight, o, started } = load;
    const { local, clock } = this.parts;
    const keep = !flight.superseded;
    switch (r.kind) {
      case 'hit':
        // Read before messages on the bus were found lost: it may predate an invalidation this process never got.
        if (keep) local.commit(key, r.value, started < (this.parts.shared?.lastBusGapAt ?? Number.NEGATIVE_INFINITY) ? 0 : this.unlessTagged(flight, r.tags, r.freshMs), r.servableMs, r.loadMs, 'shared', r.tags);
        return { ok: true, value: r.value };
      case 'loaded':
        if (keep && r.keep) local.commit(key, r.value, this.unlessTagged(flight, load.tags, r.freshMs), r.freshMs + o.staleFor, r.loadMs, 'load', load.tags);
        return { ok: true, value: r.value };
      case 'stale':
        // Another process refreshes it: keep the shared (newest) copy, stale, and look again later.
        if (keep) local.commit(key, r.value, 0, r.servableMs, r.loadMs, 'shared', r.tags);
        local.defer(key, r.retryInMs);
        return { ok: true, value: r.value };
      case 'deferred':
        local.defer(key, r.retryInMs);
        return { ok: false, error: r.error };
      case 'failed':
        if (keep && countsAgainstKey(flight.kind, r.error)) local.fail(key, r.error, preciseNow(clock) - started, r.failures, r.retryInMs);
        return { ok: false, error: r.error };
    }
  }

  /**
   * Calls the loader, turning every way it can misbehave into a rejection with
   * an Error, and giving up when `signal` aborts even if the loader ignores it.
   */
  private callLoader(load: Load<V>, signal: AbortSignal): Promise<V> {
    const { key, flight, loader, entry } = load;
    const { counts } = this.parts;
    const abortedLoad = (reason: unknown): Error => (isError(reason) ? reason : new AbortedError(`load of "${key}" aborted`, reason));
    if (signal.aborted) return Promise.reject(abortedLoad(signal.reason));
    counts.loads++;
    if (flight.kind === 'warm') counts.warmLoads++;
    const stale = entry !== undefined && entry.hasValue ? entry.value : undefined;
    const setTags = (tags: readonly string[]): void => {
      load.tags = checkTags('setTags', tags);
    };
    // The load's time limit is the signal's (the hard timeout, or a guard's attempt): no limit of its own.
    // A loader may return a plain value: runAbandonable starts it through startTask, which makes it a promise.
    return runAbandonable((s) => loader({ key, signal: s, stale, setTags }) as Promise<V>, {
      clock: this.parts.clock,
      parent: signal,
      at: undefined,
      timeout: () => abortedLoad(signal.reason),
      aborted: abortedLoad,
      // Whatever the loader threw, the load settles: a value that is no Error (or will not say) becomes a LoaderError.
      failure: (error) => {
        counts.loadErrors++;
        return isError(error) ? error : new LoaderError(key, error);
      },
      onAbandon: this.countLoadError,
    });
  }

  private readonly countLoadError = (): void => {
    this.parts.counts.loadErrors++;
  };

  /** Waits for a flight on behalf of one caller, who may leave early (signal, wait or soft timeout). */
  private wait(key: string, flight: Flight<V>, o: ResolvedLoadOptions, hasStale: boolean): Promise<V> {
    const soft = hasStale ? o.softTimeout : undefined;
    if (o.signal === undefined && o.waitTimeout === undefined && soft === undefined) {
      return flight.promise.then((outcome) => this.answer(key, outcome));
    }
    const { clock, counts, local } = this.parts;
    return new Promise<V>((resolve, reject) => {
      const timers: Timer[] = [];
      const { signal } = o;
      let left = false;
      const leave = (): void => {
        left = true;
        for (const t of timers) t.cancel();
        signal?.removeEventListener('abort', onAbort);
      };
      const onAbort = (): void => {
        leave();
        counts.errors++;
        reject(new AbortedError(`get("${key}") aborted while waiting for its load`, signal?.reason));
      };
      // Leaving early: serve the stale value if it is still within its window, else fail this caller only.
      const giveUp = (error: DamperError): void => {
        leave();
        const entry = local.peek(key);
        const now = clock.now();
        if (isServable(entry, now)) {
          resolve(this.serveStale(key, entry, 'timeout', now));
        } else {
          counts.errors++;
          reject(error);
        }
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      if (o.waitTimeout !== undefined) timers.push(clock.setTimer(() => giveUp(new LoadTimeoutError(key, o.waitTimeout as number, 'wait')), o.waitTimeout));
      if (soft !== undefined) timers.push(clock.setTimer(() => giveUp(new LoadTimeoutError(key, soft, 'wait')), soft));
      flight.promise.then((outcome) => {
        if (left) return;
        leave();
        try {
          resolve(this.answer(key, outcome));
        } catch (error) {
          reject(error);
        }
      });
    });
  }

  /** What a waiting caller gets from a finished load: its value, else the stale value within its window, else the error. */
  private answer(key: string, outcome: Outcome<V>): V {
    const { counts } = this.parts;
    if (outcome.ok) {
      counts.misses++;
      return outcome.value;
    }
    const entry = this.parts.local.peek(key);
    const now = this.parts.clock.now();
    if (isServable(entry, now)) return this.serveStale(key, entry, 'error', now);
    counts.errors++;
    throw outcome.error;
  }

  private serveStale(key: string, entry: Entry<V>, reason: StaleReason, now: number): V {
    const { counts, events } = this.parts;
    counts.stale[reason]++;
    if (events.has('stale')) events.emit('stale', { key, reason, ageMs: now - entry.freshUntil });
    return entry.value;
  }

  /** `freshMs`, or 0 when a value with `tags` was brought by a flight that a tag invalidation overtook: it may have read the origin before. */
  private unlessTagged(flight: Flight<V>, tags: readonly string[] | undefined, freshMs: number): number {
    return sharesTag(tags, flight.invalidatedTags) ? 0 : freshMs;
  }

  /**
   * Validates a value read from the shared tier (untrusted bytes) for a load
   * that must end by `deadline`: `validate`, or accept as is. An async verdict
   * gets what is left of the load's time: the first read of the shared tier
   * comes before the load's hard timeout is armed, and nothing else would end
   * a validator that never settles. So `loadTimeout` bounds the whole get.
   */
  private acceptBy(deadline: number): (value: unknown) => Verdict<V> | Promise<Verdict<V>> {
    const { check, clock } = this.parts;
    if (check === undefined) return acceptAny as (value: unknown) => Verdict<V>;
    return (value) => {
      const verdict = check(value as V);
      return verdict instanceof Promise ? verdictWithin(verdict, clock, Math.max(0, deadline - clock.now())) : verdict;
    };
  }
}

/** The verdict without `validate`: a shared copy is taken as it decoded. */
function acceptAny<V>(value: unknown): Verdict<V> {
  return { ok: true, value: value as V };
}
