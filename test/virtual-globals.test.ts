import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { circuitBreaker, ConsecutiveBreaker, ExponentialBackoff, handleAll, retry, timeout, TimeoutStrategy, wrap } from 'cockatiel';
import { LRUCache } from 'lru-cache';
import Opossum from 'opossum';
import { Dispatcher, interceptors, request } from 'undici';
import { ConfigError, systemClock } from '../src/index.js';
import { forbidRealTime, installVirtualTime, VirtualClock } from '../src/testing.js';

// installVirtualTime runs code that reads the platform's clock and timers
// on a VirtualClock: the peers a user already composes (cockatiel, opossum)
// in virtual time, beside damper's own code (issue 31, item 4).

const EPOCH = Date.UTC(2000, 0, 1);

/** Runs `body` with virtual time installed on `clock`, and always releases it. */
async function withVirtualTime<T>(clock: VirtualClock, body: () => Promise<T>): Promise<T> {
  const release = installVirtualTime(clock);
  try {
    return await body();
  } finally {
    release();
  }
}

describe('the platform’s clock and timers, on the virtual clock, by Node’s rules', () => {
  test('timers fire at virtual times, in order, with their arguments; a delay under 1 ms is 1 ms, as Node reads it', async () => {
    const clock = new VirtualClock();
    const fired: string[] = [];
    await withVirtualTime(clock, async () => {
      setTimeout((what: string) => fired.push(`${what}@${clock.now()}`), 250, 'b');
      setTimeout(() => fired.push(`a@${clock.now()}`), 100);
      setTimeout(() => fired.push(`zero@${clock.now()}`), 0);
      setTimeout(() => fired.push(`nan@${clock.now()}`), Number.NaN);
      await clock.advance(1_000);
    });
    assert.deepEqual(fired, ['zero@1', 'nan@1', 'a@100', 'b@250']);
  });

  test('clearTimeout takes the handle or its primitive id; setInterval repeats until cleared; refresh starts the delay again', async () => {
    const clock = new VirtualClock();
    const fired: string[] = [];
    await withVirtualTime(clock, async () => {
      const byHandle = setTimeout(() => fired.push('by handle'), 10);
      const byId = setTimeout(() => fired.push('by id'), 10);
      clearTimeout(byHandle);
      clearTimeout(Number(byId));
      const every = setInterval(() => {
        fired.push(`tick@${clock.now()}`);
        if (clock.now() >= 300) clearInterval(every);
      }, 100);
      const late = setTimeout(() => fired.push(`refreshed@${clock.now()}`), 50);
      await clock.advance(40);
      assert.equal(late.refresh(), late);
      assert.equal(late.unref().hasRef(), false);
      await clock.advance(1_000);
    });
    assert.deepEqual(fired, ['refreshed@90', 'tick@100', 'tick@200', 'tick@300']);
  });

  test('Date.now, performance.now, process.hrtime and Math.random read the clock and its seed; release puts the platform’s back', async () => {
    const real = { now: Date.now, perf: performance.now, hrtime: process.hrtime, random: Math.random, setTimeout: globalThis.setTimeout };
    const draws = async (seed: number): Promise<number[]> =>
      withVirtualTime(new VirtualClock({ seed }), async () => [Math.random(), Math.random()]);
    const clock = new VirtualClock({ start: 1_500 });
    await withVirtualTime(clock, async () => {
      assert.equal(Date.now(), EPOCH + 1_500);
      // A process a second after its start (`uptimeMs`), not at 0.
      assert.equal(performance.now(), 2_500);
      assert.equal(process.hrtime.bigint(), 2_500_000_000n);
      const then = process.hrtime();
      await clock.advance(2_250);
      assert.deepEqual(process.hrtime(then), [2, 250_000_000]);
    });
    assert.deepEqual(await draws(7), await draws(7), 'the same seed, the same draws');
    assert.notDeepEqual(await draws(7), await draws(8));
    assert.deepEqual({ now: Date.now, perf: performance.now, hrtime: process.hrtime, random: Math.random, setTimeout: globalThis.setTimeout }, real);
  });

  test('one clock at a time; a release twice does nothing more; inside a real-time ban, the ban comes back', async () => {
    const release = installVirtualTime(new VirtualClock());
    assert.throws(() => installVirtualTime(new VirtualClock()), ConfigError);
    release();
    release();
    assert.throws(() => installVirtualTime(new VirtualClock(), { epochMs: Number.NaN }), /epochMs must be a finite number/);
    assert.throws(() => installVirtualTime(new VirtualClock(), { uptimeMs: -1 }), /uptimeMs must be a finite number of ms ≥ 0/);
    assert.throws(() => installVirtualTime(new VirtualClock(), 'soon' as never), ConfigError);
    assert.throws(() => installVirtualTime(systemClock as never), /clock must be a VirtualClock/);
    assert.equal(typeof Date.now(), 'number', 'a refused install changed nothing');
    const ban = forbidRealTime();
    try {
      const lift = installVirtualTime(new VirtualClock());
      assert.equal(Date.now(), EPOCH);
      lift();
      assert.throws(() => Date.now(), /inside a simulated run/);
    } finally {
      ban();
    }
  });
});

