import { once } from 'node:events';
import { createServer } from 'node:net';

/**
 * Where every process of a real run listens and connects: the machine's own
 * loopback, never an interface another machine can reach. A real run is a
 * measurement on this host, and a test tool that listens on the network is a
 * way into it.
 */
export const LOOPBACK = '127.0.0.1';

/**
 * A loopback port free now: listen on port 0, read the port, close. The
 * runner picks a server's port once and passes it in the server's args, so a
 * restarted server comes back on the port its clients know.
 */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, LOOPBACK);
  await once(server, 'listening');
  const address = server.address();
  server.close();
  await once(server, 'close');
  if (address === null || typeof address === 'string') throw new Error('could not read a free loopback port');
  return address.port;
}
