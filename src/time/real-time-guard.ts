/**
 * Makes every read of the real clock, every real timer and every draw from
 * `Math.random` throw until the returned function is called. The incident
 * lab turns it on for the length of a run: a run must depend on its seed
 * alone (principle 8), and this is how a stray `Date.now()` in library code
 * is caught the first time it runs rather than as a flaky report.
 */
export class RealTimeInSimulationError extends Error {
  constructor(what: string) {
    super(`${what} was called inside a simulated run: read time and randomness through the Clock`);
    this.name = 'RealTimeInSimulationError';
  }
}

type Patch = [target: object, key: string];

const PATCHES: readonly [Patch, string][] = [
  [[Date, 'now'], 'Date.now()'],
  [[performance, 'now'], 'performance.now()'],
  [[Math, 'random'], 'Math.random()'],
  [[globalThis, 'setTimeout'], 'setTimeout()'],
  [[globalThis, 'setInterval'], 'setInterval()'],
];

let depth = 0;
let restoreAll: (() => void) | undefined;
/** Every offence since the patch went on, in order: a caller may swallow the throw, the record keeps it. */
let offences: RealTimeInSimulationError[] = [];

/**
 * What {@link forbidRealTime} returns: call it to lift the ban. Its
 * `violation` is the first offence since this ban began, or undefined: the
 * code that read real time may have caught the throw (a `try` around a
 * callback, a rejected promise nobody awaited), so a run that must depend on
 * its seed alone checks this after it ends rather than trusting that the
 * throw got out.
 */
export interface RealTimeBan {
  (): void;
  readonly violation: RealTimeInSimulationError | undefined;
}

/**
 * Forbids real time until the returned function is called. Nested calls share
 * one patch. Public for tests that run code in virtual time, as the lab does:
 * a test whose result must depend on its `VirtualClock` alone fails at the
 * first stray real-clock read instead of flaking.
 */
export function forbidRealTime(): RealTimeBan {
  if (depth++ === 0) {
    offences = [];
    const saved = PATCHES.map(([[target, key]]) => [target, key, Object.getOwnPropertyDescriptor(target, key)] as const);
    for (const [[target, key], what] of PATCHES) {
      Object.defineProperty(target, key, {
        configurable: true,
        writable: true,
        value: () => {
          // A stack even where the caller turned stacks off (the lab does, for speed): it names who read real time.
          const limit = Error.stackTraceLimit;
          Error.stackTraceLimit = 20;
          const offence = new RealTimeInSimulationError(what);
          Error.stackTraceLimit = limit;
          offences.push(offence);
          throw offence;
        },
      });
    }
    restoreAll = () => {
      for (const [target, key, descriptor] of saved) {
        if (descriptor === undefined) Reflect.deleteProperty(target, key);
        else Object.defineProperty(target, key, descriptor);
      }
    };
  }
  const first = offences.length;
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    if (--depth === 0) restoreAll?.();
  };
  return Object.defineProperty(release, 'violation', { get: () => offences[first] }) as RealTimeBan;
}
