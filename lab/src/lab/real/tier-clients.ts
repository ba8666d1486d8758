import { type Clock } from 'damper';
import { damperInterceptor, HttpDependency, type HttpUpstream } from 'damper/http';
import { Agent, type Dispatcher, interceptors, request } from 'undici';
import { isPolicyPeer, type Knobs, type PeerPolicy, type PolicyPeer } from '../stacks/stack.js';
import { peerPlan } from '../stacks/tier-plan.js';
import { type DamperSettings, damperSettings, dependencyOptions } from '../damper-config.js';
import { loadPolicyPeer } from '../stacks/peers.js';
import { type ProcessArgs } from './process-side.js';
import { type Backoff } from '../schema/common.js';
import { damperTierOptions } from '../world/service-damper.js';
import { type ServiceScenario } from '../schema/service.js';
import { tierSettings } from '../world/service-tiers.js';
import { damperLiveness, naiveOrigins, type OriginPicker } from './origin-picker.js';
import { PerSecond } from './process-side.js';
import { RealRunError } from './real-error.js';
import { after, wallNowMs } from './wall-clock.js';

/**
 * How client tier `t` of a real run calls the tier below it over HTTP: the
 * same undici `Agent` in both variants (an attempt's timeout is its
 * `headersTimeout`), composed with undici's own retry interceptor (naive:
 * what a service that "retries 3 times" ships) or with damper's (the tier's
 * `HttpDependency`, built from the options the simulation gives the same
 * tier: `damperTierOptions` under the configuration's `dependency(t)`).
 */

