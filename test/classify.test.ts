import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isAbort, isLoadTimeout, isNeverRetried, isOverloadSignal, isRefusal } from '../src/guard/classify.js';
import {
  AbortedError,
  AdaptiveThrottle,
  AimdLimit,
  Balancer,
  BreakerOpenError,
  Cache,
  CircuitBreaker,
  classify,
  ConcurrencyLimiter,
  DamperError,
  DeadlineExceededError,
  type Guard,
  LoadTimeoutError,
  type Outcome,
  OverloadedError,
  Retry,
  RetryBudget,
  ValidationError,
  VirtualClock,
} from '../src/index.js';
import { track } from './helpers.js';

/**
 * The same error as a second copy of damper in the dependency tree raises it:
 * the same `code` and fields, but none of this copy's classes.
 */
function foreign(error: DamperError): Error {
  const copy = Object.assign(new Error(error.message), error);
  assert.ok(!(copy instanceof DamperError));
  return copy;
}

/** One of each error damper raises that names an outcome, with the outcome it names. */
const OWN: readonly [DamperError, Outcome][] = [
  [new LoadTimeoutError('k', 100, 'load'), 'timeout'],
  [new LoadTimeoutError('k', 100, 'wait'), 'failure'],
  [new OverloadedError('shed'), 'shed'],
  [new BreakerOpenError('open', 10), 'breaker-open'],
  [new AbortedError('left', undefined), 'aborted'],
  [new ValidationError('k', 'bad'), 'invalid'],
  [new DeadlineExceededError('late'), 'deadline'],
];

describe('classify: one judgement of an outcome, by code', () => {
  test("damper's errors and a second copy's are judged alike", () => {
    for (const [error, outcome] of OWN) {
      assert.equal(classify(error), outcome, error.message);
      assert.equal(classify(foreign(error)), outcome, `a foreign ${error.name}`);
    }
  });

  test('a dependency that says it is overloaded is told apart from a refusal here', () => {
    for (const said of [{ code: 'UNAVAILABLE' }, { code: 'RESOURCE_EXHAUSTED' }, { status: 503 }, { status: 429 }, { statusCode: 503 }, { statusCode: 429 }]) {
      assert.equal(classify(Object.assign(new Error('busy'), said)), 'overloaded', JSON.stringify(said));
    }
    assert.equal(classify(Object.assign(new Error('gone'), { status: 500 })), 'failure');
  });

  test("the DOM's and Node's AbortError are the caller leaving", () => {
    assert.equal(classify(new DOMException('stop', 'AbortError')), 'aborted');
    assert.equal(classify(AbortSignal.abort().reason), 'aborted');
    assert.equal(classify(Object.assign(new Error('stop'), { name: 'AbortError', code: 'ABORT_ERR' })), 'aborted');
  });

  test('anything else is a failure, and classify never throws', () => {
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    const throwing = Object.defineProperty({}, 'code', {
      get() {
        throw new Error('no');
      },
    });
    for (const value of [new Error('x'), 'a string', null, undefined, 42, { code: 7 }, revoked.proxy, throwing]) assert.equal(classify(value), 'failure');
  });

  test('the helpers the guards used before say what classify says', () => {
    for (const [error] of OWN) {
      for (const e of [error, foreign(error)]) {
        const outcome = classify(e);
        assert.equal(isAbort(e), outcome === 'aborted');
        assert.equal(isRefusal(e), outcome === 'shed' || outcome === 'breaker-open');
        assert.equal(isOverloadSignal(e), outcome === 'shed' || outcome === 'breaker-open');
        assert.equal(isLoadTimeout(e), outcome === 'timeout');
        assert.equal(isNeverRetried(e), ['shed', 'breaker-open', 'aborted', 'invalid', 'deadline'].includes(outcome));
      }
    }
  });
});

/** Runs `scenario` with damper's own error and with a second copy's, and checks they end alike. */
async function alike<T>(error: DamperError, scenario: (error: unknown) => Promise<T>): Promise<T> {
  const own = await scenario(error);
  assert.deepEqual(await scenario(foreign(error)), own, `a foreign ${error.name} is judged as damper's own`);
  return own;
}

const reject =
  (error: unknown) =>
  (): Promise<never> =>
    Promise.reject(error);

