// The users of a real run, in a process of their own (`damper lab real`): a
// load generator that sends the scenario's calls as real HTTP requests.
//
// Open-loop populations send at their rate whatever the system does
// (Poisson arrivals, or one every 1000 ÷ rate ms), closed-loop ones with
// their users and think time; a load spike or ramp multiplies both, as the
// simulation's faults say. Each call carries the population's timeout: the
// user gives up then, and the call is bad. With client tiers, the users'
// own client is tier 0 (tier-clients.ts: undici's retry interceptor, or the
// tier's `HttpDependency` with the call's deadline and priority in its
// headers), and a call is one request however many attempts it made;
// without, each attempt is a request of its own, and the population's
// retries are the users' (as the simulation's clients make them).
import { createSystemClock, seededRandom } from 'damper';
import { DEADLINE_HEADER, PRIORITY_HEADER } from 'damper/http';
import { sampleMs } from '../engine/delay.js';
import { retryDelayMs } from '../engine/retry-delay.js';
import { type Population } from '../schema/common.js';
import { KeySets } from '../world/key-sets.js';
import { activeAt, serviceState } from '../world/service-faults.js';
import { joinGroup } from './child.js';
import { processArgs } from './process-side.js';
import { type UsersProtocol } from './real-messages.js';
import { after, wallNowMs } from './wall-clock.js';
import { callBelow, tierClient } from './tier-clients.js';

// First, so that its own start-up is metered and it leaves when the runner does.
const link = joinGroup<UsersProtocol>({ warm: ({ seconds }) => warm(seconds), run: ({ zeroMs }) => run(zeroMs), report: () => ({ calls, sent: client.sent.values, stats: client.stats() }) });
const { args, scenario } = processArgs();
const clock = createSystemClock(args.seed);
const random = seededRandom(args.seed * 7_919 + 17);
const origin = args.below[0]!;
/** Each population's key for its next call, drawn as the simulation's clients draw them (Zipf and hot keys); one key where keys mean nothing. */
const keys = scenario.database === undefined ? undefined : new KeySets(scenario.clients, scenario.keys);
const keyRandom = seededRandom(args.seed * 7_919 + 29);
const keyOf = (population: Population): string => (keys === undefined ? 'key:0' : keys.pickerOf(population.name)(keyRandom));

// The users' own client: tier 0 when the scenario has tiers; else one plain attempt per request (damper: a Dependency of one attempt).
const client = await tierClient(args, scenario, 0, clock);
const populationsRetry = scenario.tiers === undefined;

/** How long after its deadline a damper user's call is aborted, if the deadline has not ended it. */
const DEADLINE_FIRST_MS = 100;

/** Calls as [sent, ended, good] ms from time zero, flat; and the calls still out. */
const calls: number[] = [];
let out = 0;
/** The requests still out, by when they were sent (wall ms) and what they read: told on stderr if the run does not drain (`drainWatch`). */
const open = new Set<{ readonly sent: number; readonly key: string }>();
/** How often the users say what is still out once the horizon has passed, ms. */
const DRAIN_REPORT_MS = 5_000;
let recording = false;
let zero = 0;
let horizon = 0;
let sending = false;
const warmed = { calls: 0, good: 0 };
let onIdle: (() => void) | undefined;

/** One request of `population` for `key`: the user waits at most its timeout. `then` hears whether it was good. */
function send(population: Population, key: string, then: (good: boolean) => void): void {
  const sent = wallNowMs();
  const measured = recording;
  out++;
  const pending = { sent, key };
  open.add(pending);
  const gaveUp = new AbortController();
  // naive gives up at its timeout. damper's client has the timeout as the call's deadline, and it is the deadline that ends
  // the call (counted against the upstream that did not answer in time, as a hung one is); the user's own abort is a
  // safety net a moment later, which the dependency would count as nobody's fault. An answer after the timeout is bad either way.
  // The user's view of the call, recorded once: its answer, or giving up at the abort. A request undici has not started
  // (waiting for a connection) hears no abort until it has one (nodejs/undici#386), but its user has gone all the same.
  let recorded = false;
  const record = (good: boolean): void => {
    if (recorded) return;
    recorded = true;
    const at = wallNowMs();
    const inTime = good && at - sent <= population.timeoutMs;
    if (measured) calls.push(sent - zero, at - zero, inTime ? 1 : 0);
    else {
      warmed.calls++;
      if (inTime) warmed.good++;
    }
    then(inTime);
  };
  const cancel = after(population.timeoutMs + (args.variant === 'damper' ? DEADLINE_FIRST_MS : 0), () => {
    gaveUp.abort();
    record(false);
  });
  const headers: Record<string, string> = args.variant === 'damper' ? { [DEADLINE_HEADER]: String(population.timeoutMs), [PRIORITY_HEADER]: population.priority } : {};
  // The request itself ends later, if ever: the run drains them all (a request that never ends is a defect, `drainWatch`).
  const ended = (good: boolean): void => {
    cancel();
    record(good);
    open.delete(pending);
    out--;
    if (out === 0) onIdle?.();
  };
  callBelow(client, origin, `/work?key=${encodeURIComponent(key)}`, { signal: gaveUp.signal, headers }).then(
    (reply) => ended(reply.status === 200),
    () => ended(false),
  );
}

