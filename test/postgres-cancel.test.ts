import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, test } from 'node:test';
import { type PgClientLike } from '../src/origin/postgres.js';
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
  test('the packet is the protocol’s CancelRequest; our side is closed only after the server’s', () => {
    const socket = new SocketSpy();
    assert.equal(
      sendCancel(client, (where) => ((socket.where = where), socket as never)),
      true,
    );
    assert.deepEqual(socket.where, { host: '127.0.0.1', port: 6432 });
    socket.emit('connect');
    assert.equal(socket.written.length, 1);
    const packet = socket.written[0]!;
    assert.deepEqual([packet.length, packet.readInt32BE(0), packet.readInt32BE(4), packet.readInt32BE(8), packet.readInt32BE(12)], [16, 16, 80877102, 4242, -7]);
    // pgbouncer frees a cancel's client that leaves before its server link is done with it: ours waits for the server.
    assert.equal(socket.ended, false, 'the client closed its side before the server answered');
    socket.emit('end');
    assert.equal(socket.ended, true, 'closed once the server has');
  });

  test('a unix socket directory is reached by its path; a client without the keys is not cancelled; an error destroys the socket', () => {
    const socket = new SocketSpy();
    sendCancel({ ...client, host: '/run/postgresql' } as PgClientLike, (where) => ((socket.where = where), socket as never));
    assert.deepEqual(socket.where, { path: '/run/postgresql/.s.PGSQL.6432' });
    socket.emit('error', new Error('ECONNREFUSED'));
    assert.equal(socket.destroyed, true);
    assert.equal(sendCancel({ port: 6432 } as unknown as PgClientLike, () => assert.fail('no socket without the keys')), false);
  });
});
