import { createServer } from 'node:http';
import { type AddressInfo } from 'node:net';
import { type Clock } from 'damper';
import { type HttpUpstream } from 'damper/http';
import { Agent, type Dispatcher, request } from 'undici';
import { type ServiceScenario } from '../schema/service.js';
import { KeySets } from '../world/key-sets.js';
import { NaiveBalancer, SERVED, ServerError } from '../world/naive-balancer.js';
import { livenessChecks } from '../world/service-damper.js';
import { LOOPBACK } from './loopback.js';
import { after, wallNowMs } from './wall-clock.js';

/**
 * How a real run's caller picks the origin of each request it sends below:
 * the innermost caller (the users without tiers, else the innermost tier)
 * balances over the servers when the scenario has a `balancer`, as the
 * simulation's innermost caller does; every other caller has one origin
 * below it, or round robin.
 */

/** Whether tier `t` (0: the users) is the one that calls the servers. */
export function callsServers(scenario: ServiceScenario, t: number): boolean {
  return t === (scenario.tiers?.count ?? 1) - 1;
}

/** An interceptor that routes each request, and what it holds open. */
export interface OriginPicker {
  readonly interceptor: Dispatcher.DispatcherComposeInterceptor;
  /** Time zero (a wall-clock instant, ms): the picker starts from the state its simulation starts from. */
  start(zeroMs: number): void;
  close(): Promise<void>;
}

/** An interceptor that sends each dispatch to the next of `origins` in turn. */
export function roundRobin(origins: readonly string[]): Dispatcher.DispatcherComposeInterceptor {
  let next = 0;
  return (dispatch) => (options, handler) => {
    const origin = origins[next]!;
    next = (next + 1) % origins.length;
    return dispatch({ ...options, origin }, handler);
  };
}

/**
 * naive tier `t`'s way to `below`: round robin, or, for the caller of the
 * servers when the scenario has a `balancer`, the Missourian's balancer
 * (world/naive-balancer.ts, the simulation's own class on the system
 * clock): each request goes to the next server in service; each server is
 * probed with a real page request (the most-read key, as the simulation's
 * probe), queued at the server like any other and judged by its response
 * time; with no server in service, the request gets the balancer's own 503
 * page, from a listener of this process on loopback (a balancer answers
 * that itself).
 */
export async function naiveOrigins(scenario: ServiceScenario, t: number, below: readonly string[], clock: Clock): Promise<OriginPicker> {
  const shape = scenario.balancer;
  if (shape === undefined || !callsServers(scenario, t)) return { interceptor: roundRobin(below), start: () => {}, close: async () => {} };
  const probes = new Agent({ keepAliveTimeout: 600_000, keepAliveMaxTimeout: 600_000 });
  const endpoints = below.map((origin) => ({
    handle: (key: string) =>
      request(`${origin}/work?key=${encodeURIComponent(key)}`, { dispatcher: probes }).then(
        async (answer) => (await answer.body.text(), answer.statusCode === 200 ? SERVED.origin : new ServerError(`${answer.statusCode}`)),
        (error: unknown) => (error instanceof Error ? error : new ServerError(String(error))),
      ),
  }));
  const probeKey = scenario.database === undefined ? 'key:0' : (new KeySets(scenario.clients, scenario.keys).keys[0] ?? '');
  let door = new NaiveBalancer(clock, endpoints, shape, probeKey);
  const noServer = createServer((_, res) => res.writeHead(503, { 'content-type': 'text/plain' }).end('no web server in service\n'));
  await new Promise<void>((resolve) => noServer.listen(0, LOOPBACK, resolve));
  const nowhere = `http://${LOOPBACK}:${(noServer.address() as AddressInfo).port}`;
  let cancelZero = (): void => {};
  return {
    interceptor: (dispatch) => (options, handler) => {
      const i = door.pick();
      return dispatch({ ...options, origin: i === undefined ? nowhere : below[i]! }, handler);
    },
    // A new balancer at time zero, as the simulation's starts then: every server in service, server i first probed at
    // (i + 1) ÷ n of the interval. The warm-up's one probed from this process's start, at no set phase: with rise 6
    // and fall 1 on a 4-s interval, a phase seconds off moved when servers came back (missourian-2010, docs/lab.md).
    start: (zeroMs) => {
      cancelZero = after(zeroMs - wallNowMs(), () => {
        door.close();
        door = new NaiveBalancer(clock, endpoints, shape, probeKey);
      });
    },
    close: async () => {
      cancelZero();
      door.close();
      noServer.close();
      await probes.close();
    },
  };
}

/**
 * damper tier `t`'s balancer options, for the caller of the servers when
 * the scenario has a `balancer`: the simulation's liveness checks
 * (`livenessChecks`), each an HTTP GET of the server's `/health`, which its
 * process answers at once, outside its workers and admission: a hung
 * (SIGSTOPped) process never answers, a slow one does.
 */
export function damperLiveness(scenario: ServiceScenario, t: number): { balancer?: ReturnType<typeof livenessChecks<HttpUpstream>> } {
  const shape = scenario.balancer;
  if (shape === undefined || !callsServers(scenario, t)) return {};
  const checks = new Agent({ keepAliveTimeout: 600_000, keepAliveMaxTimeout: 600_000 });
  return {
    balancer: livenessChecks<HttpUpstream>(shape, async (upstream, signal) => {
      const answer = await request(`${upstream.origin}/health`, { dispatcher: checks, signal });
      await answer.body.text();
      if (answer.statusCode !== 200) throw new ServerError(`health check answered ${answer.statusCode}`);
    }),
  };
}
