import { abortOwned, ownedSignal } from '../guard/abort.js';
import { LoadTimeoutError } from '../errors.js';
import { type Clock, type Timer } from '../time/clock.js';

/**
 * The hard timeout of one load, and the signal that carries it to the guard
 * and the loader. The signal is made the first time something asks for it: in
 * a cluster most loads end in the shared tier (a fill by another process's
 * lease, a stale value, a deferral) without reaching the origin, and an
 * `AbortSignal` costs ~4 µs on Node 20 (the discord-2019 replay made five for
 * each origin query). Asked for after the timeout, it comes already aborted,
 * so nobody can tell it was late.
 *
 * @internal
 */
export class HardTimeout {
  private controller: AbortController | undefined;
  private error: LoadTimeoutError | undefined;
  private readonly timer: Timer;

  /** `loadTimeout` names the limit in the error; the timer fires after `remainingMs` (what a read of the shared tier left of it). */
  constructor(clock: Clock, key: string, loadTimeout: number, remainingMs: number = loadTimeout) {
    this.timer = clock.setTimer(() => {
      this.error = new LoadTimeoutError(key, loadTimeout, 'load');
      if (this.controller !== undefined) abortOwned(this.controller, this.error);
    }, Math.max(0, remainingMs));
  }

  /** Aborts with the {@link LoadTimeoutError} when the timeout passes, and only then. */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      // Aborted only here: guards and the loader's wrapper watch it without a listener on it.
      ownedSignal(this.controller);
      if (this.error !== undefined) abortOwned(this.controller, this.error);
    }
    return this.controller.signal;
  }

  /** The timeout's error once it has passed, else undefined. */
  get expired(): LoadTimeoutError | undefined {
    return this.error;
  }

  /** The load ended: the timeout will not fire. */
  cancel(): void {
    this.timer.cancel();
  }
}
