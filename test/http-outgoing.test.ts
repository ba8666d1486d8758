import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Agent, type Dispatcher, request } from 'undici';
import { BreakerOpenError, ConfigError, HeaderError, RetryBudget, systemClock } from '../src/index.js';
import { damperFetch, damperInterceptor, HttpDependency, type HttpDependencyOptions, runInRequestScope } from '../src/http/index.js';
import { headerValue } from '../src/http/headers.js';
import { FaultProxy } from './support/fault-proxy.js';

// damper/http's outgoing side against real node:http servers on loopback,
// each in a process of its own so one can be SIGSTOPped (issue 17, item 3).
// Time is the system clock: these are real sockets and real faults.

const children: ChildProcess[] = [];
const closers: (() => Promise<unknown>)[] = [];

after(async () => {
  for (const c of children) {
    c.kill('SIGCONT');
    c.kill('SIGKILL');
  }
  for (const close of closers.splice(0)) await close().catch(() => {});
});

interface Upstream {
  readonly origin: string;
  readonly port: number;
  readonly child: ChildProcess;
}

async function upstream(mode: 'ok' | '503' | 'ok-then-503' | 'stream', name: string, arg?: string): Promise<Upstream> {
  const script = fileURLToPath(new URL('./support/http-upstream.js', import.meta.url));
  const child = fork(script, arg === undefined ? [mode, name] : [mode, name, arg], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve(m.port));
    child.once('exit', (code) => reject(new Error(`upstream ${name} exited with ${code}`)));
  });
  return { origin: `http://127.0.0.1:${port}`, port, child };
}

/** One attempt as the wire saw it: which upstream, for which request, when. */
interface Sent {
  readonly at: number;
  readonly origin: string;
  readonly id: string;
}

/** An interceptor below damper's: it sees every attempt damper dispatches. */
function counting(log: Sent[]): Dispatcher.DispatcherComposeInterceptor {
  return (dispatch) => (options, handler) => {
    const id = headerValue(options.headers as Parameters<typeof headerValue>[0], 'x-test-id');
    log.push({ at: performance.now(), origin: String(options.origin), id: typeof id === 'string' ? id : '' });
    return dispatch(options, handler);
  };
}

function client(options: HttpDependencyOptions, log: Sent[] = []): { agent: Dispatcher; dependency: HttpDependency; log: Sent[] } {
  const dependency = new HttpDependency(options);
  const base = new Agent({ keepAliveTimeout: 10_000 });
  const agent = base.compose(counting(log), damperInterceptor(dependency));
  closers.push(async () => {
    dependency.close();
    await base.destroy();
  });
  return { agent, dependency, log };
}

interface Outcome {
  readonly id: string;
  readonly start: number;
  readonly ms: number;
  readonly status: number | undefined;
  readonly error: unknown;
}

