// PostgreSQL's cancel request, as `postgresLoader` sends it when a load is aborted (postgres.ts).
import { connect as netConnect, type Socket } from 'node:net';
import { type PgClientLike } from './postgres.js';

/** How the cancel reaches the server: `node:net`'s `connect`, or a test's socket. */
type Connect = (options: { path: string } | { host: string; port: number }) => Pick<Socket, 'on' | 'once' | 'write' | 'end' | 'destroy'>;

/**
 * How a cancel request ended. `answered`: the server closed the socket, which
 * PostgreSQL does only once it has signalled the backend, so nothing of this
 * cancel can reach the connection afterwards. `lost`: the socket failed, and
 * the cancel may or may not have been delivered.
 */
export type CancelOutcome = 'answered' | 'lost';

/**
 * Sends PostgreSQL's CancelRequest (protocol 3.0: length 16, code 80877102,
 * backend pid, secret key) on a new socket to the client's server, like
 * libpq's `PQcancel`. Returns undefined when the client does not expose what
 * it needs (pg's `processID`, `secretKey`, `host`, `port`); otherwise how the
 * request ended (it never rejects: a cancel is best effort).
 *
 * The socket stays open until the server closes it, as libpq keeps it: that
 * close is the protocol's answer. A client that closes its side first can
 * crash pgbouncer 1.18 (Debian 12's): it frees the cancel's client while the
 * server connection it is linked to still points at it (pgbouncer#801,
 * fixed upstream in May 2023 by #846). Seen here: damper's loads
 * timing out under a flushed cache took a real run's pgbouncer down within
 * seconds, and the database with it for every server.
 *
 * The answer also tells the loader when the connection is safe to reuse.
 * PostgreSQL's cancel process sends SIGINT twice, to the backend and then to
 * its process group (postmaster.c's `signal_child`). The first one cancels
 * the query; on a busy host the second can come many milliseconds later, and
 * if a new query has started on the connection by then, it cancels that one
 * (seen in this suite: a query cancelled 8 ms after it started, by the
 * previous test's cancel). The process closes the socket only after both.
 */
export function sendCancel(client: PgClientLike, connect: Connect = netConnect): Promise<CancelOutcome> | undefined {
  const { processID, secretKey, host, port } = client as unknown as { processID?: unknown; secretKey?: unknown; host?: unknown; port?: unknown };
  if (typeof processID !== 'number' || typeof secretKey !== 'number' || typeof port !== 'number') return undefined;
  const where = typeof host === 'string' && host !== '' ? host : 'localhost';
  const packet = Buffer.alloc(16);
  packet.writeInt32BE(16, 0);
  packet.writeInt32BE(80877102, 4);
  packet.writeInt32BE(processID, 8);
  packet.writeInt32BE(secretKey, 12);
  const socket = connect(where.startsWith('/') ? { path: `${where}/.s.PGSQL.${port}` } : { host: where, port });
  return new Promise<CancelOutcome>((resolve) => {
    socket.on('error', () => {
      socket.destroy();
      resolve('lost');
    });
    socket.once('connect', () => socket.write(packet));
    // The server's close, once it has handled the request: only then is ours sent.
    socket.once('end', () => {
      socket.end();
      resolve('answered');
    });
    // Closed with neither (destroyed): the connection must not wait for an answer that cannot come.
    socket.once('close', () => resolve('lost'));
  });
}
