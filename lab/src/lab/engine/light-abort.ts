/**
 * AbortController and AbortSignal for the length of a simulated run: the
 * same behaviour as the platform's, at a fraction of their cost on Node 20.
 *
 * The library makes a signal for every attempt with a time limit (each
 * tier's `Retry`, the cache's hard timeout), as it must: a user's driver is
 * handed it. On Node 20 a platform signal is an EventTarget with a map of
 * its own and a changed prototype, about 4 µs to make and more to collect,
 * and in a damper run of the issue-29 scenario (2,000 calls/s through two
 * retrying tiers) the signals were 45 % of the run's time. Node 22 and later
 * make one in well under a microsecond. The simulation reads no wall time
 * and the lab judges behaviour, not CPU, so the engine swaps these in while
 * it runs (as `forbidRealTime` swaps the clock's globals) and back after:
 * the library's code is unchanged and runs the same calls in the same order;
 * the results are byte-identical with and without (lab/test/light-abort.test.ts
 * holds them to that, and to the platform's behaviour, call by call).
 *
 * What a light signal does as the platform's does: `aborted`, `reason` (an
 * `AbortError` DOMException when none is given), `throwIfAborted`, `onabort`,
 * `addEventListener` / `removeEventListener` for `abort` (functions or
 * `handleEvent` objects, `once`, `signal`, a listener added twice kept once,
 * one removed during the event not called, one added during it not called),
 * `dispatchEvent`, `instanceof AbortSignal`, and `AbortSignal.any` over any
 * mix of light and platform signals. Anything else the platform's prototype
 * has throws its own brand error on a light signal: loud, never a silent
 * difference.
 */

type Listener = ((event: Event) => void) | { handleEvent(event: Event): void };

/** What `addEventListener` reads of its options (the DOM's AddEventListenerOptions, which Node's types do not all name). */
interface ListenerOptions {
  readonly once?: boolean;
  readonly signal?: AbortSignal;
}

/** A listener in a signal's list: linked both ways, as in Node's EventTarget, whose walk these follow. */
interface Entry {
  readonly listener: Listener;
  readonly once: boolean;
  removed: boolean;
  previous: Entry | undefined;
  next: Entry | undefined;
}

/** The platform's, kept before any swap: platform signals still come from here, and `any` falls back to it. */
const PlatformController = globalThis.AbortController;
const platformAny = AbortSignal.any.bind(AbortSignal);

/**
 * Reported, not thrown at the dispatcher, as the platform's EventTarget does
 * (a throwing listener does not stop the others): as an unhandled
 * rejection, which ends the lab's process and fails a test run, as Node's
 * uncaught exception would. No timer is set for it (principle 8).
 */
function report(error: unknown): void {
  void Promise.reject(error);
}

/** Aborts a light signal: its controller's `abort`, and nobody else's (a platform signal has no abort of its own either). */
let abortSignal: (signal: LightAbortSignal, reason: unknown) => void;

/**
 * A signal made by {@link LightAbortController}. Its state sits in private
 * fields behind the same getters as the platform's, so `signal.aborted =
 * true` changes nothing, as there.
 */
class LightAbortSignal {
  #aborted = false;
  #reason: unknown = undefined;
  #onabort: ((event: Event) => void) | null = null;
  /** The first and last listeners for `abort`, in the order added. */
  #first: Entry | undefined = undefined;
  #last: Entry | undefined = undefined;
  /** Whether `onabort` has its place among the listeners: taken the first time it is set (null or not) and kept, as Node does. */
  #handlerPlaced = false;

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  get onabort(): ((event: Event) => void) | null {
    return this.#onabort;
  }