async function call(agent: Dispatcher, id: string, method: 'GET' | 'POST' = 'GET', headers: Record<string, string> = {}): Promise<Outcome> {
  const start = performance.now();
  try {
    const r = await request('http://service.test/x', { dispatcher: agent, method, headers: { 'x-test-id': id, ...headers } });
    await r.body.text();
    return { id, start, ms: performance.now() - start, status: r.statusCode, error: undefined };
  } catch (error) {
    return { id, start, ms: performance.now() - start, status: undefined, error };
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('a retry storm cannot start here: attempts stay within the budget, over every window', () => {
  test('one upstream hung (SIGSTOP), one slowed through a proxy, one answering 503: bounded attempts, deadlines kept, the hung one ejected, never the last', { timeout: 60_000 }, async () => {
    const [hung, slow, failing] = await Promise.all([upstream('ok', 'hung'), upstream('ok', 'slow'), upstream('503', 'failing')]);
    const proxy = await FaultProxy.start({ port: slow.port });
    closers.push(() => proxy.close());
    proxy.set('replies', { latencyMs: 80 });
    const slowOrigin = `http://127.0.0.1:${proxy.port}`;
    const WINDOW = 2_000;
    const RATIO = 0.2;
    const MIN_PER_SECOND = 2;
    const DEADLINE = 1_000;
    const MAX_DELAY = 50;
    const budget = new RetryBudget({ window: WINDOW, ratio: RATIO, minPerSecond: MIN_PER_SECOND });
    const { agent, dependency, log } = client({
      upstreams: [
        { id: 'hung', origin: hung.origin },
        { id: 'slow', origin: slowOrigin },
        { id: 'failing', origin: failing.origin },
      ],
      budget,
      timeout: DEADLINE,
      retry: { maxAttempts: 3, attemptTimeout: 300, baseDelay: 10, maxDelay: MAX_DELAY },
      // Two of three may be out at once (never the third): both faulty ones can be found out.
      balancer: { outliers: { consecutiveErrors: 3, baseEjectionMs: 10_000, successRate: false, maxEjectionShare: 0.67 } },
    });
    const ejected: Record<string, boolean>[] = [];
    const outcomes: Outcome[] = [];
    const pending: Promise<void>[] = [];
    const RATE = 60; // requests per second
    const SECONDS = 5;
    let n = 0;
    const started = performance.now();
    for (let i = 0; i < RATE * SECONDS; i++) {
      if (i === RATE) hung.child.kill('SIGSTOP'); // after a healthy second
      const id = `r${n++}`;
      pending.push(call(agent, id).then((o) => void outcomes.push(o)));
      if (i % 10 === 0) ejected.push(Object.fromEntries(dependency.stats().balancer.upstreams.map((u) => [u.id, u.ejected])));
      const due = started + ((i + 1) * 1000) / RATE;
      await sleep(Math.max(0, due - performance.now()));
    }
    await Promise.all(pending);
    hung.child.kill('SIGCONT');

    // Deadlines: no request outlives its deadline (a margin for a loaded 2-core machine's event loop).
    const longest = Math.max(...outcomes.map((o) => o.ms));
    assert.ok(longest <= DEADLINE + 150, `the longest request took ${longest.toFixed(0)} ms against a ${DEADLINE} ms deadline`);

    // The budget, over every window ending at an attempt: retries ≤ ratio × requests + floor.
    const firsts = outcomes.map((o) => o.start).sort((a, b) => a - b);
    const seen = new Set<string>();
    const retries: number[] = [];
    for (const s of log) {
      if (seen.has(s.id)) retries.push(s.at);
      else seen.add(s.id);
    }
    const floor = (MIN_PER_SECOND * WINDOW) / 1000;
    const count = (xs: readonly number[], from: number, to: number): number => xs.filter((x) => x > from && x <= to).length;
    let worst = -Infinity;
    for (const t of retries) {
      // A retry reaches the wire up to its backoff after the budget granted it: requests are counted from that much earlier.
      const allowed = RATIO * count(firsts, t - WINDOW - MAX_DELAY, t) + floor;
      const spent = count(retries, t - WINDOW, t);
      worst = Math.max(worst, spent - allowed);
      assert.ok(spent <= allowed + 1e-9, `${spent} retries in the window ending at ${(t - started).toFixed(0)} ms, against ${allowed.toFixed(1)} allowed`);
    }
    assert.ok(retries.length > 0, 'the faults made the client retry');
    assert.ok(log.length <= (1 + RATIO) * outcomes.length + floor * Math.ceil((SECONDS * 1000) / WINDOW + 1), `${log.length} attempts for ${outcomes.length} requests`);

    // The hung upstream was ejected; the slow one never (slow is not dead); never all of them at once.
    const stats = dependency.stats();
    if (process.env.DEBUG_HTTP) console.log(JSON.stringify(stats, null, 1), outcomes.filter((o) => o.status !== 200).slice(0, 5));
    const by = Object.fromEntries(stats.balancer.upstreams.map((u) => [u.id, u]));
    assert.ok(by.hung!.ejections >= 1, 'the SIGSTOPped upstream was ejected');
    assert.equal(by.slow!.ejections, 0, 'the slow upstream was never ejected: slow is not dead');
    for (const e of ejected) assert.ok(Object.values(e).some((x) => !x), `never every upstream out at once: ${JSON.stringify(e)}`);
    // After the faults were found out, the slow upstream serves: most requests of the last second succeeded.
    const late = outcomes.filter((o) => o.start - started > (SECONDS - 1) * 1000);
    const ok = late.filter((o) => o.status === 200).length;
    assert.ok(ok >= late.length * 0.9, `${ok} of the last second's ${late.length} requests succeeded`);
  });

  test('the only upstream hung: it is never ejected, and every request ends by its deadline', { timeout: 30_000 }, async () => {
    const only = await upstream('ok', 'only');
    const { agent, dependency } = client({
      upstreams: [only.origin],
      timeout: 400,
      retry: { maxAttempts: 3, attemptTimeout: 150, baseDelay: 10, maxDelay: 20 },
      balancer: { outliers: { consecutiveErrors: 2, baseEjectionMs: 10_000 } },
      breaker: false,
      throttle: false,
    });
    assert.equal((await call(agent, 'warm')).status, 200);
    only.child.kill('SIGSTOP');
    const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => call(agent, `h${i}`)));
    only.child.kill('SIGCONT');
    for (const o of outcomes) {
      assert.equal(o.status, undefined, 'a hung upstream answers nothing');
      assert.ok(o.ms <= 400 + 150, `a request took ${o.ms.toFixed(0)} ms against its 400 ms deadline`);
    }
    const u = dependency.stats().balancer.upstreams[0]!;
    assert.equal(u.ejections, 0, 'the last upstream is never ejected');
    assert.equal(u.ejected, false);
    // Back from SIGSTOP, it serves again at once: nothing took it out.
    assert.equal((await call(agent, 'after')).status, 200);
  });

  // undici starts a request (the controller that can abort it) only once it has a connection, and hears no abort before
  // (nodejs/undici#386). A server frozen with its accept queue full takes no connection: the kernel drops the SYNs and
  // connect() waits on their retransmission, up to undici's 10-s connect timeout. The attempt must end by its own timeout
  // and the deadline all the same, and a call with neither by its caller's abort.
  test('a server that takes no connection (frozen, its accept queue full): a new request ends by its attempt timeout and its deadline, a bare one by its caller’s abort', { timeout: 30_000 }, async () => {
    const frozen = await upstream('ok', 'frozen', '1');
    frozen.child.kill('SIGSTOP');
    // Fill the accept queue (a backlog of 1 holds two connections): from here every SYN is dropped.
    const fillers = Array.from({ length: 4 }, () => connect(frozen.port, '127.0.0.1').on('error', () => {}));
    closers.push(async () => fillers.forEach((f) => f.destroy()));
    await sleep(100);
    const timed = client({ upstreams: [frozen.origin], timeout: 600, retry: { maxAttempts: 2, attemptTimeout: 200, baseDelay: 10, maxDelay: 20 }, breaker: false, throttle: false });
    const bare = client({ upstreams: [frozen.origin], breaker: false, throttle: false });
    const controller = new AbortController();
    const reason = new Error('user left');
    const started = performance.now();
    const [attempts, deadline, aborted] = await Promise.all([
      call(timed.agent, 'two-attempts'),
      call(timed.agent, 'deadline', 'GET', { 'x-damper-deadline-ms': '300' }),
      request('http://service.test/x', { dispatcher: bare.agent, signal: controller.signal, headers: { 'x-test-id': 'bare' } }).then(
        () => 'answered',
        (e: unknown) => ({ ms: performance.now() - started, error: e }),
      ),
      sleep(250).then(() => controller.abort(reason)),
    ]);
    frozen.child.kill('SIGCONT');
    assert.equal(attempts.status, undefined, 'a frozen server answers nothing');
    assert.ok(attempts.ms < 600 + 300, `two attempts of 200 ms within a 600-ms timeout took ${attempts.ms.toFixed(0)} ms`);
    assert.equal(timed.log.filter((s) => s.id === 'two-attempts').length, 2, 'the first attempt ended at its timeout, so the retry went out');
    assert.ok(deadline.ms < 300 + 300, `a 300-ms deadline took ${deadline.ms.toFixed(0)} ms`);
    // Over for the balancer and the limits too, not only for the caller: an attempt still counted in flight until undici's
    // connect timeout fills the upstream's share of every limit with calls nobody waits for.
    assert.equal(timed.dependency.stats().balancer.upstreams[0]!.inFlight, 0, 'every attempt is over');
    assert.notEqual(aborted, 'answered');
    const { ms, error } = aborted as { ms: number; error: unknown };
    assert.equal(error, reason, "the caller hears its own reason");
    assert.ok(ms < 250 + 300, `aborted at 250 ms, the request ended at ${ms.toFixed(0)} ms`);
  });
});