/** A call: one request, or without tiers, its retries too as requests of their own (the population's backoff between them). */
function call(population: Population, done: () => void, attempt = 0, key = keyOf(population)): void {
  send(population, key, (good) => {
    if (good || !populationsRetry || attempt >= population.retries || !sending) return done();
    after(retryDelayMs(population.backoff, attempt + 1, random), () => call(population, done, attempt + 1, key));
  });
}

/** The load factor at wall time `at` (spikes and ramps), as the simulation's faults make it. */
function loadAt(at: number): number {
  const s = Math.max(0, (at - zero) / 1000);
  return serviceState(scenario, activeAt(scenario, s), s).load;
}

/**
 * Sends `population`'s open-loop arrivals from `from` (wall ms) until sending
 * stops: Poisson gaps, or a fixed interval, at its rate × the load at each
 * arrival's instant. The instants are planned on the wall clock and every
 * one that is due is sent when a timer fires, so a late timer (a busy host)
 * sends late, never fewer: an open loop does not slow down.
 */
function openLoop(population: Population, from: number): void {
  const gap = (t: number): number => {
    const rate = population.rate * loadAt(t);
    // No load (a spike to zero): look again in 10 ms.
    if (rate <= 0) return 10;
    return population.arrivals === 'fixed' ? 1000 / rate : (-1000 * Math.log(1 - random())) / rate;
  };
  let due = from + (population.arrivals === 'fixed' ? 0 : gap(from));
  const next = (): void => {
    const now = wallNowMs();
    while (sending && due <= now) {
      if (population.rate * loadAt(due) > 0) call(population, () => {});
      due += gap(due);
    }
    if (sending) after(due - wallNowMs(), next);
  };
  after(due - wallNowMs(), next);
}

/** A closed-loop user: a call, its end, a think, the next. */
function closedUser(population: Population, think: NonNullable<Population['closed']>['thinkTime']): void {
  const next = (): void => {
    if (!sending) return;
    call(population, () => after(Math.max(1, Math.round(sampleMs(think, random))), next));
  };
  next();
}

function startSending(from: number): void {
  sending = true;
  for (const population of scenario.clients) {
    if (population.closed === undefined) openLoop(population, from);
    // A closed loop's users are fixed for the run (real-plan.ts refuses a load fault on one).
    else for (let u = 0; u < population.closed.users; u++) closedUser(population, population.closed.thinkTime);
  }
}

/** Resolves when no request is out. */
function idle(): Promise<void> {
  return out === 0 ? Promise.resolve() : new Promise((resolve) => (onIdle = () => ((onIdle = undefined), resolve())));
}

/** Unmeasured traffic for `seconds` at the first second's load, then every call of it ended: code compiled and connections open before time zero, as a service in production is. */
function warm(seconds: number): Promise<{ calls: number; good: number }> {
  zero = wallNowMs();
  startSending(zero);
  return new Promise((resolve) =>
    after(seconds * 1000, () => {
      sending = false;
      void idle().then(() => resolve({ ...warmed }));
    }),
  );
}

/** The run: calls from time zero to the horizon, measured; resolves once every call sent has ended. */
function run(zeroMs: number): Promise<null> {
  zero = zeroMs;
  client.start(zeroMs);
  horizon = zero + scenario.durationS * 1000;
  after(zero - wallNowMs(), () => {
    recording = true;
    startSending(zero);
  });
  // No call is sent after the horizon; the run ends when every call sent has ended.
  return new Promise((resolve) =>
    after(horizon - wallNowMs(), () => {
      sending = false;
      const stop = drainWatch();
      void idle().then(() => (stop(), resolve(null)));
    }),
  );
}

/**
 * Says on stderr, every few seconds until the returned stop, how many
 * requests are still out and the oldest of them: a call that never ends (it
 * should end at its timeout) hangs the run, and the runner's error carries
 * this output.
 */
function drainWatch(): () => void {
  let cancel = after(DRAIN_REPORT_MS, function report() {
    let oldest: { readonly sent: number; readonly key: string } | undefined;
    for (const r of open) if (oldest === undefined || r.sent < oldest.sent) oldest = r;
    const age = oldest === undefined ? '' : `; the oldest sent ${Math.round(wallNowMs() - oldest.sent)} ms ago, for ${oldest.key}`;
    process.stderr.write(`users: ${out} requests still out ${Math.round((wallNowMs() - horizon) / 1000)} s after the horizon${age}\n`);
    cancel = after(DRAIN_REPORT_MS, report);
  });
  return () => cancel();
}

link.ready(null);
