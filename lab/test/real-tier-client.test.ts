import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { type AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createSystemClock } from 'damper';
import { request } from 'undici';
import { loadScenario } from '../src/lab/lab.js';
import { LOOPBACK } from '../src/lab/real/loopback.js';
import { damperTierClient } from '../src/lab/real/tier-clients.js';
import { wallNowMs } from '../src/lab/real/wall-clock.js';
import { type ServiceScenario } from '../src/lab/schema/service.js';

describe('a real run’s damper client starts from its simulation’s state, at time zero', () => {
  test('the Dependency is made anew at zero, not when the client is told of zero (a few hundred ms before it)', async (t) => {
    // A server that answers every page and health check at once; the users' client balances over it with the fixture's liveness checks.
    const server = createServer((_, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n'));
    await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
    const origin = `http://${LOOPBACK}:${(server.address() as AddressInfo).port}`;
    const scenario = (await loadScenario('test/fixtures/real-balancer.json')) as ServiceScenario;
    const client = damperTierClient(scenario, 0, {}, createSystemClock(1), [origin]);
    t.after(async () => {
      await client.close();
      server.closeAllConnections();
      server.close();
    });
    const call = async (): Promise<void> => {
      await (await request(`${origin}/work`, { dispatcher: client.dispatcher })).body.text();
    };
    const calls = (): number => (client.stats() as { retry: { calls: number } }).retry.calls;

    // The warm-up's call.
    await call();
    assert.equal(calls(), 1);
    const zero = wallNowMs() + 300;
    client.start(zero);
    // Until zero, the warm-up's Dependency: its health checks' schedule must not start before the simulation's does.
    assert.equal(calls(), 1);
    while (wallNowMs() < zero) await sleep(zero - wallNowMs());
    // A request sent at zero goes through the new one.
    await call();
    assert.equal(calls(), 1);
    await call();
    assert.equal(calls(), 2);
  });
});
