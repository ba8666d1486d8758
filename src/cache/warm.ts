import { integer, optionalFunction, optionalSignal, or, positive } from '../config.js';
import { ArgumentError, ConfigError, describe } from '../errors.js';
import { onAbort } from '../guard/abort.js';
import { callContext } from '../guard/guard.js';
import { ConcurrencyLimiter } from '../guard/limiter.js';
import { RateLimiter } from '../guard/rate.js';
import { refusedByBudget } from './refusal.js';
import { checkPriority, type Priority } from '../guard/priority.js';
import { type Clock, MAX_TIMER_MS } from '../time/clock.js';

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
  /** Stops the warm-up: no new load starts, keys waiting for a slot or a start leave (their timers cancelled), `warm` resolves with `aborted: true`. */
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

/** The narrow view of a cache a warm-up needs (so the warm-up's own budget lives here, loading stays in the cache). */
export interface WarmTarget {
  readonly clock: Clock;
  /** True when `key` holds a fresh value. */
  isFresh(key: string): boolean;
  /** Loads `key` through the cache's normal path (coalescing, validation, guard) at `priority`. Never rejects. */
  load(key: string, priority: Priority): Promise<WarmKeyOutcome>;
}

const MAX_FAILURES_KEPT = 100;
const NEVER_ABORTS = callContext().signal;
/** Times one key is tried when the guard refuses it for lack of capacity (each try waits for a start of its own). */
export const WARM_MAX_TRIES = 20;

interface ResolvedWarmOptions {
  readonly concurrency: number;
  readonly rate: number;
  readonly priority: Priority;
  /** The caller's, or one that never aborts. */
  readonly signal: AbortSignal;
  readonly onKey: WarmOptions['onKey'];
}

/** Checks warm-up options; throws ConfigError naming the bad one. */
export function resolveWarmOptions(o: WarmOptions | undefined): ResolvedWarmOptions {
  if (o !== undefined && (typeof o !== 'object' || o === null)) throw new ConfigError(`warm options must be an object, got ${o === null ? 'null' : typeof o}`);
  const opts = o ?? {};
  const concurrency = integer('concurrency', or(opts.concurrency, 4), 1);
  const rate = positive('rate (loads per second)', or(opts.rate, 50));
  const priority = checkPriority('priority', or<Priority>(opts.priority, 'background'));
  return { concurrency, rate, priority, signal: optionalSignal('signal', opts.signal) ?? NEVER_ABORTS, onKey: optionalFunction('onKey', opts.onKey) };
}

/**
 * Loads `keys` into a cache at a bounded origin rate: at most `concurrency`
 * keys at a time ({@link ConcurrencyLimiter}) and load starts spaced
 * `1000 / rate` ms apart on the cache's clock ({@link RateLimiter}, burst 1:
 * a late start never earns a burst). A key is read when a slot is free; fresh
 * keys are then skipped without using the rate; one key's failure is recorded
 * and the rest go on. The loop is the slots' only waiter, and at most
 * `concurrency` keys wait for a start: neither queue needs a timeout.
 */
export async function warm(target: WarmTarget, keys: Iterable<string> | AsyncIterable<string>, options: WarmOptions | undefined): Promise<WarmSummary> {
  const o = resolveWarmOptions(options);
  const iterator = openKeys(keys);
  const { clock } = target;
  const started = clock.now();
  const tally = new Tally(o.onKey);
  const slots = new ConcurrencyLimiter({ limit: o.concurrency, maxQueue: 1, queueTimeout: MAX_TIMER_MS, codel: false, clock });
  const starts = new RateLimiter({ rate: o.rate, burst: 1, maxQueue: o.concurrency, queueTimeout: MAX_TIMER_MS, clock });
  const call = { signal: o.signal };
  const turns = new Set<Promise<unknown>>();
  let seenAll = false;

  const feed = async (): Promise<void> => {
    while (!o.signal.aborted) {
      let handOver = (_: IteratorResult<unknown>): void => {};
      const read = new Promise<IteratorResult<unknown>>((resolve) => (handOver = resolve));
      // A slot first, then a key: a key is read only when its turn can come, and one at a time.
      const turn = slots.execute(async () => {
        const next = await iterator.next();
        handOver(next);
        if (next.done !== true && !o.signal.aborted) await keyTurn(target, starts, next.value, o, tally);
        return next;
      }, call);
      turns.add(turn);
      const leave = (): boolean => turns.delete(turn);
      turn.then(leave, leave);
      // `turn` settles first only when the signal stopped it waiting for its slot, or the key source failed.
      if ((await Promise.race([read, turn])).done === true) {
        seenAll = true;
        await Promise.all(turns);
        return;
      }
    }
  };

  // Resolve at once on abort; loads already started finish in the cache (bounded by its loadTimeout).
  const { signal } = o;
  let unsubscribe = (): void => {};
  const abort = new Promise<void>((resolve) => (signal.aborted ? resolve() : (unsubscribe = onAbort(signal, resolve))));
  const fed = feed();
  fed.catch(() => undefined); // a key source failing after the abort has no one left to tell
  try {
    await Promise.race([fed, abort]);
  } catch (error) {
    if (!signal.aborted) throw error;
  } finally {
    unsubscribe();
  }
  const aborted = signal.aborted && !seenAll;
  if (aborted) void closeKeys(iterator);
  return { ...tally.summary(), durationMs: clock.now() - started, aborted };
}

/** One key's turn, in its slot: skipped, or loaded at a start of its own, again while the guard refuses it for lack of capacity. */
async function keyTurn(target: WarmTarget, starts: RateLimiter, key: unknown, o: ResolvedWarmOptions, tally: Tally): Promise<void> {
  if (typeof key !== 'string' || key.length === 0) {
    tally.record(typeof key === 'string' ? key : describe(key), { status: 'failed', error: new ArgumentError(`warm-up key must be a non-empty string, got ${key === '' ? 'an empty string' : typeof key}`) });
    return;
  }
  if (target.isFresh(key)) return tally.record(key, { status: 'skipped' });
  for (let tries = 1; ; tries++) {
    // Rejects only when the signal stops the warm-up: a load in the cache never rejects.
    const outcome = await starts.execute(() => target.load(key, o.priority), { signal: o.signal });
    // The guard had no spare capacity (live traffic has it): not the key's fault (refusal.ts); try again at a later start.
    if (outcome.status !== 'failed' || !refusedByBudget(outcome.error) || tries >= WARM_MAX_TRIES) return tally.record(key, outcome);
  }
}

/** The warm-up's counts, its first failures, and `onKey`. */
class Tally {
  private loaded = 0;
  private skipped = 0;
  private failed = 0;
  private readonly failures: { key: string; error: unknown }[] = [];
  constructor(private readonly onKey: WarmOptions['onKey']) {}

  record(key: string, outcome: WarmKeyOutcome): void {
    if (outcome.status === 'loaded') this.loaded++;
    else if (outcome.status === 'skipped') this.skipped++;
    else {
      this.failed++;
      if (this.failures.length < MAX_FAILURES_KEPT) this.failures.push({ key, error: outcome.error });
    }
    try {
      this.onKey?.(key, outcome);
    } catch {
      // An observer must not stop the warm-up.
    }
  }

  summary(): Pick<WarmSummary, 'loaded' | 'skipped' | 'failed' | 'failures'> {
    return { loaded: this.loaded, skipped: this.skipped, failed: this.failed, failures: this.failures };
  }
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
