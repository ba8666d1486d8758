import { integer, optionalFunction, optionalSignal, or, positive } from '../config.js';
import { ArgumentError, ConfigError, describe } from '../errors.js';
import { refusedByBudget } from './refusal.js';
import { checkPriority, type Priority } from '../guard/priority.js';
import { type Clock, sleep } from '../time/clock.js';

/** Options of `cache.warm(keys, loader, options)`. */
export interface WarmOptions {
  /** Most warm-up loads in flight at once. Integer ≥ 1. Default 4. */
  concurrency?: number;
  /** Most warm-up loads started per second (evenly spaced, no bursts). > 0. Default 50. */
  rate?: number;
  /**
   * Priority of the warm-up's loads in the cache's origin budget (`guard`).
   * Default `background`, so live traffic wins: a warm-up load the guard
   * sheds counts as `failed` and is not held against its key.
   */
  priority?: Priority;
  /** Stops the warm-up: no new load starts, the pacing timer is cancelled, `warm` resolves with `aborted: true`. */
  signal?: AbortSignal;
  /** Called once per key with its outcome, as soon as it is known. What it throws is ignored. */
  onKey?: (key: string, outcome: WarmKeyOutcome) => void;
}

/** What happened to one key of a warm-up. */
export type WarmKeyOutcome = { readonly status: 'loaded' } | { readonly status: 'skipped' } | { readonly status: 'failed'; readonly error: unknown };

/** The summary `cache.warm` resolves with. */
export interface WarmSummary {
  /** Keys whose value is now in the cache through this warm-up (its own load, or one it joined). */
  readonly loaded: number;
  /** Keys already fresh when their turn came: no origin call. */
  readonly skipped: number;
  /** Keys whose load failed, that back off after an earlier failure, or that the guard refused {@link WARM_MAX_TRIES} times. */
  readonly failed: number;
  /** The first 100 failures, in the order they happened. */
  readonly failures: readonly { readonly key: string; readonly error: unknown }[];
  /** Virtual or real ms on the cache's clock from start to end. */
  readonly durationMs: number;
  /** True when the signal stopped the warm-up before every key was seen. */
  readonly aborted: boolean;
}

/** The narrow view of a cache a warm-up needs (so pacing lives here, loading stays in the cache). */
export interface WarmTarget {
  readonly clock: Clock;
  /** True when `key` holds a fresh value. */
  isFresh(key: string): boolean;
  /** Loads `key` through the cache's normal path (coalescing, validation, guard) at `priority`. Never rejects. */
  load(key: string, priority: Priority): Promise<WarmKeyOutcome>;
}

const MAX_FAILURES_KEPT = 100;
/** Times one key is tried when the guard refuses it for lack of capacity (each try waits for a rate slot). */
export const WARM_MAX_TRIES = 20;

/** Checks warm-up options; throws ConfigError naming the bad one. */
export function resolveWarmOptions(o: WarmOptions | undefined): { concurrency: number; interval: number; priority: Priority; signal: AbortSignal | undefined; onKey: WarmOptions['onKey'] } {
  if (o !== undefined && (typeof o !== 'object' || o === null)) throw new ConfigError(`warm options must be an object, got ${o === null ? 'null' : typeof o}`);
  const opts = o ?? {};
  const concurrency = integer('concurrency', or(opts.concurrency, 4), 1);
  const rate = positive('rate (loads per second)', or(opts.rate, 50));
  const priority = checkPriority('priority', or<Priority>(opts.priority, 'background'));
  return { concurrency, interval: 1000 / rate, priority, signal: optionalSignal('signal', opts.signal), onKey: optionalFunction('onKey', opts.onKey) };
}

/**
 * Loads `keys` into a cache at a bounded origin rate: at most `concurrency`
 * loads in flight and load starts spaced `1000 / rate` ms apart on the
 * cache's clock (a late start never earns a burst). Fresh keys are skipped
 * without using the rate. One key's failure is recorded and the rest go on.
 */