describe('a retry never goes back to the upstream that just failed', () => {
  test('with one of two upstreams answering 503, every retry goes to the other', { timeout: 30_000 }, async () => {
    const [good, bad] = await Promise.all([upstream('ok', 'good'), upstream('503', 'bad')]);
    const { agent, log } = client({
      upstreams: [good.origin, bad.origin],
      budget: new RetryBudget({ ratio: 1, minPerSecond: 1000 }),
      retry: { maxAttempts: 3, baseDelay: 1, maxDelay: 2 },
      breaker: false,
      throttle: false,
      balancer: { outliers: { consecutiveErrors: 0, successRate: false } },
    });
    const outcomes = await Promise.all(Array.from({ length: 60 }, (_, i) => call(agent, `a${i}`)));
    for (const o of outcomes) assert.equal(o.status, 200, `request ${o.id} was answered by the good upstream`);
    const byRequest = new Map<string, string[]>();
    for (const s of log) byRequest.set(s.id, [...(byRequest.get(s.id) ?? []), s.origin]);
    let retried = 0;
    for (const [id, origins] of byRequest) {
      for (let i = 1; i < origins.length; i++) assert.notEqual(origins[i], origins[i - 1], `request ${id} went back to ${origins[i]}`);
      if (origins.length > 1) retried++;
    }
    assert.ok(retried > 5, `some requests met the bad upstream first (${retried})`);
  });

  test('when the failing upstream is the only one routable, the retry goes back to it', { timeout: 30_000 }, async () => {
    const bad = await upstream('503', 'alone', '0');
    const { agent, log } = client({ upstreams: [bad.origin], budget: new RetryBudget({ ratio: 1, minPerSecond: 1000 }), retry: { maxAttempts: 3, baseDelay: 1, maxDelay: 2 }, breaker: false, throttle: false });
    const o = await call(agent, 'only');
    assert.equal(o.status, 503, 'the last 503 is the answer, delivered as a response');
    assert.equal(log.length, 3, 'three attempts, all to the one upstream');
  });
});

