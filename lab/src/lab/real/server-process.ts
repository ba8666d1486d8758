// A server of a real run, in a process of its own (`damper lab real`).
//
// A node:http server in front of the very `Server` the simulation runs (its
// workers, its FIFO queue, its refusals beyond `maxQueue`, its slowdown with
// what it holds), on real timers: a request waits for a real worker and its
// service time is spent waiting, not computing, so many servers fit on two
// cores. What the simulation models of the network, HTTP, undici and the
// library's guards is here for real around it. naive: every request is
// served, its caller gone or not (node:http does not say, unless asked);
// damper: behind `damperAdmission`, with the options the simulation gives
// the same server (`damperServerAdmission` under the configuration's
// `admission(i)`), and a request whose signal has aborted is dropped by the
// worker that takes it up, as in the simulation. With a database, each
// request reads its key through the world's own data tier (server-data.ts:
// the cache in this process's memory, PostgreSQL behind it), and the
// queries this server sends the database are the origin's load; the tier's
// one cache is the cache tier's process instead (cache-tier-process.ts),
// read over loopback, which sends the queries.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { type AddressInfo } from 'node:net';
import { createSystemClock, type Priority, type RequestScope, seededRandom } from 'damper';
import { damperAdmission } from 'damper/http';
import { admissionOptions, damperSettings } from '../damper-config.js';
import { stream, STREAMS } from '../engine/streams.js';
import { renderOn } from '../world/render.js';
import { damperServerAdmission } from '../world/service-damper.js';
import { activeAt, ejectedAt, serviceState } from '../world/service-faults.js';
import { type DataRead, type Job, type Outcome, Server } from '../world/service-server.js';
import { joinGroup } from './child.js';
import { LOOPBACK } from './loopback.js';
import { atFaultBounds, processArgs } from './process-side.js';
import { type ProcessReport, type ServerProcessProtocol } from './real-messages.js';
import { OWN, type ServerData, serverData } from './server-data.js';
import { CacheTierClient } from './cache-tier-link.js';

// First, so that its own start-up is metered and it leaves when the runner does.
const link = joinGroup<ServerProcessProtocol>({
  start: ({ zeroMs, life }) => (start(zeroMs, life), null),
  report: () => report(),
  // The write path's push (an invalid value's start); a cache flush. The database itself is written by the runner.
  push: ({ key, row }) => (data?.tier.push(key, row), null),
  flush: () => (data?.tier.flush(), null),
  prewarm: async () => (await data?.prewarm(), null),
});
const { args, scenario } = processArgs();
const clock = createSystemClock(args.seed);
const settings = args.variant === 'damper' ? await damperSettings(scenario, clock) : {};
const missService = scenario.servers.missService;
// A row got from the database is rendered on this server's workers or cores (a timer's wait, as its other service times), its time drawn as the simulation's.
const render = missService === undefined ? undefined : renderOn(() => server, missService, stream(args.seed * 1_000 + args.index, STREAMS.renderTime));
// The tier's one cache is a process of its own (cache-tier-process.ts), which the runner pushes, flushes and prewarms; else this server holds its data tier.
const data: ServerData | undefined = args.cacheTier === undefined ? await serverData(scenario, args, clock, settings, render) : undefined;
// Traffic before time zero (the warm-up) finds the steady state too; the runner puts it back just before time zero (`prewarm`).
await data?.prewarm();
const read: DataRead | undefined = args.cacheTier === undefined ? data?.tier.reader(OWN) : (await CacheTierClient.connect(args.cacheTier)).read;
const server: Server = new Server(clock, scenario.servers, seededRandom(args.seed * 1_000 + args.index), read);

/**
 * A server's outcome as HTTP: a value is a 200; a refusal (full queue) a
 * 503; work dropped unstarted (its caller gone) a 504; else a 502. An
 * invalid value served as if it were valid is a 422: the page was made, but
 * wrong, and the users count it bad, as the simulation's clients do.
 */
const STATUS: Readonly<Record<Outcome, number>> = { ok: 200, invalid: 422, refused: 503, shed: 503, dropped: 504, error: 502 };

function answer(res: ServerResponse, outcome: Outcome): void {
  // The caller has gone: nobody reads this answer, but the work was done (naive: node:http never said).
  if (res.destroyed) return;
  res.writeHead(STATUS[outcome], { 'content-type': 'text/plain' }).end(`${outcome}\n`);
}

function keyOf(req: IncomingMessage): string {
  return new URL(req.url ?? '/', 'http://server').searchParams.get('key') ?? 'key:0';
}

/** naive: submitted as it comes; nobody tells the server its caller left. */
const naive = (req: IncomingMessage, res: ServerResponse): void => server.submit({ key: keyOf(req), priority: 'normal', done: (outcome) => answer(res, outcome) });

/** damper: admitted, then submitted with its scope's signal: a worker drops what nobody waits for any more. */
const admitted = (req: IncomingMessage, res: ServerResponse, scope: RequestScope): Promise<void> =>
  new Promise<void>((over) => {
    const job: Job = {
      key: keyOf(req),
      priority: (scope.priority ?? 'normal') satisfies Priority,
      abandoned: () => scope.signal.aborted,
      done: (outcome) => (answer(res, outcome), over()),
    };
    server.submit(job);
  });

const listener =
  args.variant === 'damper' ? damperAdmission(admissionOptions(settings, args.index, damperServerAdmission(scenario, clock), { clock }), admitted) : naive;

// /health is the balancer's liveness check (damper's; origin-picker.ts), answered at once, outside the workers and
// admission: a hung process never answers it, a slow one does.
const http = createServer((req, res) => (req.url === '/health' ? void res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n') : listener(req, res)));
// Connections kept open longer than any run: the run measures the stacks, not reconnection after idle.
http.keepAliveTimeout = 600_000;
http.requestTimeout = 0;

/** The faults' effect on this server at `s` seconds (slowdown, capacity kept), as the simulation applies it; a hang and a restart are done to the process itself. */
function apply(s: number): void {
  const state = serviceState(scenario, activeAt(scenario, s), s).servers[args.index]!;
  server.slowdown = state.slowdown;
  server.keep = state.keep;
  // The cache nodes ejected now are off this server's ring (their pacers close them at the same instant: cache-nodes-process.ts).
  data?.ring?.ejected(ejectedAt(scenario, s));
}

/**
 * Time zero (a restarted server is told it again): each fault's start and
 * end is applied at its instant. The first process starts from the steady
 * state at zero; a restarted one is a new process: its own cache is empty
 * (damper's warms, as `cache.warm` says), as the simulation restarts it.
 */
function start(zero: number, life: 'first' | 'restarted'): void {
  if (data !== undefined) data.pool.sent.zero = zero;
  if (life === 'restarted') data?.tier.restart?.(OWN);
  atFaultBounds(scenario, zero, apply);
}

function report(): ProcessReport {
  const sent = data === undefined ? {} : { sent: data.pool.sent.values };
  return listener === naive ? sent : { ...sent, stats: (listener as ReturnType<typeof damperAdmission>).stats() };
}

http.listen(args.port, LOOPBACK, () => link.ready({ port: (http.address() as AddressInfo).port }));
