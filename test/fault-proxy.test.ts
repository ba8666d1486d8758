import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { type Server, type Socket, createConnection, createServer } from 'node:net';
import { after, afterEach, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { FaultProxy } from './support/fault-proxy.js';

// Real sockets in real time (the chaos test's tool, not library code on the
// virtual clock). Lower bounds are the property under test; upper bounds are
// generous, for a slow, busy 2-core machine.

let echo: Server;
let echoPort: number;
const upstreams = new Set<Socket>();

before(async () => {
  echo = createServer((s) => {
    upstreams.add(s);
    s.on('close', () => upstreams.delete(s));
    s.on('error', () => {});
    s.pipe(s);
  });
  echo.listen(0, '127.0.0.1');
  await once(echo, 'listening');
  echoPort = (echo.address() as { port: number }).port;
});

after(async () => {
  echo.close();
  await once(echo, 'close');
});

let proxy: FaultProxy;
const clients: Socket[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  await proxy?.close();
});

/** A client through the proxy that collects everything it receives. */
async function connect(): Promise<{ socket: Socket; received: () => Buffer; waitFor: (bytes: number) => Promise<number> }> {
  const socket = createConnection({ host: proxy.host, port: proxy.port });
  clients.push(socket);
  await once(socket, 'connect');
  const chunks: Buffer[] = [];
  let total = 0;
  const waiters: { bytes: number; resolve: (at: number) => void }[] = [];
  socket.on('data', (b: Buffer) => {
    chunks.push(b);
    total += b.length;
    for (const w of waiters.filter((x) => total >= x.bytes)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(performance.now());
    }
  });
  return {
    socket,
    received: () => Buffer.concat(chunks),
    // Resolves with the time the `bytes`-th byte arrived.
    waitFor: (bytes) => (total >= bytes ? Promise.resolve(performance.now()) : new Promise((resolve) => waiters.push({ bytes, resolve }))),
  };
}

/** Round trip of one small message on an open connection, ms. */
async function roundTrip(c: Awaited<ReturnType<typeof connect>>): Promise<number> {
  const before = c.received().length;
  const start = performance.now();
  c.socket.write('ping');
  return (await c.waitFor(before + 4)) - start;
}