describe('the answer a caller gets', () => {
  test('a 503 that is not retried reaches the caller whole, body and headers; a POST is sent once', { timeout: 30_000 }, async () => {
    const bad = await upstream('503', 'bad', '0');
    const { agent, log } = client({ upstreams: [bad.origin], breaker: false, throttle: false });
    const r = await request('http://service.test/x', { dispatcher: agent, method: 'POST', body: 'payload', headers: { 'x-test-id': 'p' } });
    assert.equal(r.statusCode, 503);
    assert.equal(r.headers['retry-after'], '0');
    assert.equal((JSON.parse(await r.body.text()) as { name: string }).name, 'bad');
    assert.equal(log.length, 1, 'a POST is not idempotent: sent once');
  });

  test('when every upstream refuses locally, the request fails at once with the refusal, and nothing is sent', { timeout: 30_000 }, async () => {
    const bad = await upstream('503', 'tripped');
    const { agent, log } = client({ upstreams: [bad.origin], retry: { maxAttempts: 1 }, breaker: { consecutiveFailures: 2, openFor: 60_000 }, breakerReach: 'unbounded', throttle: false });
    for (let i = 0; i < 2; i++) assert.equal((await call(agent, `t${i}`)).status, 503);
    const sent = log.length;
    const o = await call(agent, 'refused');
    assert.ok(o.error instanceof BreakerOpenError, `refused by the open breaker: ${String(o.error)}`);
    assert.ok(o.ms < 50, 'at once');
    assert.equal(log.length, sent, 'nothing reached the wire');
  });

  test("an upstream's throttle does not count its own breaker's refusals as the upstream refusing", { timeout: 30_000 }, async () => {
    // Four accepts first, so that k × accepts (2 × 4) outweighs the two 503s
    // that open the breaker: the throttle's probability stays 0 and no draw
    // decides when the breaker opens. (Against an upstream that only ever
    // refused, the second 503 had to get past a throttle rejecting with
    // probability (1 + n) / (2 + n) after n local rejections: about one run
    // in a hundred never got it through in 100 calls, on any machine.)
    const flipping = await upstream('ok-then-503', 'flips', '4');
    const { agent, dependency } = client({ upstreams: [flipping.origin], retry: { maxAttempts: 1 }, breaker: { consecutiveFailures: 2, openFor: 60_000 }, breakerReach: 'unbounded' });
    for (let i = 0; i < 4; i++) assert.equal((await call(agent, `a${i}`)).status, 200);
    assert.equal((await call(agent, 'r0')).status, 503);
    assert.equal((await call(agent, 'r1')).status, 503);
    assert.equal(dependency.stats().upstreams[0]!.breaker!.state, 'open', 'the breaker opens at its second 503 in a row');
    for (let i = 0; i < 60; i++) assert.ok((await call(agent, `b${i}`)).error !== undefined, 'refused locally');
    const { requests, accepts, rejected } = dependency.stats().upstreams[0]!.throttle!;
    assert.ok(requests - rejected > 6, 'calls passed the throttle to the open breaker');
    // All within the throttle's window: what it counted as the upstream
    // refusing is the requests neither accepted nor refused by itself. Had it
    // counted the open breaker's 60 refusals, this would be up to 62, and the
    // throttle would keep rejecting after the upstream recovered.
    assert.equal(requests - accepts - rejected, 2, "the throttle's upstream refusals are the 503s the upstream sent, not the breaker's refusals");
  });

  test("Retry-After is waited for before the retry", { timeout: 30_000 }, async () => {
    const bad = await upstream('503', 'later', '1');
    const { agent, log } = client({ upstreams: [bad.origin], retry: { maxAttempts: 2, baseDelay: 1, maxDelay: 5_000 }, breaker: false, throttle: false });
    const o = await call(agent, 'ra');
    assert.equal(o.status, 503);
    assert.equal(log.length, 2);
    assert.ok(log[1]!.at - log[0]!.at >= 990, `the retry came ${(log[1]!.at - log[0]!.at).toFixed(0)} ms after a Retry-After of 1 s`);
  });

  test('a body still streaming at the deadline is cut then, with the deadline error', { timeout: 30_000 }, async () => {
    const streaming = await upstream('stream', 'stream', '3000');
    const { agent } = client({ upstreams: [streaming.origin], timeout: 300 });
    const start = performance.now();
    const r = await request('http://service.test/x', { dispatcher: agent });
    assert.equal(r.statusCode, 200);
    await assert.rejects(r.body.text(), (e: Error & { code?: string }) => e.code === 'DEADLINE_EXCEEDED' || e.name === 'AbortError' || /deadline/i.test(e.message));
    const ms = performance.now() - start;
    assert.ok(ms >= 280 && ms <= 300 + 150, `cut at ${ms.toFixed(0)} ms against a 300 ms deadline`);
  });

  test("the caller's abort ends the request and says nothing against the upstream", { timeout: 30_000 }, async () => {
    const streaming = await upstream('stream', 'slowbody', '3000');
    const { agent, dependency } = client({ upstreams: [streaming.origin], balancer: { outliers: { consecutiveErrors: 1 } } });
    const controller = new AbortController();
    const pending = request('http://service.test/x', { dispatcher: agent, signal: controller.signal }).then((r) => r.body.text());
    await sleep(100);
    controller.abort(new Error('user left'));
    await assert.rejects(pending);
    await sleep(20);
    const u = dependency.stats().balancer.upstreams[0]!;
    assert.equal(u.inFlight, 0, 'the call is no longer outstanding');
    assert.equal(u.ejections, 0);
  });

  // A request with no deadline starts without a signal of its own (Dependency.bare): the caller's abort must still end it, unretried and uncounted.
  test("the caller's abort before any answer ends a request that has no deadline: the caller's reason, no retry, nothing counted against the upstream", { timeout: 30_000 }, async () => {
    const hung = await upstream('ok', 'hung');
    const { agent, dependency, log } = client({ upstreams: [hung.origin], balancer: { outliers: { consecutiveErrors: 1 } }, breaker: { consecutiveFailures: 1 } });
    // A first request opens the connection, so the abort below lands on a sent request.
    assert.equal((await call(agent, 'warm')).status, 200);
    hung.child.kill('SIGSTOP');
    try {
      const controller = new AbortController();
      const outcome = request('http://service.test/x', { dispatcher: agent, signal: controller.signal, headers: { 'x-test-id': 'aborted' } });
      await settleOnSent(log, 'aborted');
      const reason = new Error('user left');
      controller.abort(reason);
      await assert.rejects(outcome, (e: unknown) => e === reason);
    } finally {
      hung.child.kill('SIGCONT');
    }
    const stats = dependency.stats();
    assert.equal(log.filter((s) => s.id === 'aborted').length, 1, 'sent once: an abort is never retried');
    assert.equal(stats.upstreams[0]!.breaker!.failures, 0, "the caller's abort is no failure of the upstream");
    assert.equal(stats.upstreams[0]!.breaker!.state, 'closed');
    assert.equal(stats.balancer.upstreams[0]!.ejections, 0);
  });

  test("the caller's abort during the wait before a retry ends the request at once (the signal made at the first failure)", { timeout: 30_000 }, async () => {
    const refusing = await upstream('503', 'refusing', '2');
    const { agent, log } = client({ upstreams: [refusing.origin] });
    const controller = new AbortController();
    const outcome = request('http://service.test/x', { dispatcher: agent, signal: controller.signal, headers: { 'x-test-id': 'waiting' } });
    await settleOnSent(log, 'waiting');
    // The 503 asked for 2 s: the retry waits for it, and the abort lands in that wait.
    await sleep(200);
    const reason = new Error('user left');
    controller.abort(reason);
    await assert.rejects(outcome, (e: unknown) => e === reason);
    // Had the wait not watched the caller's signal, the retry would have gone out at 2 s, and the request ended only then.
    assert.equal(log.filter((s) => s.id === 'waiting').length, 1, 'the retry was never sent');
  });
});

