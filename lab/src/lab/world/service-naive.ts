import { type Priority, type Timer, type VirtualClock } from 'damper';
import { type RetryCounts } from '../judge/lab-counters.js';
import { type Call, naiveTiers } from './naive-tiers.js';
import { type HealthShape, type Population } from '../schema/common.js';
import { NaiveBalancer, type Served, SERVED } from './naive-balancer.js';
import { type Answer, answer, belowOutcome, failure, ServiceFailure, TIMED_OUT } from './service-answers.js';
import { type Server } from './service-server.js';
import { type ServiceTiers, tickedDelay, tierSettings } from './service-tiers.js';

/** Sends one attempt for `key` to the servers; `onDone` once with how it ended. */
export type Front = (key: string, priority: Priority, onDone: (a: Answer) => void) => void;

/** Round robin over the servers: what the service world does without a balancer, in both variants. */
export function roundRobin<T>(targets: readonly T[]): () => T {
  let next = 0;
  return () => {
    const t = targets[next]!;
    next = (next + 1) % targets.length;
    return t;
  };
}

/** Hands `key` to `server` as a plain request: nobody tells the server when its caller leaves. */
function submit(server: Server, key: string, priority: Priority, onDone: (a: Answer) => void): void {
  server.submit({ key, priority, done: (outcome, source) => onDone(answer(outcome, source)) });
}

/**
 * The naive front: round robin, or the Missourian's `NaiveBalancer` over the
 * servers (health judged by response time, no floor, probes queued like any
 * request; see naive-balancer.ts), whose probe reads `probeKey`.
 */
export function naiveFront(clock: VirtualClock, servers: readonly Server[], balancer: HealthShape | undefined, probeKey: string): { front: Front; close(): void } {
  if (balancer === undefined) {
    const pick = roundRobin(servers);
    return { front: (key, priority, onDone) => submit(pick(), key, priority, onDone), close() {} };
  }
  const endpoints = servers.map((server) => ({
    handle: (key: string, priority: Priority = 'normal') =>
      new Promise<Served | Error>((resolve) => submit(server, key, priority, (a) => resolve(a.outcome === 'ok' ? SERVED[a.source] : failure(a)))),
  }));
  const door = new NaiveBalancer(clock, endpoints, balancer, probeKey);
  return {
    front: (key, priority, onDone) =>
      void door.send(key, priority).then((r) => {
        if (r instanceof ServiceFailure) onDone(r.answer);
        else if (r instanceof Error) onDone(answer('refused', 'cache')); // 503: no server in service
        else onDone(answer('ok', r.source));
      }),
    close: () => door.close(),
  };
}

/**
 * A naive user's call: one attempt at the front, or, with client tiers, a
 * stack of them, each retrying on any failure with no budget
 * ({@link naiveTiers}) per its settings (`tierSettings`: its own, else the
 * population's `retries` and `backoff`); a tier with an attempt timeout (the
 * innermost, at least) gives up on an attempt then, and leaves it running
 * below. A tier with servers of its own (`hosts[t]`, which picks one round
 * robin) runs there: a call to it waits for a worker of one of them, which
 * it holds while the tier makes its attempts below. `counts` counts each
 * tier's first attempts and retries. The users' own client (tier 0) makes
 * no retry once its user has given up: it lives in their process, and
 * their abort ends its loop (as undici's; a real run showed the model
 * retrying for users who had left). With `peer`, a peer library makes
 * each tier in place of naive's timeout, hedge and retries (issue 31).
 */
