import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, test } from 'node:test';
import {
  type BreakerEvents,
  CircuitBreaker,
  type CircuitBreakerOptions,
  ConfigError,
  ConsecutiveFailuresRule,
  FailureRateRule,
  sleep,
  SlowCallRateRule,
  type TripReason,
  type TripRule,
  VirtualClock,
} from '../src/index.js';

const ok = async (): Promise<number> => 1;
const boom = async (): Promise<never> => {
  throw new Error('boom');
};

function setup(options: CircuitBreakerOptions): { clock: VirtualClock; breaker: CircuitBreaker; reasons: string[] } {
  const clock = new VirtualClock();
  const breaker = new CircuitBreaker({ clock, ...options });
  const reasons: string[] = [];
  breaker.on('state', (e: Parameters<BreakerEvents['state']>[0]) => reasons.push(`${e.to}:${e.reason}`));
  return { clock, breaker, reasons };
}

async function calls(breaker: CircuitBreaker, pattern: string): Promise<void> {
  for (const c of pattern) await breaker.execute(c === 'x' ? boom : ok).catch(() => {});
}

describe('a trip rule alone decides when the breaker opens', () => {
  test('ConsecutiveFailuresRule: failures in a row; a success starts the count again', async () => {
    const { breaker, reasons } = setup({ trip: new ConsecutiveFailuresRule({ failures: 3 }) });
    await calls(breaker, 'xx.xx');
    assert.equal(breaker.state, 'closed');
    assert.equal(breaker.stats().consecutiveFailures, 2);
    await calls(breaker, 'x');
    assert.deepEqual(reasons, ['open:consecutive-failures']);
    assert.equal(breaker.stats().calls, 0, 'no rule keeps a window');
  });

  test('FailureRateRule: a rate over the window, once it holds minimumCalls; never a run of failures', async () => {
    const { breaker, reasons } = setup({ trip: new FailureRateRule({ threshold: 0.5, minimumCalls: 10 }) });
    await calls(breaker, 'xxxxxxxx'); // eight in a row: no consecutive rule here, and fewer than ten calls
    assert.equal(breaker.state, 'closed');
    await calls(breaker, '.');
    assert.equal(breaker.state, 'closed');
    await calls(breaker, '.'); // the tenth call is a success, and brings the window to its minimum: 8/10 > 0.5
    assert.deepEqual(reasons, ['open:failure-rate']);
    assert.deepEqual([breaker.stats().calls, breaker.stats().failures], [10, 8]);
  });

  test('SlowCallRateRule: slow calls over the window trip, a fast success among them included', async () => {
    const { clock, breaker, reasons } = setup({ trip: new SlowCallRateRule({ threshold: 0.5, slowCallMs: 100, minimumCalls: 4 }) });
    const slow = async (): Promise<number> => {
      await sleep(clock, 100);
      return 1;
    };
    for (let i = 0; i < 3; i++) {
      const p = breaker.execute(slow);
      await clock.advance(100);
      await p;
    }
    assert.equal(breaker.state, 'closed');
    await breaker.execute(ok);
    assert.deepEqual(reasons, ['open:slow-call-rate']);
    assert.deepEqual([breaker.stats().calls, breaker.stats().slow, breaker.stats().failures], [4, 3, 0]);
  });

  test('several rules: the first to say so trips the breaker, and all are reset when it closes', async () => {
    const consecutive = new ConsecutiveFailuresRule({ failures: 2 });
    const rate = new FailureRateRule({ threshold: 0.1, minimumCalls: 3 });
    const { clock, breaker, reasons } = setup({ trip: [rate, consecutive], openFor: 1000, jitter: 0 });
    await calls(breaker, '.xx');
    assert.deepEqual(reasons, ['open:failure-rate'], 'the rate rule, listed first, wins the tie');
    await clock.advance(1000);
    await calls(breaker, '.');
    assert.equal(breaker.state, 'closed');
    assert.deepEqual([breaker.stats().calls, breaker.stats().consecutiveFailures], [0, 0], 'both rules start the closed period empty');
  });
});

