import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { performance } from 'node:perf_hooks';
import { after, before, describe, test, type TestContext } from 'node:test';
import { createSystemClock } from 'damper';
import fc from 'fast-check';
import { Redis, type RedisOptions } from 'ioredis';
import { freePort, LOOPBACK } from '../src/lab/real/loopback.js';
import { NodePacer, RespFrames } from '../src/lab/real/node-pacer.js';
import { type CacheNodeShape } from '../src/lab/world/cache-nodes.js';

/**
 * The real run's cache node: a real redis-server behind a NodePacer, which
 * serves it at the scenario's pace with the simulation's own CacheNode. One
 * redis-server for the file, a pacer per test, each test on its own keys.
 */

/** Room for every test's commands: the queue never refuses unless a test wants it to. */
const ROOMY: CacheNodeShape = { capacityOps: 5_000, latencyMs: 1, maxQueue: 10_000 };
/** How long a redis-server has to say it is ready, ms: generous, for a busy machine. */
const READY_MS = 10_000;
/** A test that waits for an event fails after this rather than hang the suite: a bound, not a timing. */
const WAITS = { timeout: 10_000 };

let redis: ChildProcess;
let redisPort: number;
/** A connection straight to redis, past every pacer: what is really there. */
let direct: Redis;

before(async () => {
  redisPort = await freePort();
  redis = spawn('redis-server', ['--port', String(redisPort), '--bind', LOOPBACK, '--save', '', '--appendonly', 'no'], { cwd: tmpdir(), stdio: ['ignore', 'pipe', 'inherit'] });
  await ready(redis);
  direct = new Redis({ host: LOOPBACK, port: redisPort, lazyConnect: true });
  await direct.connect();
});

after(async () => {
  direct?.disconnect();
  if (redis.exitCode === null && redis.signalCode === null) {
    redis.kill('SIGKILL');
    await once(redis, 'exit');
  }
});

