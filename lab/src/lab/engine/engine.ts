import { forbidRealTime, type RealTimeBan, type VirtualClock } from 'damper';
import { useLightAbort } from './light-abort.js';

/** What a simulated world does at each step of the engine. */
export interface World {
  /**
   * Called at the start of each step, at virtual time `t`: faults, arrivals.
   * Synchronous. Returns false when it started nothing, so there is nothing
   * to settle (most steps of a quiet world).
   */
  step(t: number): boolean;
  /**
   * Called once the continuations of `step` have run, still at time `t`: the
   * place to arm timers only for work that did not finish at once (client
   * timeouts for requests that were not cache hits), so the common case costs
   * no timer at all.
   */
  afterStep?(t: number): void;
}

export interface SimulateOptions {
  readonly clock: VirtualClock;
  readonly world: World;
  readonly durationMs: number;
  /** Step length, ms. Default 1: arrivals, database completions and timeouts all land on whole milliseconds. */
  readonly stepMs?: number;
  /** Called with the fraction done, once per simulated second. */
  readonly onProgress?: (fraction: number) => void;
  /**
   * Asked once per simulated second, with the time reached (every event
   * before `t` has happened): true ends the run there, before `durationMs`.
   */
  readonly until?: (t: number) => boolean;
  /**
   * Asked after the horizon: while true, the run goes on, its timers only (no
   * step, so nothing new arrives), as a load generator waits for the
   * requests it sent before it reports. Not asked when `until` ended the run.
   */
  readonly inFlight?: () => boolean;
  /**
   * Whose AbortControllers the library's code makes during the run: light
   * ones (light-abort.ts: the platform's behaviour, far cheaper on Node 20),
   * or the platform's own. The results are the same; `'platform'` is there to
   * show it. Default `'light'`.
   */
  readonly signals?: Signals;
  /**
   * What the platform's clock, timers and `Math.random` do during the run:
   * throw (`'forbidden'`, the default: damper's code and the lab's read
   * only the `Clock`), or what the caller made them (`'virtual'`: it ran
   * `installVirtualTime` on the run's clock for the whole run, since a peer
   * stack's library reads the platform's from its construction on, issue 31).
   */
  readonly platformTime?: PlatformTime;
}

/** See {@link SimulateOptions.signals}. */
export type Signals = 'light' | 'platform';

/** See {@link SimulateOptions.platformTime}. */
export type PlatformTime = 'forbidden' | 'virtual';

/** The platform's time for the run, and how to give it back: a ban whose offences the run checks, or the caller's virtual time, left as it is. */
function platformTimeFor(time: PlatformTime): RealTimeBan {
  if (time === 'forbidden') return forbidRealTime();
  return Object.assign(() => {}, { violation: undefined });
}

/**
 * The discrete-event engine. Events are the clock's timers, ordered by (time,
 * sequence) in its queue; the world adds arrivals at each step. Between
 * timestamps every promise continuation of the library's real code runs, so
 * `await` behaves as on a real clock. Events that share a timestamp are fired
 * as one batch with one drain, since a macrotask per event would cost several
 * times more than the events themselves.
 *
 * During a run the real clock, real timers and `Math.random` throw: a run
 * depends on its seed alone. Such a throw may be caught by whoever made the
 * call (a user's callback inside a guard), so the engine also checks the
 * ban's record once a simulated second and at the end, and rejects with the
 * first offence: a run that read real time has no result. Other errors
 * raised during a run carry no stack.
 */
export async function simulate(options: SimulateOptions): Promise<void> {
  const { clock, world, durationMs } = options;
  const stepMs = options.stepMs ?? 1;
  const release = platformTimeFor(options.platformTime ?? 'forbidden');
  // Signals as the platform makes them, for a tenth of their cost on Node 20 (light-abort.ts).
  const platformAbort = options.signals === 'platform' ? () => {} : useLightAbort();
  // The library raises (and handles) an error per refused, shed or timed-out
  // call, thousands a simulated second in an overload; capturing a stack for
  // each was a tenth of a damper run, and nobody reads them. Restored after.
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    const start = clock.now();
    const end = start + durationMs;
    let nextProgress = start;
    let endedEarly = false;
    // From here on the loop always resumes in a microtask, so drain suffices.
    await clock.settle();
    for (let t = start; t < end; t += stepMs) {
      if (world.step(t)) {
        await clock.drain();
        world.afterStep?.(t);
      }
      const due = clock.nextTimerAt();
      if (due !== undefined && due <= t + stepMs) await clock.runTimersUntil(t + stepMs);
      else clock.skipTo(t + stepMs);
      if (t >= nextProgress) {
        // Once a simulated second: report, and let the event loop breathe
        // (settling never returns to it, so output and signals would wait).
        nextProgress += 1000;
        options.onProgress?.((t - start) / durationMs);
        await clock.yieldToEventLoop();
        endedEarly = release.violation !== undefined || options.until?.(t) === true;
        if (endedEarly) break;
      }
    }
    if (!endedEarly) await drain(clock, world, options.inFlight);
    if (release.violation === undefined) options.onProgress?.(1);
  } finally {
    Error.stackTraceLimit = stackTraceLimit;
    platformAbort();
    release();
  }
  if (release.violation !== undefined) throw release.violation;
}

/**
 * After the horizon: the timers alone, until nothing is in flight. A request
 * sent from a timer since the last step (a retry) has its timeout armed
 * here, as a step would have armed it (`afterStep`).
 */
async function drain(clock: VirtualClock, world: World, inFlight: (() => boolean) | undefined): Promise<void> {
  if (inFlight === undefined) return;
  world.afterStep?.(clock.now());
  while (inFlight()) {
    const due = clock.nextTimerAt();
    // Every request in flight has its timeout armed: a run left with none is a defect of the world, not a slow end.
    if (due === undefined) throw new Error('damper lab: requests in flight after the horizon, and no timer left to end them');
    await clock.runTimersUntil(due);
    world.afterStep?.(clock.now());
  }
}