describe("a user's own rule", () => {
  /** Trips when failures in the closed period reach a budget, whatever succeeded in between: a rule no option describes. */
  class ErrorBudget implements TripRule {
    private spent = 0;
    resets = 0;
    constructor(private readonly budget: number) {}
    success(): TripReason | undefined {
      return undefined;
    }
    failure(): TripReason | undefined {
      this.spent++;
      return this.spent >= this.budget ? 'rule:error-budget' : undefined;
    }
    reset(): void {
      this.spent = 0;
      this.resets++;
    }
    counts(): { failures: number } {
      return { failures: this.spent };
    }
  }

  test('trips the breaker with its own reason, is reset on close, and shows in stats()', async () => {
    const rule = new ErrorBudget(3);
    const { clock, breaker, reasons } = setup({ trip: rule, openFor: 1000, jitter: 0 });
    await calls(breaker, 'x.x.....');
    assert.equal(breaker.stats().failures, 2);
    await calls(breaker, 'x');
    assert.deepEqual(reasons, ['open:rule:error-budget']);
    await clock.advance(1000);
    await calls(breaker, '.');
    assert.deepEqual([breaker.state, rule.resets, breaker.stats().failures], ['closed', 1, 0]);
  });

  test('what it throws is a warning: the call still gets its answer and the breaker goes on', async () => {
    const throwing: TripRule = {
      success: () => undefined,
      failure: () => {
        throw new Error('a bug in the rule');
      },
      reset: () => {},
    };
    const { breaker } = setup({ trip: throwing });
    const warned = once(process, 'warning');
    await assert.rejects(breaker.execute(boom), /boom/);
    const [warning] = (await warned) as [Error & { code?: string }];
    assert.equal(warning.code, 'DAMPER_TRIP_RULE_ERROR');
    assert.equal(breaker.state, 'closed');
    assert.equal(await breaker.execute(ok), 1);
  });
});

describe('trip: checked at construction', () => {
  test('trip with an option that builds the default rules is a ConfigError naming it', () => {
    assert.throws(() => new CircuitBreaker({ trip: new ConsecutiveFailuresRule(), failureRateThreshold: 0.2 }), (e: unknown) => e instanceof ConfigError && /trip replaces failureRateThreshold/.test(e.message));
    assert.throws(() => new CircuitBreaker({ trip: [], consecutiveFailures: 3, slowCallMs: 10 }), /consecutiveFailures, slowCallMs/);
  });

  test('a rule belongs to one breaker', () => {
    const rule = new FailureRateRule();
    new CircuitBreaker({ trip: rule });
    assert.throws(() => new CircuitBreaker({ trip: [new ConsecutiveFailuresRule(), rule] }), (e: unknown) => e instanceof ConfigError && /trip\[1\] is already the rule of another/.test(e.message));
  });

  test('what is not a rule, and a shipped rule with bad settings, are ConfigErrors', () => {
    for (const trip of [42, {}, [{ success: () => undefined }], null]) assert.throws(() => new CircuitBreaker({ trip: trip as unknown as TripRule }), ConfigError, String(trip));
    assert.throws(() => new ConsecutiveFailuresRule({ failures: 0 }), ConfigError);
    assert.throws(() => new FailureRateRule({ threshold: 2 }), ConfigError);
    assert.throws(() => new FailureRateRule({ window: 1000, windowBuckets: 3 }), ConfigError);
    assert.throws(() => new SlowCallRateRule({ slowCallMs: -1 }), ConfigError);
  });

  test('an empty list of rules is a breaker only an operator opens', async () => {
    const { breaker } = setup({ trip: [] });
    await calls(breaker, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx');
    assert.equal(breaker.state, 'closed');
    breaker.isolate();
    assert.equal(breaker.state, 'open');
  });
});
