import { isInstance } from '../config.js';
import { ArgumentError } from '../errors.js';

/**
 * One `abort` listener per signal, fanning out to any number of callbacks.
 *
 * A signal shared by many concurrent calls (a server's shutdown signal, the
 * default never-aborting one) would otherwise carry one listener per call, and
 * Node's EventTarget keeps listeners in a list it walks on every add and
 * remove: thousands of calls in flight make each of them O(n), and the whole
 * burst quadratic, exactly under load. Here subscribing and unsubscribing cost
 * O(1), and the signal's one listener is removed when the last callback goes,
 * so nothing is left on a long-lived signal.
 *
 * A signal damper made and aborts itself ({@link ownedSignal}) needs no
 * listener at all: its callbacks run from {@link abortOwned}, right after the
 * abort event. The first listener on a fresh signal costs ~3–5 µs on Node 20
 * (more than the signal), and a retried call makes one such signal per attempt
 * per tier, each watched by the tier below.
 *
 * `onAbort` is public: a driver or a task given a guard's signal watches it
 * the same way, and gets the listener-free path on damper's own signals.
 * `ownedSignal`, `ownedDeadline` and `abortOwned` are internal.
 */

interface Fanout {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}

const fanouts = new WeakMap<AbortSignal, Fanout>();

/**
 * The signal of a call that cannot be abandoned (a call made without one).
 * Guards test for it by identity to take their cheapest path: an outcome
 * handler shared by all such calls, since there is no abort to tell apart.
 * Nothing aborts it, so {@link onAbort} watches it for nothing: without that,
 * each call made without a signal but with a deadline added and removed a
 * listener on it (7 % of a lab run's time on Node 24, one call at a time).
 *
 * @internal
 */
export const NEVER_ABORTS: AbortSignal = new AbortController().signal;

const UNWATCHED = (): void => {};

/** What damper keeps about a signal it made and aborts itself ({@link ownedSignal}). */
interface Owned {
  /** The instant it stands for, if any (see `deadlineOf`). */
  readonly at: number | undefined;
  /**
   * Its {@link onAbort} callbacks: none, the one (most such signals get one
   * subscriber at most, the tier inside, and a `Set` costs more than the
   * signal's record), or a `Set` once a second one comes, in subscription order.
   */
  callbacks: Set<() => void> | (() => void) | undefined;
}

/**
 * Where an owned signal keeps its record: on the signal itself, under a
 * symbol only this module holds. A Retry attempt with a time limit makes
 * one such signal, and a WeakMap entry cost 0.7 µs on Node 24 and more to
 * collect (its entries are ephemerons, walked on every GC), against 0.05 µs
 * for a property; on Node 20 the property costs about 1 µs more than the
 * entry, next to the 4 µs that Node 20 spends making the signal itself.
 */
const OWNED = Symbol('damper.owned');

type OwnedSignal = AbortSignal & { [OWNED]?: Owned };

/**
 * The record of a signal damper made, or undefined for any other value: a
 * user's signal, or garbage handed to `onAbort` (null, a revoked proxy),
 * which then says what is wrong with it rather than throwing a TypeError
 * here.
 */
function ownedRecord(signal: AbortSignal): Owned | undefined {
  if (typeof signal !== 'object' || signal === null) return undefined;
  try {
    return (signal as OwnedSignal)[OWNED];
  } catch {
    return undefined;
  }
}

/**
 * Calls `callback` once when `signal` aborts, unless the returned function is
 * called first. Each subscription must pass its own function object. Nothing
 * happens if the signal has already aborted: check `signal.aborted` first.
 * Subscribing and unsubscribing cost O(1) however many calls share the
 * signal, and a signal damper made gets no listener at all (see the module's
 * comment): watch a call's signal with this rather than `addEventListener`.
 */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  if (typeof callback !== 'function') throw new ArgumentError('onAbort: callback must be a function');
  if (signal === NEVER_ABORTS) return UNWATCHED;
  const record = ownedRecord(signal);
  if (record !== undefined) {
    const held = record.callbacks;
    if (held === undefined) record.callbacks = callback;
    else if (typeof held === 'function') record.callbacks = new Set([held, callback]);
    else held.add(callback);
    return () => {
      const now = record.callbacks;
      if (now === callback) record.callbacks = undefined;
      else if (typeof now === 'object') now.delete(callback);
    };
  }
  let fanout = fanouts.get(signal);
  if (fanout === undefined) {
    // Checked here, off the path of the signals damper made: an owned signal is an AbortSignal.
    if (!isInstance(signal, AbortSignal)) throw new ArgumentError('onAbort: signal must be an AbortSignal');
    const callbacks = new Set<() => void>();
    const listener = (): void => {
      fanouts.delete(signal);
      fire(callbacks);
    };
    fanout = { callbacks, listener };
    fanouts.set(signal, fanout);
    signal.addEventListener('abort', listener, { once: true });
  }
  const shared = fanout;
  shared.callbacks.add(callback);
  return () => {
    if (!shared.callbacks.delete(callback) || shared.callbacks.size > 0) return;
    if (fanouts.get(signal) === shared) fanouts.delete(signal);
    signal.removeEventListener('abort', shared.listener);
  };
}

/**
 * `work`'s value, or `recover`'s of its failure, unless `signal` aborts
 * first: then it rejects with the signal's reason, and `work` runs on
 * unwatched. For waits inside a load that its hard timeout must end (an
 * async validator, a superseded load of the same key).
 */
export function beforeAbort<T>(work: Promise<T>, signal: AbortSignal, recover: (error: unknown) => T): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise((resolve, reject) => {
    const stop = onAbort(signal, () => reject(signal.reason as Error));
    work.then(
      (value) => {
        stop();
        resolve(value);
      },
      (error: unknown) => {
        stop();
        resolve(recover(error));
      },
    );
  });
}

/**
 * The signal of `controller`, standing for the instant `at` if given, which
 * from now on must be aborted through {@link abortOwned} only: {@link onAbort} callbacks on it are kept here, not
 * as a listener on the signal. Listeners added to it directly still work.
 */
export function ownedSignal(controller: AbortController, at?: number): AbortSignal {
  const { signal } = controller;
  (signal as OwnedSignal)[OWNED] = { at, callbacks: undefined };
  return signal;
}

/** The instant given to {@link ownedSignal} for `signal`, if any. */
export function ownedDeadline(signal: AbortSignal): number | undefined {
  return ownedRecord(signal)?.at;
}

/** Aborts a controller whose signal came from {@link ownedSignal}: its listeners, then its {@link onAbort} callbacks in the order they subscribed. */
export function abortOwned(controller: AbortController, reason: unknown): void {
  const { signal } = controller;
  if (signal.aborted) return;
  controller.abort(reason);
  const record = ownedRecord(signal);
  const callbacks = record?.callbacks;
  if (callbacks === undefined) return;
  if (typeof callbacks === 'function') {
    record!.callbacks = undefined;
    callbacks();
  } else fire(callbacks);
}

function fire(callbacks: Set<() => void>): void {
  const pending = [...callbacks];
  callbacks.clear();
  for (const cb of pending) cb();
}