describe('fault proxy: a dependency that is slow, not dead', () => {
  test('forwards bytes unchanged when healthy', async () => {
    proxy = await FaultProxy.start({ port: echoPort });
    const c = await connect();
    c.socket.write('hello');
    await c.waitFor(5);
    assert.equal(c.received().toString(), 'hello');
    assert.deepEqual(proxy.stats().bytes, { requests: 5, replies: 5 });
  });

  // Node's timers run on libuv's loop time, read once per turn of the loop: a timer can fire up to a millisecond before
  // performance.now() says its delay has passed (seen in CI: a 100-ms hold released at 99.85 ms). The bounds below
  // allow that millisecond and no more.
  const TIMER_SLACK_MS = 1;

  test('latency delays each direction by at least the set amount', async () => {
    proxy = await FaultProxy.start({ port: echoPort });
    const c = await connect();
    proxy.set('replies', { latencyMs: 150 });
    const replies = await roundTrip(c);
    assert.ok(replies >= 150 - TIMER_SLACK_MS && replies < 1_000, `round trip with 150 ms on replies: ${replies} ms`);
    proxy.set('both', { latencyMs: 100 });
    const both = await roundTrip(c);
    assert.ok(both >= 200 - 2 * TIMER_SLACK_MS && both < 1_200, `round trip with 100 ms each way: ${both} ms`);
  });

  test('changes apply to a connection already open, including to the bytes it has queued', async () => {
    proxy = await FaultProxy.start({ port: echoPort });
    const c = await connect();
    const healthy = await roundTrip(c);
    proxy.set('replies', { latencyMs: 200 });
    const slow = await roundTrip(c);
    assert.ok(slow >= 200 - TIMER_SLACK_MS, `slowed on the open connection: ${slow} ms (healthy ${healthy} ms)`);
    // A reply held by a 10 s latency goes out as soon as the latency is lifted.
    proxy.set('replies', { latencyMs: 10_000 });
    const start = performance.now();
    c.socket.write('late');
    await sleep(100);
    proxy.reset();
    const arrived = (await c.waitFor(12)) - start;
    assert.ok(arrived >= 100 - TIMER_SLACK_MS && arrived < 2_000, `released by reset: ${arrived} ms`);
    assert.equal(c.received().toString(), 'pingpinglate');
  });

  test('a bandwidth cap makes N bytes take about N / rate seconds', async () => {
    proxy = await FaultProxy.start({ port: echoPort });
    const c = await connect();
    const rate = 200_000;
    const size = 100_000; // 0.5 s at the cap
    proxy.set('replies', { bytesPerSecond: rate });
    const start = performance.now();
    c.socket.write(randomBytes(size));
    const took = ((await c.waitFor(size)) - start) / 1_000;
    assert.ok(took >= 0.45 && took < 1.5, `${size} bytes at ${rate} B/s took ${took.toFixed(3)} s (expected ≈ 0.5)`);
  });

  test('the cap is shared by all connections: one slow node, not one slow client', async () => {
    proxy = await FaultProxy.start({ port: echoPort });
    const a = await connect();
    const b = await connect();
    proxy.set('replies', { bytesPerSecond: 100_000 });
    const start = performance.now();
    a.socket.write(randomBytes(25_000));
    b.socket.write(randomBytes(25_000));
    const took = (Math.max(await a.waitFor(25_000), await b.waitFor(25_000)) - start) / 1_000;
    assert.ok(took >= 0.45 && took < 1.5, `2 × 25,000 bytes at 100,000 B/s in all took ${took.toFixed(3)} s (expected ≈ 0.5)`);
  });

  test('a stall holds every byte, then releases them in order', async () => {
    proxy = await FaultProxy.start({ port: echoPort });
    const c = await connect();
    proxy.set('requests', { stalled: true });
    for (const part of ['one ', 'two ', 'three']) {
      c.socket.write(part);
      await sleep(20);
    }
    await sleep(250);
    assert.equal(c.received().length, 0, 'nothing passes a stall');
    assert.equal(proxy.stats().connections, 1, 'the connection stays open');
    proxy.set('requests', {});
    await c.waitFor(13);
    assert.equal(c.received().toString(), 'one two three');
  });

  test('1 MB arrives intact and in order under latency and a bandwidth cap', async () => {
    proxy = await FaultProxy.start({ port: echoPort });
    const c = await connect();
    proxy.set('requests', { latencyMs: 20 });
    proxy.set('replies', { latencyMs: 30, bytesPerSecond: 4_000_000 });
    const data = randomBytes(1 << 20);
    // Written in uneven pieces, so the proxy splits and queues chunks of many sizes.
    for (let at = 0, n = 1; at < data.length; at += n, n = (n * 7 + 13) % 65_521) c.socket.write(data.subarray(at, at + n));
    await c.waitFor(data.length);
    assert.ok(c.received().equals(data), 'the bytes that came back are the bytes sent');
  });

  test('back-pressure: a stalled proxy stops reading, it does not buffer without bound', async () => {
    proxy = await FaultProxy.start({ port: echoPort });
    const c = await connect();
    proxy.set('requests', { stalled: true });
    const data = randomBytes(32 << 20);
    c.socket.write(data);
    await sleep(300);
    const { queued } = proxy.stats();
    assert.ok(queued <= 2 << 20, `the proxy holds ${queued} bytes (its high-water mark is 1 MiB, plus one read)`);
    assert.ok(c.socket.writableLength > 0, 'the client is pushed back (its writes wait)');
    proxy.reset();
    await c.waitFor(data.length);
    assert.ok(c.received().equals(data), 'all 32 MiB arrive, in order, once the stall is lifted');
  });

  test('an upstream that goes away closes the client; close() ends every connection', async () => {
    proxy = await FaultProxy.start({ port: echoPort });
    const a = await connect();
    await roundTrip(a);
    const closedA = once(a.socket, 'close');
    for (const s of upstreams) s.destroy();
    await closedA;
    const b = await connect();
    await roundTrip(b);
    const closedB = once(b.socket, 'close');
    await proxy.close();
    await closedB;
    assert.equal(proxy.stats().connections, 0);
  });

  test('refuses a target that is not on loopback', async () => {
    for (const host of ['10.0.0.1', '192.168.1.1', 'example.com', '::2', '0.0.0.0']) {
      await assert.rejects(FaultProxy.start({ host, port: 6379 }), RangeError, host);
    }
    proxy = await FaultProxy.start({ host: 'localhost', port: echoPort });
  });

  test('refuses faults it cannot apply', async () => {
    proxy = await FaultProxy.start({ port: echoPort });
    assert.throws(() => proxy.set('replies', { latencyMs: -1 }), RangeError);
    assert.throws(() => proxy.set('replies', { bytesPerSecond: 0 }), RangeError);
    assert.throws(() => proxy.set('replies', { bytesPerSecond: Number.POSITIVE_INFINITY }), RangeError);
  });
});
