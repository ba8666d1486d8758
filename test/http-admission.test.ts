import assert from 'node:assert/strict';
import http, { type IncomingMessage, type RequestListener, type ServerResponse } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { after, describe, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { type FastifyInstance } from 'fastify';
import { Agent, request } from 'undici';
import { AbortedError, ConcurrencyLimiter, type ConcurrencyLimiterOptions, ConfigError, DeadlineExceededError, systemClock } from '../src/index.js';
import { damperFastify } from '../src/http/incoming/fastify.js';
import { currentRequestScope, damperAdmission, type AdmittedHandler, type AdmissionOptions, type DamperAdmissionOptions, type RequestScope } from '../src/http/index.js';
import { deferred } from './helpers.js';

// Real servers on ephemeral ports, real clients, the system clock. Timings
// are tens of ms; every wait is for a condition (with a generous bound), never
// for a time that a loaded machine could overrun.

const agent = new Agent({ keepAliveTimeout: 1000 });
after(() => agent.close());

/** A limiter whose queue waits long and sheds by delay only where a test says so. */
function limiterOf(options: ConcurrencyLimiterOptions = {}): ConcurrencyLimiter {
  return new ConcurrencyLimiter({ limit: 1, queueTimeout: 10_000, codel: false, shedDelay: { normal: 10_000, low: 10_000, background: 10_000 }, ...options });
}

async function listen(t: TestContext, listener: RequestListener): Promise<string> {
  const server = http.createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

async function get(origin: string, path: string, headers: Record<string, string | string[]> = {}): Promise<Answer> {
  const res = await request(`${origin}${path}`, { headers, dispatcher: agent });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

/** A request on its own connection, which the test can cut: the client going away. */
function cuttable(origin: string, path: string, headers: Record<string, string> = {}): { cut(): void } {
  const req = http.request(`${origin}${path}`, { agent: false, headers });
  req.on('error', () => {}); // the cut itself
  req.end();
  return { cut: () => req.destroy() };
}

async function text(stream: AsyncIterable<unknown>): Promise<string> {
  let all = '';
  for await (const chunk of stream) all += String(chunk);
  return all;
}

async function until(what: string, condition: () => boolean): Promise<void> {
  for (const started = Date.now(); !condition(); await sleep(5)) {
    if (Date.now() - started > 5000) throw new Error(`timed out waiting until ${what}`);
  }
}

/** The scope's deadline is its request's arrival, somewhere between `before` and `afterwards`, plus `left` ms (the clock's reading may lag by 1 ms). */
function assertLeft(scope: RequestScope | undefined, before: number, afterwards: number, left: number): void {
  const deadline = scope?.deadline;
  assert.ok(deadline !== undefined && deadline >= before + left - 2 && deadline <= afterwards + left + 2, `deadline ${deadline} is the arrival (${before}–${afterwards}) plus ${left} ms`);
}

/** A handler that records each call and answers once the test opens its gate. */
function gated(): { handler: AdmittedHandler; calls: string[]; scopes: RequestScope[]; open(): void } {
  const gate = deferred<void>();
  const calls: string[] = [];
  const scopes: RequestScope[] = [];
  const handler: AdmittedHandler = async (req, res, scope) => {
    calls.push(req.url ?? '');
    scopes.push(scope);
    await gate.promise;
    res.end('ok');
  };
  return { handler, calls, scopes, open: () => gate.resolve() };
}

/** An admission on a limiter of one slot, which a first request holds until the test calls `open()`. */
async function slotTaken(t: TestContext, options: DamperAdmissionOptions = {}, firstHeaders: Record<string, string> = {}) {
  const limiter = limiterOf();
  const { handler, calls, open } = gated();
  const admission = damperAdmission({ limiter, ...options }, handler);
  const origin = await listen(t, admission);
  const first = get(origin, '/first', firstHeaders);
  await until('the slot is taken', () => limiter.inFlight === 1);
  return { limiter, admission, origin, calls, open, first };
}

describe('overload is answered by shedding the least important work', { timeout: 30_000 }, () => {
  test('low-priority arrivals get a 503 with Retry-After while critical ones queue and are served', async (t) => {
    const limiter = limiterOf({ limit: 2, shedDelay: { normal: 10_000, low: 5, background: 5 } });
    const { handler, calls, open } = gated();
    const admission = damperAdmission({ limiter, retryAfter: 7 }, handler);
    const origin = await listen(t, admission);
    const critical = { 'x-damper-priority': 'critical' };
    const running = [get(origin, '/c1', critical), get(origin, '/c2', critical)];
    await until('both slots are taken', () => limiter.inFlight === 2);
    const queued = get(origin, '/c3', critical);
    await until('a critical request queues', () => limiter.queued === 1);
    await sleep(20); // the queueing delay now exceeds what low and background may wait (5 ms)
    const shed = await Promise.all([get(origin, '/l1', { 'x-damper-priority': 'low' }), get(origin, '/b1', { 'x-damper-priority': 'background' })]);
    for (const answer of shed) {
      assert.equal(answer.status, 503);
      assert.equal(answer.headers['retry-after'], '7');
      assert.match(answer.body, /overloaded/);
    }
    const alsoQueued = get(origin, '/c4', critical); // critical is never shed by delay
    await until('the second critical request queues', () => limiter.queued === 2);
    open();
    const served = await Promise.all([...running, queued, alsoQueued]);
    assert.deepEqual(served.map((a) => a.status), [200, 200, 200, 200]);
    assert.deepEqual(calls.sort(), ['/c1', '/c2', '/c3', '/c4']);
    assert.equal(limiter.stats().shed.delay, 2);
    assert.deepEqual(admission.stats(), { admitted: 4, shed: 2, expired: 0, gone: 0, badRequests: 0, failed: 0 });
  });
});

describe('work whose caller has gone is dropped before it starts', { timeout: 30_000 }, () => {
  test('a deadline that passes in the queue gets a 504, and the handler never sees the request', async (t) => {
    const { limiter, admission, origin, calls, open, first } = await slotTaken(t);
    const late = await get(origin, '/late', { 'x-damper-deadline-ms': '40' });
    assert.equal(late.status, 504);
    assert.match(late.body, /deadline/);
    open();
    assert.equal((await first).status, 200);
    assert.deepEqual(calls, ['/first']);
    assert.equal(admission.stats().expired, 1);
    assert.equal(limiter.stats().shed.timeout, 1, 'the limiter counts a deadline met in its queue as a timeout');
  });

  test('the request-wide timeout bounds a request that carries no deadline', async (t) => {
    // The first request's deadline is the earlier of its header's and the timeout: 40 ms; it is served all the same.
    const { origin, calls, open, first } = await slotTaken(t, { timeout: 40 }, { 'x-damper-deadline-ms': '60000' });
    assert.equal((await get(origin, '/late')).status, 504);
    open();
    assert.equal((await first).status, 200);
    assert.deepEqual(calls, ['/first']);
  });

  test('no time left (a 0 ms header) gets a 504 at once, without a word to the limiter', async (t) => {
    const limiter = limiterOf();
    const { handler, calls } = gated();
    const admission = damperAdmission({ limiter }, handler);
    const origin = await listen(t, admission);
    const answer = await get(origin, '/', { 'x-damper-deadline-ms': '0' });
    assert.equal(answer.status, 504);
    assert.deepEqual(calls, []);
    assert.equal(limiter.stats().admitted, 0, 'a free slot was not even taken');
    assert.equal(admission.stats().expired, 1);
  });

  test('a client that leaves while its request queues is never served, and its slot is not leaked', async (t) => {
    const { limiter, admission, origin, calls, open, first } = await slotTaken(t);
    const leaving = cuttable(origin, '/leaving');
    await until('the second request queues', () => limiter.queued === 1);
    leaving.cut();
    await until('the request is counted gone', () => admission.stats().gone === 1);
    assert.equal(limiter.queued, 0);
    open();
    assert.equal((await first).status, 200);
    assert.equal((await get(origin, '/after')).status, 200);
    await until('every slot is back', () => limiter.inFlight === 0);
    assert.deepEqual(calls, ['/first', '/after']);
    assert.deepEqual(admission.stats(), { admitted: 2, shed: 0, expired: 0, gone: 1, badRequests: 0, failed: 0 });
  });

  test('a pipelined request whose connection closes is dropped too (node:http never closes its response)', async (t) => {
    const limiter = limiterOf();
    const { handler, calls, scopes } = gated(); // never opened: the first request holds its slot until the cut
    const admission = damperAdmission({ limiter }, handler);
    const origin = await listen(t, admission);
    const socket = connect(Number(new URL(origin).port), '127.0.0.1');
    socket.on('error', () => {});
    socket.write('GET /one HTTP/1.1\r\nhost: x\r\n\r\nGET /two HTTP/1.1\r\nhost: x\r\n\r\n');
    await until('the second request queues', () => limiter.queued === 1);
    socket.destroy();
    await until('the queued request is counted gone', () => admission.stats().gone === 1);
    await until('the first request gives its slot back', () => limiter.inFlight === 0);
    assert.deepEqual(calls, ['/one']);
    assert.ok(scopes[0]?.signal.aborted, 'the request being served learnt its client left');
  });
});

describe('a caller\'s slip is answered at the boundary', { timeout: 30_000 }, () => {
  const bad: [string, Record<string, string | string[]>, RegExp][] = [
    ['an exponent', { 'x-damper-deadline-ms': '1e3' }, /x-damper-deadline-ms/],
    ['a negative time', { 'x-damper-deadline-ms': '-5' }, /x-damper-deadline-ms/],
    ['a header sent twice', { 'x-damper-deadline-ms': ['100', '200'] }, /x-damper-deadline-ms: sent 2 times/],
    ['an unknown priority', { 'x-damper-priority': 'urgent' }, /x-damper-priority/],
  ];
  test('a deadline or priority that cannot be read gets a 400 naming the header; the limiter never sees it', async (t) => {
    const limiter = limiterOf();
    const { handler, calls } = gated();
    const admission = damperAdmission({ limiter }, handler);
    const origin = await listen(t, admission);
    for (const [what, headers, names] of bad) {
      const answer = await get(origin, '/', headers);
      assert.equal(answer.status, 400, what);
      assert.match(answer.body, names, what);
    }
    assert.deepEqual(calls, []);
    assert.equal(limiter.stats().admitted, 0);
    assert.equal(admission.stats().badRequests, bad.length);
  });

  test('headers of other names are read when the options say so', async (t) => {
    const { handler, scopes, open } = gated();
    open();
    const origin = await listen(t, damperAdmission({ deadlineHeader: 'X-Budget-Ms', priorityHeader: 'x-importance' }, handler));
    assert.equal((await get(origin, '/', { 'x-damper-priority': 'urgent', 'x-importance': 'low' })).status, 200);
    assert.equal(scopes[0]?.priority, 'low');
    assert.equal((await get(origin, '/', { 'x-budget-ms': 'soon' })).status, 400);
  });
});

describe('the request scope reaches the handler and what it calls', { timeout: 30_000 }, () => {
  test('currentRequestScope() carries the deadline and priority from the headers', async (t) => {
    let seen: RequestScope | undefined;
    let given: RequestScope | undefined;
    const origin = await listen(
      t,
      damperAdmission({}, async (_req, res, scope) => {
        given = scope;
        await sleep(1); // across an await: AsyncLocalStorage, not a variable read before it
        seen = currentRequestScope();
        res.end();
      }),
    );
    const before = systemClock.now();
    assert.equal((await get(origin, '/', { 'x-damper-deadline-ms': '5000', 'x-damper-priority': 'critical' })).status, 200);
    const afterwards = systemClock.now();
    assert.ok(seen !== undefined);
    assert.equal(seen, given);
    assert.equal(seen.priority, 'critical');
    assert.equal(seen.clock, systemClock);
    assertLeft(seen, before, afterwards, 5000);
    assert.equal(seen.signal.aborted, false, 'a response that finished is not a caller gone');
  });

  test('the deadline is the earlier of the header\'s and the timeout', async (t) => {
    const scopes: RequestScope[] = [];
    const origin = await listen(
      t,
      damperAdmission({ timeout: 3000 }, (_req, res, scope) => {
        scopes.push(scope);
        res.end();
      }),
    );
    const cases: [Record<string, string>, number][] = [
      [{}, 3000],
      [{ 'x-damper-deadline-ms': '9000' }, 3000],
      [{ 'x-damper-deadline-ms': '1000' }, 1000],
    ];
    for (const [headers, left] of cases) {
      const before = systemClock.now();
      await get(origin, '/', headers);
      assertLeft(scopes.at(-1), before, systemClock.now(), left);
    }
    assert.equal(scopes[0]?.priority, undefined, 'no header, no priority: the limiter reads it as normal');
  });

  test('the scope\'s signal aborts when the client leaves mid-handler, and the slot comes back', async (t) => {
    const limiter = limiterOf();
    const started = deferred<void>();
    const reason = deferred<unknown>();
    const admission = damperAdmission({ limiter }, (_req, _res, scope) => {
      scope.signal.addEventListener('abort', () => reason.resolve(scope.signal.reason));
      started.resolve();
    });
    const origin = await listen(t, admission);
    const leaving = cuttable(origin, '/', { 'x-damper-deadline-ms': '60000' });
    await started.promise;
    assert.equal(limiter.inFlight, 1, 'a handler that returned but has not answered holds its slot');
    leaving.cut();
    assert.ok((await reason.promise) instanceof AbortedError);
    await until('the slot is back', () => limiter.inFlight === 0);
    assert.deepEqual(admission.stats(), { admitted: 1, shed: 0, expired: 0, gone: 0, badRequests: 0, failed: 0 });
  });

  test('the scope\'s signal aborts at the deadline while the handler works', async (t) => {
    const origin = await listen(
      t,
      damperAdmission({}, async (_req, res, scope) => {
        await new Promise((resolve) => scope.signal.addEventListener('abort', resolve));
        res.statusCode = scope.signal.reason instanceof DeadlineExceededError ? 504 : 500;
        res.end();
      }),
    );
    assert.equal((await get(origin, '/', { 'x-damper-deadline-ms': '30' })).status, 504);
  });
});

describe('a slot is held for as long as the response, and given back once', { timeout: 30_000 }, () => {
  test('a streaming handler holds its slot until its response ends', async (t) => {
    const limiter = limiterOf();
    const end = deferred<void>();
    const calls: string[] = [];
    const origin = await listen(
      t,
      damperAdmission({ limiter }, (req, res) => {
        calls.push(req.url ?? '');
        res.writeHead(200);
        res.write('first chunk;');
        if (req.url === '/stream') void end.promise.then(() => res.end('last chunk'));
        else res.end();
      }),
    );
    const res = await request(`${origin}/stream`, { dispatcher: agent });
    const chunks: string[] = [];
    const body = (async () => {
      for await (const chunk of res.body) chunks.push(String(chunk));
    })();
    await until('the first chunk arrives', () => chunks.length > 0);
    assert.equal(limiter.inFlight, 1, 'the handler has returned; its response has not ended');
    const next = get(origin, '/next');
    await until('the next request queues', () => limiter.queued === 1);
    assert.deepEqual(calls, ['/stream']);
    end.resolve();
    await body;
    assert.equal(chunks.join(''), 'first chunk;last chunk');
    assert.equal((await next).status, 200);
    await until('every slot is back', () => limiter.inFlight === 0);
  });

  test('a handler that fails before answering gets a 500 and gives its slot back', async (t) => {
    const limiter = limiterOf();
    const errors: unknown[] = [];
    const admission = damperAdmission({ limiter, onError: (error) => errors.push(error) }, async (req, res) => {
      res.setHeader('content-encoding', 'gzip'); // the handler's headers do not describe the 500's body
      if (req.url === '/throws') throw new Error('sync');
      await sleep(1);
      throw new Error('async');
    });
    const origin = await listen(t, admission);
    for (const path of ['/throws', '/rejects']) {
      const answer = await get(origin, path);
      assert.equal(answer.status, 500);
      assert.equal(answer.headers['content-encoding'], undefined);
    }
    await until('every slot is back', () => limiter.inFlight === 0);
    assert.deepEqual(errors.map((e) => (e as Error).message), ['sync', 'async']);
    assert.deepEqual(admission.stats(), { admitted: 2, shed: 0, expired: 0, gone: 0, badRequests: 0, failed: 2 });
  });

  test('without onError a failure warns once; an onError that throws changes nothing', async (t) => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error & { code?: string }): void => {
      if (warning.code === 'DAMPER_HANDLER_ERROR') warnings.push(warning);
    };
    process.on('warning', onWarning);
    t.after(() => process.off('warning', onWarning));
    const fails = (): never => {
      throw new Error('again');
    };
    const origin = await listen(t, damperAdmission({}, fails));
    for (let i = 0; i < 3; i++) assert.equal((await get(origin, '/')).status, 500);
    await until('the warning is emitted', () => warnings.length > 0);
    assert.equal(warnings.length, 1);
    const limiter = limiterOf();
    const logger = (): never => {
      throw new Error('logger down');
    };
    const other = await listen(t, damperAdmission({ limiter, onError: logger }, fails));
    assert.equal((await get(other, '/')).status, 500);
    await until('the slot is back', () => limiter.inFlight === 0);
  });

  test('a handler that throws synchronously, not from an async function, is answered the same', async (t) => {
    const limiter = limiterOf();
    const origin = await listen(
      t,
      damperAdmission({ limiter }, () => {
        throw new Error('sync');
      }),
    );
    assert.equal((await get(origin, '/')).status, 500);
    await until('the slot is back', () => limiter.inFlight === 0);
  });

  test('a handler that fails after its headers went out has its response reset, and gives its slot back', async (t) => {
    const limiter = limiterOf();
    const origin = await listen(
      t,
      damperAdmission({ limiter }, async (_req, res) => {
        res.writeHead(200);
        res.write('half');
        await sleep(5);
        throw new Error('midway');
      }),
    );
    const res = await request(`${origin}/`, { dispatcher: agent });
    assert.equal(res.statusCode, 200);
    await assert.rejects(res.body.text());
    await until('the slot is back', () => limiter.inFlight === 0);
  });
});

describe('options are checked when the admission is made', { timeout: 30_000 }, () => {
  const handler: AdmittedHandler = (_req: IncomingMessage, res: ServerResponse) => {
    res.end();
  };
  const bad: [string, unknown][] = [
    ['options not an object', 5],
    ['limiter not a ConcurrencyLimiter', { limiter: { run: () => Promise.resolve() } }],
    ['negative timeout', { timeout: -1 }],
    ['zero timeout', { timeout: 0 }],
    ['NaN timeout', { timeout: Number.NaN }],
    ['fractional retryAfter', { retryAfter: 1.5 }],
    ['negative retryAfter', { retryAfter: -1 }],
    ['header name with a space', { deadlineHeader: 'x deadline' }],
    ['empty header name', { priorityHeader: '' }],
    ['one header for both', { deadlineHeader: 'x-one', priorityHeader: 'X-One' }],
    ['clock without timers', { clock: { now: () => 0 } }],
    ['onError not a function', { onError: 'log' }],
  ];
  for (const [what, options] of bad) {
    test(what, () => {
      assert.throws(() => damperAdmission(options as never, handler), ConfigError);
    });
  }
  test('a handler that is not a function', () => {
    assert.throws(() => damperAdmission({}, 'handler' as never), ConfigError);
  });
});

describe('the same admission on Fastify', { timeout: 30_000 }, () => {
  async function fastify(t: TestContext, options: AdmissionOptions, routes: (app: FastifyInstance) => void): Promise<{ app: FastifyInstance; origin: string }> {
    const app = Fastify({ forceCloseConnections: true }); // a failed test's requests in flight must not hold the close
    t.after(() => app.close());
    await app.register(damperFastify, options);
    routes(app);
    return { app, origin: await app.listen({ port: 0, host: '127.0.0.1' }) };
  }

  test('a shed request gets a 503 with Retry-After; one whose deadline passes in the queue a 504; neither reaches its route', async (t) => {
    const limiter = limiterOf({ maxQueue: 1 });
    const gate = deferred<void>();
    const calls: string[] = [];
    const { app, origin } = await fastify(t, { limiter, retryAfter: 3 }, (app) => {
      app.get('/:name', async (request) => {
        calls.push(request.url);
        await gate.promise;
        return 'ok';
      });
    });
    const first = get(origin, '/first');
    await until('the slot is taken', () => limiter.inFlight === 1);
    const late = get(origin, '/late', { 'x-damper-deadline-ms': '40' });
    await until('a request queues', () => limiter.queued === 1);
    const shed = await get(origin, '/shed', { 'x-damper-priority': 'low' }); // the queue is full, and low does not outrank normal
    assert.equal(shed.status, 503);
    assert.equal(shed.headers['retry-after'], '3');
    assert.equal((await late).status, 504);
    gate.resolve();
    assert.equal((await first).status, 200);
    assert.deepEqual(calls, ['/first']);
    assert.deepEqual(app.damperAdmission.stats(), { admitted: 1, shed: 1, expired: 1, gone: 0, badRequests: 0, failed: 0 });
    await until('the slot is back', () => limiter.inFlight === 0);
  });

  test('a bad header gets a 400; a client that leaves while queued is never served', async (t) => {
    const limiter = limiterOf();
    const gate = deferred<void>();
    const calls: string[] = [];
    const { app, origin } = await fastify(t, { limiter }, (app) => {
      app.get('/:name', async (request) => {
        calls.push(request.url);
        await gate.promise;
        return 'ok';
      });
    });
    const bad = await get(origin, '/bad', { 'x-damper-priority': 'urgent' });
    assert.equal(bad.status, 400);
    assert.match(bad.body, /x-damper-priority/);
    const first = get(origin, '/first');
    await until('the slot is taken', () => limiter.inFlight === 1);
    const leaving = cuttable(origin, '/leaving');
    await until('the second request queues', () => limiter.queued === 1);
    leaving.cut();
    await until('the request is counted gone', () => app.damperAdmission.stats().gone === 1);
    gate.resolve();
    assert.equal((await first).status, 200);
    await until('the slot is back', () => limiter.inFlight === 0);
    assert.deepEqual(calls, ['/first']);
    assert.equal(app.damperAdmission.stats().badRequests, 1);
  });

  test('routes run in the request scope, a body parsed first or not; a failure is counted and its slot given back', async (t) => {
    const limiter = limiterOf();
    const seen: (RequestScope | undefined)[] = [];
    const { app, origin } = await fastify(t, { limiter }, (app) => {
      app.get('/get', async () => {
        await sleep(1);
        seen.push(currentRequestScope());
        return 'ok';
      });
      app.post('/post', async (request) => {
        await sleep(1);
        seen.push(currentRequestScope());
        return request.body;
      });
      app.get('/fails', async () => {
        throw new Error('route failed');
      });
    });
    const headers = { 'x-damper-priority': 'critical', 'x-damper-deadline-ms': '5000' };
    assert.equal((await get(origin, '/get', headers)).status, 200);
    // The body comes after the request was admitted: it is read on the socket's events, outside the hook's call.
    const post = http.request(`${origin}/post`, { method: 'POST', agent: false, headers: { ...headers, 'content-type': 'application/json', 'content-length': 7 } });
    const answered = new Promise<string>((resolve, reject) => {
      post.on('response', (res) => void text(res).then(resolve, reject));
      post.on('error', reject);
    });
    post.flushHeaders();
    await until('the post is admitted', () => limiter.inFlight === 1);
    post.end('{"a":1}');
    assert.deepEqual(JSON.parse(await answered), { a: 1 });
    assert.deepEqual(seen.map((scope) => scope?.priority), ['critical', 'critical']);
    assert.equal((await get(origin, '/fails')).status, 500);
    await until('every slot is back', () => limiter.inFlight === 0);
    assert.equal(app.damperAdmission.stats().failed, 1);
  });

  test('bad options fail the registration with a ConfigError', async () => {
    const app = Fastify();
    void app.register(damperFastify, { timeout: -1 });
    await assert.rejects(async () => {
      await app.ready();
    }, ConfigError);
    await app.close();
  });
});