describe("a second copy of damper: every guard, the balancer and the cache judge its errors as damper's own", () => {
  test('a refusal or an abort never trips a breaker; an invalid value counts as an answer; a load timeout as a failure', async () => {
    const breakerAfter = async (error: unknown): Promise<unknown> => {
      const breaker = new CircuitBreaker({ clock: new VirtualClock(), consecutiveFailures: 3, minimumCalls: 3 });
      for (let i = 0; i < 5; i++) await breaker.execute(reject(error)).catch(() => {});
      return breaker.stats();
    };
    for (const refusal of [new OverloadedError('shed'), new BreakerOpenError('inner', 5), new AbortedError('left', undefined)]) {
      const stats = await alike(refusal, breakerAfter);
      assert.deepEqual(stats, { state: 'closed', calls: 0, failures: 0, slow: 0, consecutiveFailures: 0, trips: 0, succeeded: 0, failed: 0, rejected: 0 });
    }
    assert.equal(((await alike(new ValidationError('k', 'bad'), breakerAfter)) as { succeeded: number }).succeeded, 5);
    assert.equal(((await alike(new LoadTimeoutError('k', 10, 'load'), breakerAfter)) as { state: string }).state, 'open');
  });

  test('an adaptive throttle counts a refusal and a timeout as not taken, an invalid value as taken', async () => {
    const throttleAfter = async (error: unknown): Promise<unknown> => {
      const throttle = new AdaptiveThrottle({ clock: new VirtualClock() });
      for (let i = 0; i < 20; i++) await throttle.execute(reject(error)).catch(() => {});
      const { requests, accepts } = throttle.stats();
      return { requests, accepts };
    };
    for (const notTaken of [new OverloadedError('shed'), new BreakerOpenError('open', 5), new LoadTimeoutError('k', 10, 'load')]) {
      assert.equal(((await alike(notTaken, throttleAfter)) as { accepts: number }).accepts, 0);
    }
    assert.equal(((await alike(new ValidationError('k', 'bad'), throttleAfter)) as { accepts: number }).accepts, 20);
  });

  test('a retry never repeats a refusal, an invalid value, a passed deadline or an abort; it does repeat a timeout', async () => {
    const attemptsFor = async (error: unknown): Promise<number> => {
      const clock = new VirtualClock();
      const retry = new Retry({ clock, maxAttempts: 3, budget: new RetryBudget({ clock, minPerSecond: 100 }) });
      let attempts = 0;
      const call = track(
        retry.execute(() => {
          attempts++;
          return Promise.reject(error);
        }),
      );
      await clock.runUntilIdle();
      assert.ok(call.settled);
      return attempts;
    };
    for (const never of [new OverloadedError('shed'), new BreakerOpenError('open', 5), new ValidationError('k', 'bad'), new DeadlineExceededError('late'), new AbortedError('left', undefined)]) {
      assert.equal(await alike(never, attemptsFor), 1, never.name);
    }
    assert.equal(await alike(new LoadTimeoutError('k', 10, 'load'), attemptsFor), 3);
  });

  test("an adaptive limiter reads a shed call inside it as overload and lowers its limit", async () => {
    const limitAfter = async (error: unknown): Promise<number> => {
      const algorithm = new AimdLimit({ initial: 16 });
      const limiter = new ConcurrencyLimiter({ clock: new VirtualClock(), limit: algorithm });
      await limiter.execute(reject(error)).catch(() => {});
      return algorithm.current;
    };
    assert.ok((await alike(new OverloadedError('shed'), limitAfter)) < 16);
  });

  test("a refusal inside a balancer's call, or an abort, is not held against the upstream", async () => {
    const errorsAfter = async (error: unknown): Promise<number> => {
      const balancer = new Balancer({ clock: new VirtualClock(), upstreams: [{ id: 'a', target: 'a' }] });
      for (let i = 0; i < 3; i++) await balancer.run(reject(error)).catch(() => {});
      return balancer.snapshot().upstreams[0]!.consecutiveErrors;
    };
    for (const notReached of [new OverloadedError('shed'), new BreakerOpenError('open', 5), new AbortedError('left', undefined)]) {
      assert.equal(await alike(notReached, errorsAfter), 0, notReached.name);
    }
    assert.equal(await alike(new LoadTimeoutError('k', 10, 'load'), errorsAfter), 3);
  });

  test("the cache: a warm-up refused by the origin budget does not count against its key", async () => {
    /** Warms one key while the budget refuses with `error`, then gets it: loaded at once when the refusal was not held against it. */
    const getAfterRefusedWarmUp = async (error: unknown): Promise<unknown> => {
      const clock = new VirtualClock();
      let refusing = true;
      const guard: Guard = { run: (task, context) => (refusing ? Promise.reject(error) : task(context.signal)) };
      const cache = new Cache<string>({ clock, guard });
      const warmed = track(cache.warm(['k'], async () => 'warm'));
      await clock.runUntilIdle();
      assert.equal(warmed.value?.failed, 1);
      refusing = false;
      const got = track(cache.get('k', async () => 'live'));
      await clock.runUntilIdle();
      return got.value ?? (got.error as Error).message;
    };
    assert.equal(await alike(new OverloadedError('budget full'), getAfterRefusedWarmUp), 'live');
    // The control: a failure that is the key's own is held against it, and the key backs off.
    assert.notEqual(await getAfterRefusedWarmUp(new Error('down')), 'live');
  });

  test("the cache: a nested cache's ValidationError behind a loader is an invalid value, not an error", async () => {
    const eventsFor = async (error: unknown): Promise<string[]> => {
      const clock = new VirtualClock();
      const cache = new Cache<string>({ clock });
      const seen: string[] = [];
      cache.on('invalid', (e) => seen.push(`invalid: ${e.reason}`));
      cache.on('error', () => seen.push('error'));
      await cache.get('k', reject(error)).catch(() => {});
      return seen;
    };
    assert.deepEqual(await alike(new ValidationError('k', 'no price'), eventsFor), ['invalid: no price']);
  });
});