export function naiveCall(
  clock: VirtualClock,
  front: Front,
  tiers: ServiceTiers | undefined,
  jitter: () => number,
  counts: readonly RetryCounts[],
  hosts: readonly ((() => Server) | undefined)[] = [],
  peer?: PeerTiers,
) {
  // Each population's stack, built at its first call rather than at every one.
  const stacks = new Map<Population, Call<Answer>>();
  const stackOf = (population: Population): Call<Answer> => {
    const once: Call<Answer> = (key, onDone) => front(key, population.priority, onDone);
    if (tiers === undefined) return once;
    // From the innermost out: each tier's attempt is a call of the tier below.
    let below = once;
    for (let t = tiers.count - 1; t >= 0; t--) {
      // The users' own client (tier 0) lives in their process: once they give up, it makes no more retries.
      const patienceMs = t === 0 ? population.timeoutMs : undefined;
      const retrying = peer === undefined ? naiveTier(clock, tierSettings(tiers, t, population), below, jitter, counts[t], patienceMs) : peer(t, below, patienceMs);
      const host = hosts[t];
      below =
        host === undefined
          ? retrying
          : (key, onDone) => host().submit({ key, priority: population.priority, done: (outcome, source) => onDone(answer(outcome, source)), below: (then) => retrying(key, (a) => then(belowOutcome(a), a.source)) });
    }
    return below;
  };
  return (population: Population, key: string, onDone: (a: Answer) => void): void => {
    let stack = stacks.get(population);
    if (stack === undefined) stacks.set(population, (stack = stackOf(population)));
    stack(key, onDone);
  };
}

/**
 * A peer library's client tier `t` over `below` (world/peer-tier.ts), in
 * place of naive's timeout, hedge and retries; `patienceMs` for the users'
 * own client, whose retries end when the user gives up.
 */
export type PeerTiers = (t: number, below: Call<Answer>, patienceMs: number | undefined) => Call<Answer>;

/** Naive's client tier over `below`: its attempt timeout and hedge, and its retries with no budget (none after `patienceMs`, when given). */
function naiveTier(clock: VirtualClock, settings: ReturnType<typeof tierSettings>, below: Call<Answer>, jitter: () => number, counted: RetryCounts | undefined, patienceMs: number | undefined): Call<Answer> {
  const { retries, backoff, attemptTimeoutMs, timerTickMs, hedgeAfterMs } = settings;
  const timedOut = attemptTimeoutMs === undefined ? below : timed(clock, below, attemptTimeoutMs, timerTickMs);
  const attempt = hedgeAfterMs === undefined ? timedOut : hedged(clock, timedOut, hedgeAfterMs, timerTickMs, counted);
  return naiveTiers(clock, { layers: 1, retries, backoff }, jitter, attempt, (a) => a.outcome === 'ok', counted === undefined ? undefined : [counted], patienceMs);
}

/**
 * `call`, and one more copy of it when no answer came within `afterMs` (on
 * the tier's tick, if it has one): the first good answer wins; a failure
 * while the other copy runs waits for it; both failing, the last failure is
 * the answer. A hedge is an extra attempt with no budget (naive), counted
 * among the tier's retries; the losing copy runs on below, unheard.
 */
function hedged(clock: VirtualClock, call: Call<Answer>, afterMs: number, tickMs: number | undefined, counted: RetryCounts | undefined): Call<Answer> {
  return (key, onDone) => {
    let timer: Timer | undefined;
    let settled = false;
    let running = 1;
    const end = (a: Answer): void => {
      if (settled) return;
      running--;
      if (a.outcome !== 'ok' && running > 0) return;
      settled = true;
      timer?.cancel();
      onDone(a);
    };
    call(key, end);
    if (settled || running === 0) return;
    timer = clock.setTimer(() => {
      timer = undefined;
      running++;
      if (counted !== undefined) counted.retries++;
      call(key, end);
    }, tickedDelay(clock.now(), afterMs, tickMs));
  };
}

/** `call`, given up on after `ms` (at the next tick of `tickMs`, if given): the caller hears a timeout then, and the call runs on below, unheard. */
function timed(clock: VirtualClock, call: Call<Answer>, ms: number, tickMs: number | undefined): Call<Answer> {
  return (key, onDone) => {
    let timer: Timer | undefined;
    let settled = false;
    const finish = (a: Answer): void => {
      if (settled) return;
      settled = true;
      timer?.cancel();
      onDone(a);
    };
    call(key, finish);
    if (!settled) timer = clock.setTimer(() => finish(TIMED_OUT), tickedDelay(clock.now(), ms, tickMs));
  };
}