  set onabort(handler: ((event: Event) => void) | null) {
    this.#onabort = typeof handler === 'function' ? handler : null;
    if (this.#handlerPlaced) return;
    this.#handlerPlaced = true;
    this.#append((event) => this.#onabort?.call(this, event), false);
  }

  throwIfAborted(): void {
    if (this.#aborted) throw this.#reason;
  }

  addEventListener(type: string, listener: Listener | null, options?: boolean | ListenerOptions): void {
    if (listener === null || listener === undefined || type !== 'abort') return;
    const o = typeof options === 'object' && options !== null ? options : {};
    const stopper = o.signal;
    if (stopper?.aborted === true) return;
    // As Node: the stopper removes whichever entry holds this listener when it aborts, even when this add was a duplicate.
    stopper?.addEventListener('abort', () => this.removeEventListener('abort', listener), { once: true });
    if (this.#find(listener) === undefined) this.#append(listener, o.once === true);
  }

  removeEventListener(type: string, listener: Listener | null): void {
    if (type !== 'abort') return;
    const entry = this.#find(listener);
    if (entry !== undefined) this.#remove(entry);
  }

  dispatchEvent(event: Event): boolean {
    this.#dispatch(event);
    return !event.defaultPrevented;
  }

  static {
    abortSignal = (signal, reason) => signal.#abort(reason);
  }

  #abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    // As the platform: no reason given, an AbortError.
    this.#reason = reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason;
    if (this.#first === undefined) return;
    const event = new Event('abort');
    Object.defineProperty(event, 'target', { value: this });
    Object.defineProperty(event, 'currentTarget', { value: this });
    this.#dispatch(event);
  }

  #dispatch(event: Event): void {
    if (event.type !== 'abort') return;
    // As Node walks its list: the next entry is taken before each call, so a
    // listener added by the last one is not called this time, one removed
    // before its turn is skipped, and a removed entry still leads on.
    for (let entry = this.#first; entry !== undefined; ) {
      const next = entry.next;
      if (!entry.removed) {
        if (entry.once) this.#remove(entry);
        try {
          const { listener } = entry;
          if (typeof listener === 'function') listener.call(this, event);
          else listener.handleEvent(event);
        } catch (error) {
          report(error);
        }
      }
      entry = next;
    }
  }

  #find(listener: Listener | null): Entry | undefined {
    for (let entry = this.#first; entry !== undefined; entry = entry.next) if (entry.listener === listener) return entry;
    return undefined;
  }

  #append(listener: Listener, once: boolean): Entry {
    const entry: Entry = { listener, once, removed: false, previous: this.#last, next: undefined };
    if (this.#last === undefined) this.#first = entry;
    else this.#last.next = entry;
    this.#last = entry;
    return entry;
  }

  /** Unlinks `entry`; its own `next` is kept, so a walk standing on it goes on. */
  #remove(entry: Entry): void {
    if (entry.removed) return;
    entry.removed = true;
    if (entry.previous === undefined) this.#first = entry.next;
    else entry.previous.next = entry.next;
    if (entry.next === undefined) this.#last = entry.previous;
    else entry.next.previous = entry.previous;
  }
}

// `instanceof AbortSignal` holds; anything of the platform's prototype not shadowed above throws its own brand error.
Object.setPrototypeOf(LightAbortSignal.prototype, AbortSignal.prototype);
Object.defineProperty(LightAbortSignal.prototype, Symbol.toStringTag, { value: 'AbortSignal', configurable: true });

export class LightAbortController {
  readonly #signal = new LightAbortSignal();

  get signal(): AbortSignal {
    return this.#signal as unknown as AbortSignal;
  }

  abort(reason?: unknown): void {
    abortSignal(this.#signal, reason);
  }
}

/** `AbortSignal.any` for light and platform signals alike: the platform's when every one is the platform's. */
function anySignal(signals: Iterable<AbortSignal>): AbortSignal {
  const list = [...signals];
  if (!list.some((s) => s instanceof LightAbortSignal)) return platformAny(list);
  const controller = new LightAbortController();
  const first = list.find((s) => s.aborted);
  if (first !== undefined) {
    controller.abort(first.reason);
    return controller.signal;
  }
  const stops: (() => void)[] = [];
  for (const s of list) {
    const onAbort = (): void => {
      for (const stop of stops) stop();
      controller.abort(s.reason);
    };
    s.addEventListener('abort', onAbort, { once: true });
    stops.push(() => s.removeEventListener('abort', onAbort));
  }
  return controller.signal;
}

let depth = 0;

/**
 * Puts light abort controllers in place of the platform's until the
 * returned function is called (nested calls share one swap). The engine
 * calls it for the length of a run.
 */
export function useLightAbort(): () => void {
  if (depth++ === 0) {
    globalThis.AbortController = LightAbortController as unknown as typeof AbortController;
    AbortSignal.any = anySignal;
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--depth === 0) {
      globalThis.AbortController = PlatformController;
      AbortSignal.any = platformAny;
    }
  };
}