export async function warm(target: WarmTarget, keys: Iterable<string> | AsyncIterable<string>, options: WarmOptions | undefined): Promise<WarmSummary> {
  const o = resolveWarmOptions(options);
  const iterator = openKeys(keys);
  const { clock } = target;
  const started = clock.now();
  let nextStart = started;
  let loaded = 0;
  let skipped = 0;
  let failed = 0;
  const failures: { key: string; error: unknown }[] = [];
  let done = false;
  let aborted = false;

  // One reader at a time: an arbitrary async iterator need not support concurrent next() calls.
  let reading: Promise<unknown> = Promise.resolve();
  const nextKey = (): Promise<IteratorResult<unknown>> => {
    const r = reading.then(() => iterator.next());
    reading = r.catch(() => undefined);
    return r;
  };

  const record = (key: string, outcome: WarmKeyOutcome): void => {
    if (outcome.status === 'loaded') loaded++;
    else if (outcome.status === 'skipped') skipped++;
    else {
      failed++;
      if (failures.length < MAX_FAILURES_KEPT) failures.push({ key, error: outcome.error });
    }
    try {
      o.onKey?.(key, outcome);
    } catch {
      // An observer must not stop the warm-up.
    }
  };

  const abortRequested = (): boolean => o.signal?.aborted === true;

  const worker = async (): Promise<void> => {
    while (!done && !abortRequested()) {
      const next = await nextKey();
      if (next.done === true) {
        done = true;
        return;
      }
      if (abortRequested()) return;
      const key = next.value;
      if (typeof key !== 'string' || key.length === 0) {
        record(typeof key === 'string' ? key : describe(key), { status: 'failed', error: new ArgumentError(`warm-up key must be a non-empty string, got ${key === '' ? 'an empty string' : typeof key}`) });
        continue;
      }
      if (target.isFresh(key)) {
        record(key, { status: 'skipped' });
        continue;
      }
      let outcome: WarmKeyOutcome | undefined;
      for (let tries = 1; outcome === undefined; tries++) {
        // Reserve the next start slot, then wait for it.
        const now = clock.now();
        const slot = Math.max(now, nextStart);
        nextStart = slot + o.interval;
        if (slot > now) {
          try {
            await sleep(clock, slot - now, o.signal);
          } catch {
            return; // aborted: the sleep's timer is cancelled
          }
        }
        if (abortRequested()) return;
        const result = await target.load(key, o.priority);
        // The guard had no spare capacity (live traffic has it): not the key's fault (refusal.ts); try again at a later slot.
        const refused = result.status === 'failed' && refusedByBudget(result.error);
        if (!refused || tries >= WARM_MAX_TRIES) outcome = result;
      }
      record(key, outcome);
    }
  };

  const workers = Promise.all(Array.from({ length: o.concurrency }, () => worker()));
  const signal = o.signal;
  if (signal === undefined) {
    await workers;
  } else {
    // Resolve at once on abort; loads already started finish in the cache (bounded by its loadTimeout).
    let onAbort = (): void => {};
    const abortedP = new Promise<void>((resolve) => {
      onAbort = () => resolve();
      if (signal.aborted) resolve();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    workers.catch(() => undefined); // a key source failing after the abort has no one left to tell
    await Promise.race([workers, abortedP]);
    signal.removeEventListener('abort', onAbort);
  }
  aborted = signal?.aborted === true && !done;
  if (aborted) void closeKeys(iterator);
  return { loaded, skipped, failed, failures, durationMs: clock.now() - started, aborted };
}

function openKeys(keys: Iterable<string> | AsyncIterable<string>): Iterator<unknown> | AsyncIterator<unknown> {
  if (keys !== null && typeof keys === 'object') {
    let asyncIt: unknown;
    let it: unknown;
    try {
      asyncIt = (keys as AsyncIterable<string>)[Symbol.asyncIterator];
      it = (keys as Iterable<string>)[Symbol.iterator];
    } catch (error) {
      throw new ArgumentError(`keys cannot be read: ${describe(error)}`);
    }
    if (typeof asyncIt === 'function') return (asyncIt as () => AsyncIterator<unknown>).call(keys);
    if (typeof it === 'function') return (it as () => Iterator<unknown>).call(keys);
  }
  throw new ArgumentError(`keys must be an iterable or async iterable of strings, got ${keys === null ? 'null' : typeof keys}`);
}

async function closeKeys(it: Iterator<unknown> | AsyncIterator<unknown>): Promise<void> {
  try {
    await it.return?.();
  } catch {
    // Closing is a courtesy to a generator; its failure changes nothing.
  }
}
