// A tier of the retry-storm test, in a process of its own. Not a test.
//
// A node:http service that serves each request by calling the service below
// it and relaying the answer, as an API gateway or a mid-tier service does.
// Its outgoing calls have a timeout per attempt and three retries, as a
// typical service is configured: in the naive stack through undici's retry
// interceptor, in the damper stack through damperInterceptor. The handler is
// the same in both.
//
// argv: a ServiceConfig as JSON, the tier's name (tier1, tier2), the origin
// of the service below.
import { type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent, type Dispatcher, interceptors, request } from 'undici';
import { ConcurrencyLimiter, RetryBudget } from '../../src/index.js';
import { damperAdmission, damperInterceptor, HttpDependency } from '../../src/http/index.js';
import { serve, serviceConfig } from './storm-service.js';
import { PerSecond, type ServiceConfig, WORLD } from './storm-world.js';

const config = serviceConfig();
const [name, below] = process.argv.slice(3);
if ((name !== 'tier1' && name !== 'tier2') || below === undefined) throw new Error('usage: storm-tier <config> tier1|tier2 <origin below>');
const attemptTimeout = WORLD.attemptTimeoutMs[name];
const origin: string = below;
const series = new PerSecond();

/** undici's own list of retried error codes, and its timeouts: without these, slowness is an error, never retried. */
const RETRIED_CODES = ['ECONNRESET', 'ECONNREFUSED', 'ENOTFOUND', 'ENETDOWN', 'ENETUNREACH', 'EHOSTDOWN', 'EHOSTUNREACH', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'];
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'LOAD_TIMEOUT', 'DEADLINE_EXCEEDED']);
const OVERLOAD_CODES = new Set(['OVERLOADED', 'BREAKER_OPEN']);

// The same agent in both stacks: the timeout of one attempt is undici's headersTimeout.
const base = new Agent({ headersTimeout: attemptTimeout, bodyTimeout: attemptTimeout });
const outgoing = outgoingFor(config);

async function relay(_req: IncomingMessage, res: ServerResponse): Promise<void> {
  series.add('served');
  let status: number;
  let retryAfter: string | undefined;
  try {
    const answer = await request(`${origin}/work`, { dispatcher: outgoing.dispatcher });
    await answer.body.text();
    status = answer.statusCode;
    const header = answer.headers['retry-after'];
    retryAfter = typeof header === 'string' ? header : undefined;
  } catch (error) {
    status = statusOf(error);
  }
  // The caller left before the answer: this tier worked (and called below) for no one.
  if (res.destroyed) series.add('wasted');
  res.writeHead(status, { 'content-type': 'text/plain', ...(retryAfter === undefined ? {} : { 'retry-after': retryAfter }) }).end(`${status}\n`);
}

/** A failed call's answer to this tier's caller, as a gateway gives it: 504 for a timeout, 503 for overload, 502 else. */
function statusOf(error: unknown): number {
  const e = error as { statusCode?: unknown; code?: unknown; name?: unknown };
  if (typeof e.statusCode === 'number') return e.statusCode;
  if (TIMEOUT_CODES.has(String(e.code)) || e.name === 'TimeoutError') return 504;
  if (OVERLOAD_CODES.has(String(e.code))) return 503;
  return 502;
}

interface Outgoing {
  readonly dispatcher: Dispatcher;
  readonly stats: () => unknown;
}

function outgoingFor(c: ServiceConfig): Outgoing {
  if (c.stack === 'naive') {
    // undici's retry interceptor: exponential backoff from 500 ms (its defaults), 3 retries, timeouts retried.
    return { dispatcher: base.compose(interceptors.retry({ maxRetries: WORLD.retries, errorCodes: RETRIED_CODES })), stats: () => undefined };
  }
  // damper: the same timeout per attempt, the deadline from the incoming request, retries under a budget of the default ratio.
  const dependency = new HttpDependency({
    upstreams: [origin],
    budget: new RetryBudget(c.setup.budgetRatio === undefined ? {} : { ratio: c.setup.budgetRatio }),
    retry: { maxAttempts: WORLD.retries + 1, attemptTimeout },
    ...(c.setup.throttleAndBreaker ? {} : { throttle: false, breaker: false }),
  });
  // Sampled for the per-second table: the share of calls the throttle turns away, and whether the breaker is open.
  setInterval(() => {
    const guards = dependency.stats().upstreams[0];
    series.max('throttle%', Math.round(100 * (guards?.throttle?.rejectionProbability ?? 0)));
    series.max('open', guards?.breaker?.state === 'open' ? 1 : 0);
  }, 100).unref();
  return { dispatcher: base.compose(damperInterceptor(dependency)), stats: () => dependency.stats() };
}

function listenerFor(c: ServiceConfig): { listener: (req: IncomingMessage, res: ServerResponse) => void; stats: () => unknown } {
  if (c.stack === 'naive' || !c.setup.admission) return { listener: (req, res) => void relay(req, res), stats: () => undefined };
  // As many slots as the back end has: a tier's request holds one for as long as the call below it.
  const admitted = damperAdmission({ limiter: new ConcurrencyLimiter({ limit: WORLD.backend.slots }) }, relay);
  return { listener: admitted, stats: () => ({ admission: admitted.stats(), limiter: admitted.limiter.stats() }) };
}

const incoming = listenerFor(config);
serve(incoming.listener, series, { extra: () => ({ incoming: incoming.stats(), outgoing: outgoing.stats() }) });
