import { ArgumentError, describe } from './errors.js';

/**
 * The option of every class with events: where what a listener threw goes.
 * A listener's throw never reaches the code that emitted (an observer must
 * not corrupt what it observes), so this is where it shows. Default: a process
 * warning with code `DAMPER_LISTENER_ERROR`, so a broken listener is never silent.
 */
export interface ListenerErrorOption {
  onListenerError?: (error: unknown, event: string) => void;
}

/**
 * A minimal typed event emitter. Emitting with no listener costs one property
 * read, which matters on the cache's hit path; a listener that throws is
 * isolated (caught and reported through `onListenerError`), because an
 * observer must never be able to corrupt the state it observes.
 */
export class Events<M extends { [K in keyof M]: (event: never) => void }> {
  // No prototype: an event named "constructor" or "__proto__" from untyped code must not reach Object.prototype.
  private readonly listeners: { [K in keyof M]?: M[K][] } = Object.create(null) as { [K in keyof M]?: M[K][] };

  /**
   * Called with what a listener threw. The default warns through
   * `process.emitWarning` (code `DAMPER_LISTENER_ERROR`): swallowing it would
   * hide a broken dashboard or alert from the operator who relies on it. It
   * warns once per event name per emitter: a listener that throws on every
   * cache hit must not turn into a flood of warnings.
   */
  onListenerError: (error: unknown, event: keyof M) => void;

  constructor(onListenerError: ((error: unknown, event: keyof M) => void) | undefined = undefined) {
    this.onListenerError = onListenerError ?? warnOncePerEvent();
  }

  /** Subscribes; returns a function that unsubscribes (so listeners cannot leak by being forgotten). */
  on<K extends keyof M>(event: K, listener: M[K]): () => void {
    const name: unknown = event;
    if (typeof name !== 'string') throw new ArgumentError(`event must be an event's name, got ${describe(name)}`);
    if (typeof listener !== 'function') throw new ArgumentError(`listener for "${name}" must be a function, got ${describe(listener)}`);
    (this.listeners[event] ??= []).push(listener);
    return () => this.off(event, listener);
  }

  off<K extends keyof M>(event: K, listener: M[K]): void {
    const list = this.listeners[event];
    if (list === undefined) return;
    const i = list.indexOf(listener);
    if (i >= 0) list.splice(i, 1);
  }

  /** True when at least one listener would receive `event`: lets callers skip building the payload. */
  has<K extends keyof M>(event: K): boolean {
    const list = this.listeners[event];
    return list !== undefined && list.length > 0;
  }

  emit<K extends keyof M>(event: K, payload: Parameters<M[K]>[0]): void {
    const list = this.listeners[event];
    if (list === undefined || list.length === 0) return;
    for (const listener of list.slice()) {
      try {
        (listener as (e: Parameters<M[K]>[0]) => void)(payload);
      } catch (error) {
        try {
          this.onListenerError(error, event);
        } catch {
          // The handler failed too: nothing is left to tell, and the emitter's caller must not see it.
        }
      }
    }
  }
}

/** The default {@link Events.onListenerError}: a process warning that names the event and carries the error, the first time each event's listener throws. */
function warnOncePerEvent(): (error: unknown, event: PropertyKey) => void {
  const warned = new Set<PropertyKey>();
  return (error, event) => {
    if (warned.has(event)) return;
    warned.add(event);
    warnListenerError(error, event);
  };
}

function warnListenerError(error: unknown, event: PropertyKey): void {
  process.emitWarning(`a listener of "${String(event)}" threw: ${describe(error)}`, { code: 'DAMPER_LISTENER_ERROR', detail: error instanceof Error ? error.stack : undefined });
}