/** Waits until the request with test id `id` has been dispatched (the log below damper's interceptor saw it). */
async function settleOnSent(log: readonly Sent[], id: string): Promise<void> {
  while (!log.some((s) => s.id === id)) await sleep(5);
}

describe('deadlines and priorities travel downstream', () => {
  test('the deadline and priority of the incoming request being served are sent on, as the time left', { timeout: 30_000 }, async () => {
    const ok = await upstream('ok', 'ok');
    const { agent } = client({ upstreams: [ok.origin] });
    const seen = await runInRequestScope({ deadline: systemClock.now() + 700, clock: systemClock, priority: 'low', signal: new AbortController().signal }, async () => {
      const r = await request('http://service.test/x', { dispatcher: agent });
      return JSON.parse(await r.body.text()) as { deadline: string; priority: string };
    });
    const left = Number(seen.deadline);
    assert.ok(left > 500 && left <= 700, `the upstream was told ${seen.deadline} ms were left of 700`);
    assert.equal(seen.priority, 'low');
  });

  test("the request's own header wins over the scope's priority, and the earlier deadline wins", { timeout: 30_000 }, async () => {
    const ok = await upstream('ok', 'ok2');
    const { agent } = client({ upstreams: [ok.origin], timeout: 5_000 });
    const r = await request('http://service.test/x', { dispatcher: agent, headers: { 'X-Damper-Deadline-Ms': '250', 'x-damper-priority': 'critical' } });
    const seen = JSON.parse(await r.body.text()) as { deadline: string; priority: string };
    assert.ok(Number(seen.deadline) <= 250 && Number(seen.deadline) > 150, `told ${seen.deadline}`);
    assert.equal(seen.priority, 'critical');
  });

  test('an incoming caller that has gone ends the outgoing call', { timeout: 30_000 }, async () => {
    const streaming = await upstream('stream', 'gone', '3000');
    const { agent } = client({ upstreams: [streaming.origin] });
    const gone = new AbortController();
    const start = performance.now();
    const pending = runInRequestScope({ deadline: undefined, clock: systemClock, priority: undefined, signal: gone.signal }, () => request('http://service.test/x', { dispatcher: agent }).then((r) => r.body.text()));
    setTimeout(() => gone.abort(new Error('the incoming caller left')), 150);
    await assert.rejects(pending);
    assert.ok(performance.now() - start < 1_000, 'ended when its caller went, not when the body would have');
  });

  test('damperFetch goes through the same dependency', { timeout: 30_000 }, async () => {
    const [good, bad] = await Promise.all([upstream('ok', 'f-good'), upstream('503', 'f-bad')]);
    const fetch = damperFetch({ upstreams: [good.origin, bad.origin], breaker: false, throttle: false, budget: new RetryBudget({ ratio: 1, minPerSecond: 1000 }), retry: { baseDelay: 1, maxDelay: 2 } });
    closers.push(() => fetch.close());
    const answers = await Promise.all(Array.from({ length: 20 }, () => fetch('http://service.test/y').then(async (r) => [r.status, ((await r.json()) as { name: string }).name] as const)));
    for (const [status, name] of answers) {
      assert.equal(status, 200);
      assert.equal(name, 'f-good');
    }
    assert.ok(fetch.dependency.stats().retry.retries > 0, 'some went to the 503 first and were retried');
  });
});

