import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type LoaderContext } from '../src/index.js';
import { type PgClientLike, postgresLoader } from '../src/origin/postgres.js';
import { sendCancel } from '../src/origin/postgres-cancel.js';

/** A socket that records what the cancel does with it, and lets the test play the server. */
class SocketSpy extends EventEmitter {
  readonly written: Buffer[] = [];
  ended = false;
  destroyed = false;
  where: unknown;

  write(data: Buffer): boolean {
    this.written.push(data);
    return true;
  }

  end(): this {
    this.ended = true;
    return this;
  }

  destroy(): this {
    this.destroyed = true;
    return this;
  }
}

const client = { processID: 4242, secretKey: -7, host: '127.0.0.1', port: 6432 } as unknown as PgClientLike;

describe('a cancel request keeps its socket open until the server closes it (pgbouncer 1.18 crashes on a client that closes first)', () => {
  test('the packet is the protocol’s CancelRequest; our side is closed only after the server’s', async () => {
    const socket = new SocketSpy();
    const outcome = sendCancel(client, (where) => ((socket.where = where), socket as never));
    assert.ok(outcome !== undefined);
    assert.deepEqual(socket.where, { host: '127.0.0.1', port: 6432 });
    socket.emit('connect');
    assert.equal(socket.written.length, 1);
    const packet = socket.written[0]!;
    assert.deepEqual([packet.length, packet.readInt32BE(0), packet.readInt32BE(4), packet.readInt32BE(8), packet.readInt32BE(12)], [16, 16, 80877102, 4242, -7]);
    // pgbouncer frees a cancel's client that leaves before its server link is done with it: ours waits for the server.
    assert.equal(socket.ended, false, 'the client closed its side before the server answered');
    socket.emit('end');
    assert.equal(socket.ended, true, 'closed once the server has');
    assert.equal(await outcome, 'answered');
  });

  test('a unix socket directory is reached by its path; a client without the keys is not cancelled; an error destroys the socket', async () => {
    const socket = new SocketSpy();
    const outcome = sendCancel({ ...client, host: '/run/postgresql' } as PgClientLike, (where) => ((socket.where = where), socket as never));
    assert.deepEqual(socket.where, { path: '/run/postgresql/.s.PGSQL.6432' });
    socket.emit('error', new Error('ECONNREFUSED'));
    assert.equal(socket.destroyed, true);
    assert.equal(await outcome, 'lost');
    assert.equal(sendCancel({ port: 6432 } as unknown as PgClientLike, () => assert.fail('no socket without the keys')), undefined);
    // Closed with neither an answer nor an error: lost, never an answer waited for forever.
    const dropped = new SocketSpy();
    const dropping = sendCancel(client, () => dropped as never);
    dropped.emit('close');
    assert.equal(await dropping, 'lost');
  });
});

/**
 * The loader's side: PostgreSQL's cancel process signals the backend twice
 * (the process, then its group), and closes the cancel's socket only after
 * both. On a busy host the second signal came after the first had cancelled
 * the query, and cancelled the next query on the same pooled connection (8 ms
 * into a test of its own). Here a loopback socket server plays the cancel
 * port and a connection whose query the test settles plays pg's client: the
 * pool gets the connection back only when the server has closed the socket.
 */
describe('a connection whose query was cancelled goes back to the pool only once the cancel is over', () => {
  let server: Server;
  const cancels: Socket[] = [];
  let arrived: (socket: Socket) => void = () => {};

  before(async () => {
    server = createServer((socket) => {
      cancels.push(socket);
      socket.once('data', () => arrived(socket));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
  });

  after(async () => {
    for (const socket of cancels) socket.destroy();
    server.close();
    await once(server, 'close');
  });

  /** A load on a connection whose query settles when the test says, aborted once its query is sent; resolves when the cancel reached the server. */
  async function abortedLoad(): Promise<{ settle: { resolve: (rows: unknown[]) => void; reject: (error: unknown) => void }; released: Promise<boolean | undefined>; cancel: Socket }> {
    const port = (server.address() as { port: number }).port;
    let settle!: { resolve: (rows: unknown[]) => void; reject: (error: unknown) => void };
    let sent!: () => void;
    const querySent = new Promise<void>((r) => (sent = r));
    let release!: (destroy: boolean | undefined) => void;
    const released = new Promise<boolean | undefined>((r) => (release = r));
    const connection = {
      processID: 4242,
      secretKey: 7,
      host: '127.0.0.1',
      port,
      query: () =>
        new Promise<{ rows: unknown[] }>((resolve, reject) => {
          settle = { resolve: (rows) => resolve({ rows }), reject };
          sent();
        }),
      release,
    } as unknown as PgClientLike;
    const load = postgresLoader({ pool: { connect: () => Promise.resolve(connection) }, text: 'SELECT pg_sleep(5)', row: (r) => r });
    const ac = new AbortController();
    const reason = new Error('load timeout');
    const cancelArrived = new Promise<Socket>((r) => (arrived = r));
    const pending = load({ key: 'k', signal: ac.signal, stale: undefined, setTags: () => {} } as LoaderContext<unknown>);
    await querySent;
    ac.abort(reason);
    await assert.rejects(pending, (e) => e === reason, 'the load rejects at once with the abort’s reason');
    return { settle, released, cancel: await cancelArrived };
  }

  /** Whether `released` settled within a few turns of the event loop. */
  async function settledNow(released: Promise<unknown>): Promise<boolean> {
    let settled = false;
    void released.then(() => (settled = true));
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    return settled;
  }

  test('cancelled by it: kept once the server closes the cancel’s socket, not before', async () => {
    const { settle, released, cancel } = await abortedLoad();
    settle.reject(Object.assign(new Error('canceling statement due to user request'), { code: '57014' }));
    assert.equal(await settledNow(released), false, 'given back while the second signal could still come');
    cancel.end();
    assert.equal(await released, false, 'kept: the cancel is over');
  });

  test('cancelled, but the cancel’s socket failed: destroyed', async () => {
    const { settle, released, cancel } = await abortedLoad();
    settle.reject(Object.assign(new Error('canceling statement due to user request'), { code: '57014' }));
    cancel.resetAndDestroy();
    assert.equal(await released, true);
  });

  test('finished before the cancel landed: destroyed at once, the cancel may still come', async () => {
    const { settle, released } = await abortedLoad();
    settle.resolve([]);
    assert.equal(await released, true);
  });
});