/** Resolves when redis-server says it accepts connections; fails if it exits first or takes longer than {@link READY_MS}. */
async function ready(child: ChildProcess): Promise<void> {
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server not ready after ${READY_MS} ms:\n${output}`)), READY_MS);
    child.once('exit', (code, signal) => reject(new Error(`redis-server exited (${code ?? signal}):\n${output}`)));
    child.once('error', reject);
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
      if (output.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
}

/** A pacer in front of the file's redis, listening, closed after the test. */
async function pacer(t: TestContext, shape: CacheNodeShape): Promise<{ pacer: NodePacer; port: number }> {
  const p = new NodePacer(createSystemClock(1), shape, redisPort);
  const port = await p.listen();
  t.after(() => p.close());
  return { pacer: p, port };
}

/** An ioredis client through the pacer at `port`, ready, disconnected after the test. */
async function client(t: TestContext, port: number, options: RedisOptions = {}): Promise<Redis> {
  const c = new Redis({ host: LOOPBACK, port, lazyConnect: true, ...options });
  // Not once it has ended: ioredis would arm a 2-s timer for a stream that already closed, and hold the test open.
  t.after(() => {
    if (c.status !== 'end') c.disconnect();
  });
  await c.connect();
  return c;
}

/** Writes `bytes` on a raw socket to `port` and resolves with what comes back once `length` bytes have. */
async function raw(port: number, bytes: string, length: number): Promise<string> {
  const socket = connect({ host: LOOPBACK, port });
  try {
    socket.write(bytes);
    let reply = '';
    for await (const chunk of socket) {
      reply += (chunk as Buffer).toString('latin1');
      if (reply.length >= length) break;
    }
    return reply;
  } finally {
    socket.destroy();
  }
}

/** A pipeline of `n` INCRs of `key`: each reply says how many reached redis before it, so order and loss show. */
function incrs(c: Redis, key: string, n: number): ReturnType<Redis['pipeline']> {
  const pipeline = c.pipeline();
  for (let i = 0; i < n; i++) pipeline.incr(key);
  return pipeline;
}

/** 1, 2, … `n`: what `n` INCRs of a fresh key answer, in order. */
function counting(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i + 1);
}

/** The results of an ioredis pipeline, each a value or its error's message. */
async function results(pipeline: ReturnType<Redis['pipeline']>): Promise<unknown[]> {
  const replies = (await pipeline.exec())!;
  return replies.map(([error, value]) => (error === null ? value : (error as Error).message));
}

describe('RESP frames are found however the stream is cut', () => {
  /** One RESP2 value, as redis sends it, of any nesting. */
  const { value } = fc.letrec<{ value: string }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.string({ unit: 'grapheme-ascii' }).map((s) => `+${s.replace(/[\r\n]/g, '')}\r\n`),
      fc.integer().map((n) => `:${n}\r\n`),
      fc.string().map((s) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`),
      fc.constantFrom('$-1\r\n', '*-1\r\n', '*0\r\n', '$0\r\n\r\n', '-ERR no\r\n'),
      fc.array(tie('value'), { minLength: 1, maxLength: 4 }).map((items) => `*${items.length}\r\n${items.join('')}`),
    ),
  }));

  test('replies: every frame ends where it was written to end, cut at any offsets', () => {
    assertFramesFound('replies', value);
  });

  test('commands: arrays of bulk strings and inline lines, cut at any offsets', () => {
    const bulk = fc.string().map((s) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`);
    const command = fc.oneof(
      fc.array(bulk, { minLength: 1, maxLength: 4 }).map((args) => `*${args.length}\r\n${args.join('')}`),
      fc.constantFrom('PING\r\n', 'GET $key\r\n', '\r\n', 'SET a b\n'),
    );
    assertFramesFound('commands', command);
  });

  /** Any few `frame`s, one after another, cut at any offsets: a scan finds each one's end, and nothing else. */
  function assertFramesFound(side: 'commands' | 'replies', frame: fc.Arbitrary<string>): void {
    fc.assert(
      fc.property(fc.array(frame, { minLength: 1, maxLength: 8 }), fc.array(fc.nat(), { maxLength: 6 }), (frames, cuts) => {
        const written: number[] = [];
        let offset = 0;
        for (const f of frames) written.push((offset += Buffer.byteLength(f)));
        assert.deepEqual(frameEnds(new RespFrames(side), Buffer.from(frames.join(''), 'utf8'), cuts), written);
      }),
    );
  }

  /** Where `frames` finds each frame's end in `stream`, fed in chunks cut at `cuts` (taken modulo its length). */
  function frameEnds(frames: RespFrames, stream: Buffer, cuts: readonly number[]): number[] {
    const offsets = [...new Set([0, ...cuts.map((c) => c % stream.length), stream.length])].sort((a, b) => a - b);
    const ends: number[] = [];
    for (let k = 0; k + 1 < offsets.length; k++) {
      const chunk = stream.subarray(offsets[k], offsets[k + 1]);
      for (let from = 0; from < chunk.length; ) {
        const end = frames.end(chunk, from);
        if (end < 0) break;
        ends.push(offsets[k]! + end);
        from = end;
      }
    }
    return ends;
  }
});

describe('through the pacer, each command gets redis’s own reply, in order', () => {
  test('pipelined SET and GET, a 100 KB value among them', WAITS, async (t) => {
    const { port } = await pacer(t, ROOMY);
    const c = await client(t, port);
    const big = 'x'.repeat(100 * 1024) + 'é';
    const pipeline = c.pipeline().set('order:a', '1').set('order:big', big).get('order:a').get('order:big').get('order:none').incr('order:n').incr('order:n').mget('order:a', 'order:none');
    assert.deepEqual(await results(pipeline), ['OK', 'OK', '1', big, null, 1, 2, ['1', null]]);
  });

  test('inline commands written raw, a blank line among them (redis answers it nothing)', WAITS, async (t) => {
    const { port } = await pacer(t, ROOMY);
    const expected = '+OK\r\n$1\r\nv\r\n+PONG\r\n';
    assert.equal(await raw(port, 'SET inline:k v\r\nGET inline:k\r\n\r\nPING\r\n', expected.length), expected);
  });
});

describe('the node serves at its rate, as the simulated node does', () => {
  test('capacityOps 200: 100 commands sent at once take at least about 0.4 s', WAITS, async (t) => {
    const { pacer: p, port } = await pacer(t, { capacityOps: 200, latencyMs: 1, maxQueue: 1_000 });
    const c = await client(t, port);
    const before = p.served;
    const pipeline = incrs(c, 'rate:n', 100);
    const start = performance.now();
    const replies = await results(pipeline);
    const ms = performance.now() - start;
    assert.deepEqual(replies, counting(100));
    assert.equal(p.served - before, 100);
    // 100 calls at 5 ms each, the first on the next tick: about 0.5 s; a late timer only makes it slower.
    assert.ok(ms >= 400, `100 commands at 200/s took ${ms.toFixed(0)} ms`);
    assert.ok(ms < 2_500, `100 commands at 200/s took ${ms.toFixed(0)} ms`);
  });
});

describe('a full queue refuses at once, in the command’s place, and a refused command never reaches redis', () => {
  test('maxQueue 5: of 20 pipelined INCRs, the queued ones count 1, 2, 3…, the rest are BUSY, in command order', WAITS, async (t) => {
    const { pacer: p, port } = await pacer(t, { capacityOps: 20, latencyMs: 1, maxQueue: 5 });
    const c = await client(t, port);
    const before = p.served;
    const pipeline = incrs(c, 'full:n', 20);
    const replies = await results(pipeline);
    const counted = replies.filter((r) => typeof r === 'number');
    const refused = replies.filter((r) => typeof r === 'string');
    assert.equal(replies[0], 1, 'the first command finds the queue empty');
    assert.deepEqual(counted, counting(counted.length), `each reply in its command’s place: ${JSON.stringify(replies)}`);
    assert.ok(counted.length >= 5 && refused.length >= 10, `5 queued (a few more if the pipeline came in pieces), the rest refused: ${JSON.stringify(replies)}`);
    for (const r of refused) assert.match(r as string, /^BUSY damper lab/);
    assert.equal(Number(await direct.get('full:n')), counted.length, 'redis ran only the commands the node served');
    assert.equal(p.served - before, counted.length);
  });

  test('a subscriber is never refused, even by a node whose queue takes nothing', WAITS, async (t) => {
    const { port } = await pacer(t, { capacityOps: 100, latencyMs: 1, maxQueue: 0 });
    const refusedAll = await client(t, port, { enableReadyCheck: false });
    await assert.rejects(refusedAll.get('sub0:k'), /^ReplyError: BUSY damper lab/);
    const sub = await client(t, port, { enableReadyCheck: false });
    const heard = once(sub, 'message');
    await sub.subscribe('sub0:news');
    assert.equal(await direct.publish('sub0:news', 'hello'), 1);
    assert.deepEqual(await heard, ['sub0:news', 'hello']);
  });
});

describe('a fault’s slowness adds its extra latency to each reply; the real round trip stands for the base', () => {
  test('slowness 50 on a 2 ms node: 98 ms more for a reply, not 98 ms more per reply of a pipeline', WAITS, async (t) => {
    const { pacer: p, port } = await pacer(t, { capacityOps: 5_000, latencyMs: 2, maxQueue: 1_000 });
    const c = await client(t, port);
    await c.set('slow:k', 'v');
    p.slowness = 50;
    let start = performance.now();
    assert.equal(await c.get('slow:k'), 'v');
    const one = performance.now() - start;
    // The pacer reads the system clock, whose reading may lag a ms: 98 less that.
    assert.ok(one >= 96, `a reply came ${one.toFixed(0)} ms after its command`);
    const pipeline = incrs(c, 'slow:n', 10);
    start = performance.now();
    assert.deepEqual(await results(pipeline), counting(10));
    const ten = performance.now() - start;
    assert.ok(ten >= 96 && ten < 900, `ten pipelined replies came ${ten.toFixed(0)} ms after their commands`);
  });
});

describe('a subscriber’s pushes pass through as they come', () => {
  test('a PUBLISH through one connection reaches a connection SUBSCRIBEd through the pacer', WAITS, async (t) => {
    const { port } = await pacer(t, ROOMY);
    const sub = await client(t, port);
    const pub = await client(t, port);
    const heard = once(sub, 'message');
    await sub.subscribe('pubsub:news');
    assert.equal(await pub.publish('pubsub:news', 'hello'), 1);
    assert.deepEqual(await heard, ['pubsub:news', 'hello']);
    assert.equal(await pub.get('pubsub:none'), null, 'the publisher’s replies are still counted');
  });
});

describe('an ejected node is out of the cluster until it rejoins: connections closed, queue dropped, data gone', () => {
  test('a pending call fails, its command unsent; the data is flushed; a connection is refused until rejoin, on the same port; then all works', WAITS, async (t) => {
    const { pacer: p, port } = await pacer(t, ROOMY);
    await direct.set('eject:k', 'v');
    const c = await client(t, port, { retryStrategy: () => null, maxRetriesPerRequest: 0 });
    assert.equal(await c.get('eject:k'), 'v');
    // One call per ~3 minutes: once the credit it kept is spent (a few calls), the rest wait at the node.
    p.degrade(1e-6);
    p.slowness = 50;
    const pipeline = incrs(c, 'eject:n', 10);
    const pending = results(pipeline);
    while (p.queued === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const served = p.served;
    const closed = once(c, 'end');
    await p.eject();
    const replies = await pending;
    assert.match(String(replies.at(-1)), /connection (is )?closed?/i, `the calls still queued fail: ${JSON.stringify(replies)}`);
    await closed;
    assert.equal(p.served, served, 'the queued command was dropped, never sent');
    assert.equal(p.queued, 0);
    assert.equal(await direct.get('eject:k'), null, 'FLUSHALL: the data is gone');
    assert.equal(await direct.exists('eject:n'), 0);

    // Refused, as by a host that is gone: a listener that accepted and closed made ioredis (its ready check) reconnect, and hold what it owed, for ever.
    const turnedAway = connect({ host: LOOPBACK, port });
    const [refused] = (await once(turnedAway, 'error')) as [NodeJS.ErrnoException];
    assert.equal(refused.code, 'ECONNREFUSED');

    await p.rejoin();
    assert.equal(p.slowness, 1);
    const again = await client(t, port);
    assert.equal(await again.incr('eject:n'), 1, 'healthy again: its whole rate back');
  });
});