describe('bad input is refused at the boundary', () => {
  test('bad options are ConfigErrors', () => {
    assert.throws(() => new HttpDependency({ upstreams: [] }), ConfigError);
    assert.throws(() => new HttpDependency({ upstreams: ['127.0.0.1:80'] }), ConfigError);
    assert.throws(() => new HttpDependency({ upstreams: ['http://127.0.0.1:80/path'] }), ConfigError);
    assert.throws(() => new HttpDependency({ upstreams: ['http://a'], retryMethods: ['GET ', 'POST'] }), ConfigError);
    assert.throws(() => new HttpDependency({ upstreams: ['http://a'], retryStatuses: [200] }), ConfigError);
    assert.throws(() => new HttpDependency({ upstreams: ['http://a'], deadlineHeader: 'x deadline' }), ConfigError);
    assert.throws(() => new HttpDependency({ upstreams: ['http://a'], timeout: -1 }), ConfigError);
    assert.throws(() => new HttpDependency({ upstreams: ['http://a'], budget: {} as RetryBudget }), ConfigError);
    assert.throws(() => new HttpDependency({ upstreams: ['http://a'], priority: 'urgent' as 'low' }), ConfigError);
    assert.throws(() => new HttpDependency({ upstreams: ['http://a', 'http://a'] }), ConfigError);
  });

  test('a malformed deadline or priority header on a request fails it with a HeaderError, and sends nothing', { timeout: 30_000 }, async () => {
    const ok = await upstream('ok', 'hdr');
    const { agent, log } = client({ upstreams: [ok.origin] });
    for (const headers of [{ 'x-damper-deadline-ms': '1e3' }, { 'x-damper-deadline-ms': '-5' }, { 'x-damper-priority': 'urgent' }]) {
      await assert.rejects(request('http://service.test/x', { dispatcher: agent, headers }), HeaderError);
    }
    assert.equal(log.length, 0, 'nothing reached the wire');
  });
});