describe('peers in virtual time: the same seed, the same run', () => {
  test('lru-cache’s ttl expires an entry set at the clock’s time 0 (performance.now reads the uptime, not 0, which lru-cache reads as "no start")', async () => {
    const clock = new VirtualClock();
    await withVirtualTime(clock, async () => {
      const lru = new LRUCache<string, string>({ max: 10, ttl: 1_000 });
      lru.set('k', 'v');
      await clock.advance(999);
      assert.equal(lru.get('k'), 'v');
      await clock.advance(2);
      assert.equal(lru.get('k'), undefined, 'expired a virtual second after it was set');
    });
  });

  /** A dependency whose calls never answer: only the caller's timeout ends them. */
  const hung = (signal: AbortSignal): Promise<never> => new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));

  /** cockatiel's retry (exponential backoff, jittered) over a breaker over a timeout, called 6 times against a hung dependency: what happened when. */
  async function cockatielTrace(seed: number): Promise<string[]> {
    const clock = new VirtualClock({ seed });
    const trace: string[] = [];
    await withVirtualTime(clock, async () => {
      const attempts = retry(handleAll, { maxAttempts: 2, backoff: new ExponentialBackoff({ initialDelay: 50, maxDelay: 1_000 }) });
      const breaker = circuitBreaker(handleAll, { halfOpenAfter: 1_000, breaker: new ConsecutiveBreaker(3) });
      const limit = timeout(100, TimeoutStrategy.Aggressive);
      attempts.onRetry(({ delay }) => trace.push(`retry in ${Math.round(delay)} ms @${clock.now()}`));
      breaker.onBreak(() => trace.push(`open @${clock.now()}`));
      breaker.onHalfOpen(() => trace.push(`half-open @${clock.now()}`));
      const policy = wrap(attempts, breaker, limit);
      for (let call = 0; call < 6; call++) {
        const done = policy.execute(({ signal }) => hung(signal)).then(
          () => 'ok',
          (error: Error) => error.constructor.name,
        );
        await clock.advance(600);
        trace.push(`call ${call}: ${await done} @${clock.now()}`);
      }
    });
    return trace;
  }

  test('cockatiel: its timeouts, backoffs and breaker run on the virtual clock, reproducibly from the seed', async () => {
    const trace = await cockatielTrace(7);
    assert.deepEqual(await cockatielTrace(7), trace);
    assert.notDeepEqual(await cockatielTrace(8), trace, 'the backoff’s jitter is drawn from the clock’s seed');
    // The first attempt times out at exactly 100 virtual ms, and the breaker opens on its third failure.
    assert.match(trace[0]!, /^retry in \d+ ms @100$/);
    assert.ok(trace.some((line) => line.startsWith('open @')), trace.join('\n'));
    assert.ok(trace.some((line) => /BrokenCircuitError/.test(line)), trace.join('\n'));
  });

  test('opossum: its timeout, its rolling window and its reset timer run on the virtual clock', async () => {
    const clock = new VirtualClock();
    const trace: string[] = [];
    await withVirtualTime(clock, async () => {
      let healthy = false;
      const breaker = new Opossum(async () => (healthy ? 'ok' : await new Promise(() => {})), { timeout: 50, resetTimeout: 1_000, errorThresholdPercentage: 50, volumeThreshold: 3, rollingCountTimeout: 10_000 });
      breaker.on('timeout', () => trace.push(`timeout @${clock.now()}`));
      breaker.on('open', () => trace.push(`open @${clock.now()}`));
      breaker.on('halfOpen', () => trace.push(`halfOpen @${clock.now()}`));
      breaker.on('close', () => trace.push(`close @${clock.now()}`));
      for (let call = 0; call < 4; call++) {
        void breaker.fire().catch(() => {});
        await clock.advance(60);
      }
      healthy = true;
      await clock.advance(1_000);
      await breaker.fire();
      breaker.shutdown();
    });
    assert.deepEqual(trace, ['timeout @50', 'timeout @110', 'timeout @170', 'open @170', 'halfOpen @1170', 'close @1240']);
  });

  /**
   * A dispatcher over a server in virtual time that answers 503 to its first
   * `failures` requests, each after `ms`, keeping undici's contract with a
   * handler: what a handler throws aborts the request into its error.
   */
  class SimulatedServer extends Dispatcher {
    readonly arrivals: number[] = [];

    constructor(
      private readonly clock: VirtualClock,
      private readonly failures: number,
      private readonly ms: number,
    ) {
      super();
    }

    override dispatch(_options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
      const attempt = this.arrivals.push(this.clock.now());
      let reason: Error | undefined;
      const controller = {
        abort: (why: Error) => void (reason ??= why),
        pause: () => {},
        resume: () => {},
        get aborted() {
          return reason !== undefined;
        },
        get reason() {
          return reason ?? null;
        },
        paused: false,
      };
      handler.onRequestStart?.(controller, {});
      setTimeout(() => {
        const status = attempt <= this.failures ? 503 : 200;
        try {
          handler.onResponseStart?.(controller, status, {}, status === 200 ? 'OK' : 'Service Unavailable');
          if (reason !== undefined) return handler.onResponseError?.(controller, reason);
          handler.onResponseData?.(controller, Buffer.from(String(status)));
          handler.onResponseEnd?.(controller, {});
        } catch (error) {
          handler.onResponseError?.(controller, error as Error);
        }
      }, this.ms);
      return true;
    }
  }

  test('undici: its retry interceptor, over a dispatcher to a simulated server, waits its backoff in virtual time', async () => {
    const clock = new VirtualClock();
    const server = new SimulatedServer(clock, 2, 20);
    const answer = await withVirtualTime(clock, async () => {
      const dispatcher = server.compose(interceptors.retry({ maxRetries: 3, minTimeout: 100, timeoutFactor: 2, statusCodes: [503], methods: ['GET'] }));
      // The answer's time is read when its headers come: the body's stream ends on real macrotasks, not timers.
      const done = request('http://simulated.invalid/', { dispatcher }).then(async (r) => {
        const at = clock.now();
        return `${r.statusCode} ${await r.body.text()} @${at}`;
      });
      await clock.advance(1_000);
      return done;
    });
    // 503 at 20 ms, a 100-ms backoff; 503 at 140, 200 ms; 200 at 360.
    assert.deepEqual(server.arrivals, [0, 120, 340]);
    assert.equal(answer, '200 200 @360');
  });
});