/** undici's list of retried error codes, and its attempt timeouts: without these, undici never retries a slow upstream. */
const RETRIED_CODES = ['ECONNRESET', 'ECONNREFUSED', 'ENOTFOUND', 'ENETDOWN', 'ENETUNREACH', 'EHOSTDOWN', 'EHOSTUNREACH', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'];

/** What a tier's outgoing calls go through, and what it can say of itself. */
export interface TierClient {
  readonly dispatcher: Dispatcher;
  /** A peer library's policies around each call (issue 31), whose attempts go out on `dispatcher`; none for naive and damper, whose dispatcher does it all. */
  readonly policy?: PeerPolicy;
  /**
   * Every request it sent below (each attempt, retry and hedge), by second
   * from time zero: counted as it leaves, so a request to a server that
   * reads nothing (SIGSTOPped) counts as the simulation counts it, on
   * arrival at a server that takes requests and answers none.
   */
  readonly sent: PerSecond;
  /** The tier's guards' stats (damper), for the run's record. */
  readonly stats: () => unknown;
  /** Time zero (a wall-clock instant, ms): `sent` counts from it, and the origin picker starts from its simulation's state. */
  start(zeroMs: number): void;
  close(): Promise<void>;
}

/** A client's `start`: `sent` counted from time zero, and `origins` told it. */
function startAt(sent: PerSecond, origins: Pick<OriginPicker, 'start'>): (zeroMs: number) => void {
  return (zeroMs) => {
    sent.zero = zeroMs;
    origins.start(zeroMs);
  };
}

/**
 * The agent every tier's calls go out on. Connections are kept alive longer
 * than a run (the run measures the stacks, not reconnection after idle);
 * `attemptTimeoutMs` is undici's `headersTimeout` and `bodyTimeout` (0:
 * none; undici checks timeouts of over a second on a 500 ms tick, exactly
 * what the scenario's `timerTickMs` models).
 */
export function agentFor(attemptTimeoutMs: number | undefined): Agent {
  const timeout = attemptTimeoutMs ?? 0;
  return new Agent({ headersTimeout: timeout, bodyTimeout: timeout, keepAliveTimeout: 600_000, keepAliveMaxTimeout: 600_000 });
}

/** undici's retry options for a scenario backoff: its own exponential (minTimeout × 2^(n−1), capped), or none; it draws no jitter. */
function undiciBackoff(backoff: Backoff): { minTimeout: number; maxTimeout: number; timeoutFactor: number } {
  switch (backoff.kind) {
    case 'none':
      return { minTimeout: 0, maxTimeout: 0, timeoutFactor: 1 };
    case 'fixed':
      return { minTimeout: backoff.delayMs, maxTimeout: backoff.delayMs, timeoutFactor: 1 };
    case 'exponential':
      return { minTimeout: backoff.baseMs, maxTimeout: backoff.maxMs, timeoutFactor: 2 };
    case 'full-jitter':
      throw new RealRunError('a full-jitter backoff: undici’s retry interceptor draws no jitter, so the real naive client cannot make it (give exponential)');
  }
}

/**
 * Tier `t`'s naive client: undici's retry interceptor with the tier's
 * retries and backoff (the first population's: undici takes one setting per
 * agent), each attempt sent to the origin `naiveOrigins` picks (round robin
 * over `below`, or the naive balancer's pick: as the simulation's naive
 * front picks a server per attempt).
 */
export async function naiveTierClient(scenario: ServiceScenario, t: number, below: readonly string[], clock: Clock): Promise<TierClient> {
  const tiers = scenario.tiers!;
  const own = tierSettings(tiers, t, scenario.clients[0]!);
  const agent = agentFor(own.attemptTimeoutMs);
  const origins = await naiveOrigins(scenario, t, below, clock);
  // compose() wraps in order, so the retry interceptor is outermost: each of its attempts takes the next origin.
  const sent = new PerSecond();
  const dispatcher = agent.compose(counting(sent, below), origins.interceptor, interceptors.retry({ maxRetries: own.retries, errorCodes: RETRIED_CODES, ...undiciBackoff(own.backoff) }));
  return { dispatcher, sent, stats: () => undefined, start: startAt(sent, origins), close: async () => (await origins.close(), await agent.close()) };
}

/** The users' naive client without tiers: one attempt per request (the populations retry as the scenario says), to the origin `naiveOrigins` picks. */
export async function naiveUsersClient(scenario: ServiceScenario, below: readonly string[], clock: Clock): Promise<TierClient> {
  const agent = agentFor(undefined);
  const origins = await naiveOrigins(scenario, 0, below, clock);
  const sent = new PerSecond();
  return { dispatcher: agent.compose(counting(sent, below), origins.interceptor), sent, stats: () => undefined, start: startAt(sent, origins), close: async () => (await origins.close(), await agent.close()) };
}

/**
 * Tier `t`'s client made by a policy peer (cockatiel, opossum: issue 31),
 * as the simulation's `peerTier` makes it: the agent with no timeout of its
 * own (the peer times each attempt out, and aborts it), each attempt to the
 * origin `naiveOrigins` picks, the peer's policy built from the same
 * `peerPlan` as the simulation's.
 */
export async function peerTierClient(scenario: ServiceScenario, t: number, below: readonly string[], clock: Clock, peer: PolicyPeer, knobs: Knobs, timeScale: number): Promise<TierClient> {
  const agent = agentFor(undefined);
  const origins = await naiveOrigins(scenario, t, below, clock);
  const sent = new PerSecond();
  const policy = peer.tier(peerPlan(scenario, t, knobs, timeScale, clock));
  const dispatcher = agent.compose(counting(sent, below), origins.interceptor);
  return { dispatcher, policy, sent, stats: () => undefined, start: startAt(sent, origins), close: async () => (policy.close(), await origins.close(), await agent.close()) };
}

/**
 * The client of tier `t` (0: the users') for the run's stack: damper's
 * `HttpDependency`, a policy peer's, or naive's (undici's stack is naive's
 * in undici's system: the runner wrote that scenario; a cache peer's tiers
 * are naive's). Without tiers the
 * users' own client makes one attempt per request.
 */
export async function tierClient(args: ProcessArgs, scenario: ServiceScenario, t: number, clock: Clock): Promise<TierClient> {
  const stack = args.variant;
  if (stack === 'damper') return damperTierClient(scenario, t, await damperSettings(scenario, clock), clock, args.below);
  if (scenario.tiers === undefined) return naiveUsersClient(scenario, args.below, clock);
  // A cache peer's system and undici's are naive's at the tiers.
  if (!isPolicyPeer(stack)) return naiveTierClient(scenario, t, args.below, clock);
  return peerTierClient(scenario, t, args.below, clock, await loadPolicyPeer(stack), args.knobs ?? {}, args.timeScale ?? 1);
}

/** An answer of the tier below as a caller reads it: its status, and the `Retry-After` it sent. */
export interface TierReply {
  readonly status: number;
  readonly retryAfter: string | undefined;
}

/** An answer a peer's policy counts as a failure, to retry and to count against the tier below: a 5xx or a 429, as undici's retry handler does. */
class FailedReply extends Error {
  constructor(readonly reply: TierReply) {
    super(`status ${reply.status}`);
  }
}

function failed(status: number): boolean {
  return status >= 500 || status === 429;
}

/**
 * One call of a tier (or of the users) to `origin`'s `path` through
 * `client`: a request on its dispatcher, or with a peer, the peer's policy
 * around such requests (a failed status thrown, so that the peer retries and
 * counts it; the last one answered as it came). Rejects when no answer came:
 * an error below, the caller's abort, or the peer's own timeout or refusal
 * (`client.policy.rejection` tells them apart).
 */
export async function callBelow(client: TierClient, origin: string, path: string, init: { readonly signal?: AbortSignal; readonly headers?: Record<string, string> }): Promise<TierReply> {
  const once = async (signal: AbortSignal | undefined): Promise<TierReply> => {
    const answer = await request(`${origin}${path}`, { dispatcher: client.dispatcher, ...(signal === undefined ? {} : { signal }), ...(init.headers === undefined ? {} : { headers: init.headers }) });
    await answer.body.text();
    const header = answer.headers['retry-after'];
    return { status: answer.statusCode, retryAfter: typeof header === 'string' ? header : undefined };
  };
  const policy = client.policy;
  if (policy === undefined) return once(init.signal);
  try {
    return await policy.execute(async (signal) => {
      const reply = await once(signal);
      if (failed(reply.status)) throw new FailedReply(reply);
      return reply;
    }, init.signal);
  } catch (error) {
    if (error instanceof FailedReply) return error.reply;
    throw error;
  }
}

/**
 * An interceptor that counts in `sent` each dispatch that goes out to one of
 * `below` (composed innermost: what reaches the wire). A request the naive
 * balancer sends to its own 503 page reaches no server, and the simulation
 * counts none there.
 */
export function counting(sent: PerSecond, below: readonly string[]): Dispatcher.DispatcherComposeInterceptor {
  const servers = new Set(below.map((origin) => new URL(origin).origin));
  return (dispatch) => (options, handler) => {
    if (servers.has(new URL(String(options.origin)).origin)) sent.add(wallNowMs());
    return dispatch(options, handler);
  };
}

/**
 * Tier `t`'s damper client: an `HttpDependency` over `below` (the origins of
 * the tier below, or of the servers) with the lab's own options for the tier
 * under the user's, as `damperTiers` builds the same tier in a simulation.
 * Its attempt timeout is the dependency's own (`retry.attemptTimeout`), so
 * the agent sets none.
 */
export function damperTierClient(scenario: ServiceScenario, t: number, settings: DamperSettings, clock: Clock, below: readonly string[]): TierClient {
  const lab = { ...damperTierOptions(scenario, t), ...damperLiveness(scenario, t) };
  const made = (): HttpDependency => new HttpDependency({ ...dependencyOptions<HttpUpstream>(settings, t, lab, { clock, upstreams: below.map((origin) => ({ id: origin, target: { origin } })) }), upstreams: below });
  const agent = agentFor(undefined);
  const sent = new PerSecond();
  const composed = (d: HttpDependency): Dispatcher => agent.compose(counting(sent, below), damperInterceptor(d));
  let dependency = made();
  let dispatcher = composed(dependency);
  // A new Dependency at time zero, as the simulation's starts there: nothing the warm-up taught it (an ejection, an
  // open breaker, a spent budget) carries into the run. Not when `start` is told of zero, a few hundred ms before it:
  // its health checks' schedule started there put each check that much earlier against the faults than the
  // simulation's (real-balancer: the hung server's failing check ended 0.3 s sooner, docs/lab.md). The warm-up's calls
  // have all ended by then; the connections stay.
  let zero = Infinity;
  const renew = (): void => {
    zero = Infinity;
    cancelZero();
    dependency.close();
    dependency = made();
    dispatcher = composed(dependency);
  };
  let cancelZero = (): void => {};
  return {
    // A request sent at zero goes through the new one, whichever of its timer and the sender's fires first.
    get dispatcher() {
      if (wallNowMs() >= zero) renew();
      return dispatcher;
    },
    sent,
    stats: () => dependency.stats(),
    start: (zeroMs) => {
      sent.zero = zeroMs;
      zero = zeroMs;
      cancelZero = after(zeroMs - wallNowMs(), () => {
        if (zero !== Infinity) renew();
      });
    },
    close: async () => (cancelZero(), dependency.close(), agent.close()),
  };
}
