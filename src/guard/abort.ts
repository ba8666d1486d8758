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
 * @internal
 */

interface Fanout {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}

const fanouts = new WeakMap<AbortSignal, Fanout>();

/**
 * Calls `callback` once when `signal` aborts, unless the returned function is
 * called first. Each subscription must pass its own function object. Nothing
 * happens if the signal has already aborted: check `signal.aborted` first.
 */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  let fanout = fanouts.get(signal);
  if (fanout === undefined) {
    const callbacks = new Set<() => void>();
    const listener = (): void => {
      fanouts.delete(signal);
      const pending = [...callbacks];
      callbacks.clear();
      for (const cb of pending) cb();
    };
    fanout = { callbacks, listener };
    fanouts.set(signal, fanout);
    signal.addEventListener('abort', listener, { once: true });
  }
  const mine = fanout;
  mine.callbacks.add(callback);
  return () => {
    if (!mine.callbacks.delete(callback) || mine.callbacks.size > 0) return;
    if (fanouts.get(signal) === mine) fanouts.delete(signal);
    signal.removeEventListener('abort', mine.listener);
  };
}
