import { randomInt } from 'node:crypto';
import { createServer } from 'node:net';

/**
 * Where every process of a real run listens and connects: the machine's own
 * loopback, never an interface another machine can reach. A real run is a
 * measurement on this host, and a test tool that listens on the network is a
 * way into it.
 */
export const LOOPBACK = '127.0.0.1';

/**
 * Where servers listen: below Linux's ephemeral range (32768–60999), from
 * which the kernel takes the source port of every outgoing connection and
 * answers `listen(0)`. A port read from `listen(0)` and bound again by a
 * server started after it can be taken in between by any of the run's
 * thousands of connections (the suite's CI read "redis-server on 32833
 * exited early"); below that range only a listener can hold one. A Redis
 * Cluster node also listens on its port + 10,000 (the cluster bus), so the
 * range ends where that one would enter the ephemeral range.
 */
const LOWEST_PORT = 10_000;
const ABOVE_PORTS = 22_000;
const PORT_TRIES = 100;

/** Whether `port` can be listened on at the loopback now. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, LOOPBACK, () => server.close(() => resolve(true)));
  });
}

/**
 * A loopback port free now (and `port + offset` too, for each of `alsoAt`),
 * drawn from {@link LOWEST_PORT}–{@link ABOVE_PORTS}. The runner picks a
 * server's port once and passes it in the server's args, so a restarted
 * server comes back on the port its clients know. Drawn from `node:crypto`,
 * not the run's seeded randomness nor `Math.random` (which a simulation in
 * the same process forbids while it runs): which free port a server gets is
 * the machine's business, not the scenario's.
 */
export async function freePort(alsoAt: readonly number[] = []): Promise<number> {
  for (let i = 0; i < PORT_TRIES; i++) {
    const port = randomInt(LOWEST_PORT, ABOVE_PORTS);
    if ((await bindable(port)) && (await Promise.all(alsoAt.map((offset) => bindable(port + offset)))).every(Boolean)) return port;
  }
  throw new Error(`no free loopback port in ${LOWEST_PORT}–${ABOVE_PORTS - 1} after ${PORT_TRIES} tries`);
}
