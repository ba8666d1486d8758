/**
 * The origin of the damper/http benchmark (bench/http.ts), run as a child
 * process so its CPU is not the client's: `node:http` on 127.0.0.1, one
 * server per port asked for (`node http-server.js PORTS BODY_BYTES`), each
 * answering every request 200 with the same small body, keep-alive. It counts what it
 * served per path, per port and with the deadline header, so the bench can
 * check that each variant was driven as it says.
 *
 * Protocol, over the IPC channel `fork` opens: the child sends
 * `{ ports: number[] }` once listening; on `'counts'` it answers
 * `{ counts: Record<path, ServedCounts> }`. It exits when the channel closes,
 * so a parent that dies leaves no server behind.
 */
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { DEADLINE_HEADER } from '../src/http/headers.js';

/** What the server answered for one path. */
export interface ServedCounts {
  requests: number;
  /** Requests that carried damper's deadline header. */
  withDeadline: number;
  /** Requests per port, in the order of `ports`. */
  byPort: number[];
}

async function main(): Promise<void> {
  const send = process.send?.bind(process);
  if (send === undefined) throw new Error('http-server.js is started by bench/http.ts with fork(): it needs the IPC channel');
  const portCount = Number(process.argv[2]);
  const bodyBytes = Number(process.argv[3]);
  if (!Number.isInteger(portCount) || portCount < 1 || !Number.isInteger(bodyBytes) || bodyBytes < 0) throw new Error(`usage: http-server.js PORTS BODY_BYTES, got ${process.argv.slice(2).join(' ')}`);
  const body = Buffer.alloc(bodyBytes, 'x');
  const headers = { 'content-type': 'application/octet-stream', 'content-length': String(bodyBytes) };
  const counts: Record<string, ServedCounts> = {};
  const servers: Server[] = [];
  for (let p = 0; p < portCount; p++) {
    const server = createServer((req, res) => {
      const path = req.url ?? '';
      const c = (counts[path] ??= { requests: 0, withDeadline: 0, byPort: new Array<number>(portCount).fill(0) });
      c.requests++;
      c.byPort[p]!++;
      if (req.headers[DEADLINE_HEADER] !== undefined) c.withDeadline++;
      req.resume();
      res.writeHead(200, headers);
      res.end(body);
    });
    // Idle connections stay up between rounds, so no variant pays for a reconnect.
    server.keepAliveTimeout = 120_000;
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    servers.push(server);
  }
  const ports = servers.map((s) => {
    const address = s.address();
    if (address === null || typeof address === 'string') throw new Error('could not read the port');
    return address.port;
  });
  process.on('message', (message) => {
    if (message === 'counts') send({ counts });
  });
  process.on('disconnect', () => process.exit(0));
  send({ ports });
}

await main();
