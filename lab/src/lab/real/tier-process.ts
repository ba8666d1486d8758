// A client tier of a real run (tier t ≥ 1: a front end, a mid tier), in a
// process of its own (`damper lab real`).
//
// A node:http service that serves each request by calling the tier below
// (the next tier, or the servers) and relaying the answer, as an API
// gateway or a mid-tier service does. naive: undici's retry interceptor,
// and nobody tells the tier below when its caller leaves; damper: the
// tier's `HttpDependency` (tier-clients.ts) inside `damperAdmission`, which
// reads the deadline and priority the tier above sent, so the calls below
// carry them on. The tier's own capacity is not part of the scenario (a
// tier without `servers`), so its admission admits without a bound.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { type AddressInfo } from 'node:net';
import { ConcurrencyLimiter, createSystemClock } from 'damper';
import { damperAdmission } from 'damper/http';
import { joinGroup } from './child.js';
import { LOOPBACK } from './loopback.js';
import { processArgs } from './process-side.js';
import { type ListenerProtocol } from './real-messages.js';
import { callBelow, tierClient } from './tier-clients.js';

// First, so that its own start-up is metered and it leaves when the runner does.
const link = joinGroup<ListenerProtocol>({ start: ({ zeroMs }) => (client.start(zeroMs), null), report: () => ({ sent: client.sent.values, stats: client.stats() }) });
const { args, scenario } = processArgs();
const clock = createSystemClock(args.seed);
const tier = args.index;
const client = await tierClient(args, scenario, tier, clock);
const origin = args.below[0]!;

/** A failed call's answer to this tier's caller, as a gateway gives it: the status below when there was one, 504 for a timeout, 503 for overload, else 502. */
function statusOf(error: unknown): number {
  const e = error as { statusCode?: unknown; code?: unknown; name?: unknown };
  if (typeof e.statusCode === 'number') return e.statusCode;
  const peer = client.policy?.rejection(error);
  if (peer !== undefined) return peer === 'timeout' ? 504 : 503;
  const code = String(e.code);
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'LOAD_TIMEOUT' || code === 'DEADLINE_EXCEEDED' || e.name === 'TimeoutError') return 504;
  if (code === 'OVERLOADED' || code === 'BREAKER_OPEN') return 503;
  return 502;
}

async function relay(req: IncomingMessage, res: ServerResponse): Promise<void> {
  let status: number;
  let retryAfter: string | undefined;
  try {
    ({ status, retryAfter } = await callBelow(client, origin, req.url ?? '/', {}));
  } catch (error) {
    status = statusOf(error);
  }
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'text/plain', ...(retryAfter === undefined ? {} : { 'retry-after': retryAfter }) }).end(`${status}\n`);
}

// No bound of its own (the scenario gives this tier none): the admission is there to carry the deadline and priority on.
const admitted = args.variant === 'damper' ? damperAdmission({ clock, limiter: new ConcurrencyLimiter({ clock, limit: 1_000_000, maxQueue: 0 }) }, relay) : undefined;
const http = createServer(admitted ?? ((req, res) => void relay(req, res)));
http.keepAliveTimeout = 600_000;
http.requestTimeout = 0;

http.listen(args.port, LOOPBACK, () => link.ready({ port: (http.address() as AddressInfo).port }));
