import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  AdaptiveThrottle,
  AimdLimit,
  Backoff,
  Balancer,
  Cache,
  callContext,
  CircuitBreaker,
  ConcurrencyLimiter,
  ConfigError,
  createSystemClock,
  DamperError,
  DeadlineGuard,
  Events,
  GradientLimit,
  guarded,
  InMemorySharedStore,
  keyed,
  MAX_TIMER_MS,
  MemoryStore,
  onAbort,
  outlierConfig,
  pipeline,
  RateLimiter,
  Retry,
  RetryBudget,
  seededRandom,
  SharedSlots,
  sleep,
  VirtualClock,
} from '../src/index.js';

/**
 * Garbage at every public constructor and method (issue 13): wrong types,
 * null, NaN, hostile objects (a revoked Proxy, a Proxy whose every trap
 * throws, a getter that throws), huge strings. Each call must end in a
 * correct result or a DamperError — never a TypeError from deep inside, never
 * a hang, never an unhandled rejection (the test runner fails the file on
 * one). And an option given a value of the wrong type must be refused at
 * construction with a ConfigError that names it.
 */

function revoked(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

const trap = (): never => {
  throw new Error('hostile trap');
};
const throwingProxy = (): object => new Proxy({}, { get: trap, has: trap, ownKeys: trap, getOwnPropertyDescriptor: trap, getPrototypeOf: trap });
const throwingGetter = (): object =>
  Object.defineProperty({}, 'value', {
    enumerable: true,
    get: trap,
  });
const HUGE = 'x'.repeat(1_000_000);
/** What a garbage function throws: passed through as it is, like any error of the caller's own code. */
const BOOM = new Error('boom');

/** A value of some type, with a word for its kind so the test knows which are wrong for an option. */
type Kind = 'undefined' | 'null' | 'number' | 'string' | 'boolean' | 'symbol' | 'bigint' | 'array' | 'function' | 'object' | 'hostile';
const kindOf = (v: unknown): Kind => {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v as Kind;
};

interface Garbage {
  readonly kind: Kind;
  readonly make: () => unknown;
  /** For a counterexample's message. */
  readonly label: string;
}
const hostile: fc.Arbitrary<Garbage> = fc
  .constantFrom('revoked', 'traps', 'getter')
  .map((h) => ({ kind: 'hostile', label: `hostile ${h}`, make: () => (h === 'revoked' ? revoked() : h === 'traps' ? throwingProxy() : throwingGetter()) }));
const plain: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, Number.NaN, Infinity, -Infinity, -1, 0, 0.5, 2 ** 53, -0, true, false, '', '5', 'constructor', '__proto__', HUGE, 10n),
  fc.integer(),
  fc.double(),
  fc.string(),
  fc.constant(Symbol('s')),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.constant({}),
  fc.dictionary(fc.constantFrom('a', 'run', 'now', 'constructor', '__proto__'), fc.oneof(fc.integer(), fc.string())),
  fc.constant(() => 42),
  fc.constant(() => {
    throw BOOM;
  }),
);
/** Garbage with its kind; hostile objects are made fresh each time (a revoked Proxy cannot be shared safely across runs). */
const garbage: fc.Arbitrary<Garbage> = fc.oneof(
  { weight: 5, arbitrary: plain.map((v) => ({ kind: kindOf(v), label: v === HUGE ? 'a huge string' : fc.stringify(v), make: () => v })) },
  { weight: 1, arbitrary: hostile },
);
/** Runs a property; a failure says both the counterexample and what went wrong with it. */
async function holds<T>(property: fc.IAsyncProperty<T>, numRuns: number): Promise<void> {
  const out = await fc.check(property, { numRuns });
  if (out.failed) assert.fail(`${fc.defaultReportMessage(out) ?? 'failed'}\n${String(out.errorInstance)}`);
}

/** Ends in a correct result or a DamperError; anything else fails with what happened. */
async function settles(what: string, call: () => unknown, check: (value: unknown) => void = () => {}): Promise<void> {
  let result: unknown;
  try {
    result = call();
    if (result instanceof Promise) result = await result;
  } catch (error) {
    assert.ok(error instanceof DamperError || error === BOOM, `${what}: threw ${error instanceof Error ? `${error.constructor.name}: ${error.message}` : String(error)}`);
    return;
  }
  check(result);
}

const TASK = async (): Promise<number> => 1;

/**
 * What `damper/otel` relies on, whatever garbage came before: `stats()` is a
 * fresh plain object of readonly data, every number in it finite and none negative.
 */
function assertPlainStats(what: string, stats: unknown, again: unknown): void {
  assert.notEqual(stats, again, `${what}.stats() returns a fresh object`);
  const walk = (v: unknown, path: string): void => {
    if (typeof v === 'number') assert.ok(Number.isFinite(v) && v >= 0, `${what}.stats()${path} is ${v}`);
    else if (typeof v === 'object' && v !== null) {
      assert.ok(Array.isArray(v) || Object.getPrototypeOf(v) === Object.prototype, `${what}.stats()${path} is a plain object`);
      for (const [k, x] of Object.entries(v)) walk(x, `${path}.${k}`);
    } else assert.ok(typeof v === 'string' || typeof v === 'boolean', `${what}.stats()${path} is a ${typeof v}`);
  };
  walk(stats, '');
}
const isOne = (v: unknown): void => assert.equal(v, 1);

interface Subject {
  /** What it is called in a failure's message. */
  readonly name: string;
  /** Builds it from its options (with a virtual clock unless the option under test is the clock). */
  readonly make: (options: unknown) => unknown;
  /** Its options and the kinds each accepts; any other kind must be a ConfigError naming the option. */
  readonly options: Readonly<Record<string, readonly Kind[]>>;
  /** A required option's good value (the base every substitution starts from). */
  readonly base?: Readonly<Record<string, unknown>>;
  /** Uses what was made once; it must give a correct result or a DamperError. */
  readonly use?: (made: never, clock: VirtualClock) => Promise<void>;
}

const NUM: readonly Kind[] = ['undefined', 'number'];
const FN: readonly Kind[] = ['undefined', 'function'];
const OBJ: readonly Kind[] = ['undefined', 'object'];
const NONE: readonly Kind[] = ['undefined'];
const STR: readonly Kind[] = ['undefined', 'string'];
const BOOL: readonly Kind[] = ['undefined', 'boolean'];

const runGuard = async (g: { execute(fn: () => Promise<number>): Promise<number> }): Promise<void> => settles('execute', () => g.execute(TASK), isOne);

const SUBJECTS: readonly Subject[] = [
  {
    name: 'CircuitBreaker',
    make: (o) => new CircuitBreaker(o as never),
    options: { consecutiveFailures: NUM, window: NUM, windowBuckets: NUM, minimumCalls: NUM, failureRateThreshold: NUM, slowCallRateThreshold: NUM, slowCallMs: NUM, openFor: NUM, maxOpenFor: NUM, jitter: NUM, halfOpenProbes: NUM, probeTimeout: NUM, isFailure: FN, onListenerError: FN, clock: NONE },
    use: runGuard,
  },
  { name: 'Retry', make: (o) => new Retry(o as never), options: { maxAttempts: NUM, baseDelay: NUM, maxDelay: NUM, attemptTimeout: NUM, expectedDuration: NUM, retryOn: FN, budget: NONE, onListenerError: FN, clock: NONE }, use: runGuard },
  { name: 'RetryBudget', make: (o) => new RetryBudget(o as never), options: { window: NUM, ratio: NUM, minPerSecond: NUM, buckets: NUM, clock: NONE }, use: async (b: RetryBudget) => void (b.recordRequest(), b.tryRetry()) },
  {
    name: 'ConcurrencyLimiter',
    make: (o) => new ConcurrencyLimiter(o as never),
    options: { limit: NUM, maxQueue: NUM, queueTimeout: NUM, order: STR, codel: ['undefined', 'object', 'boolean'], shedDelay: OBJ, onListenerError: FN, clock: NONE },
    use: runGuard,
  },
  { name: 'RateLimiter', make: (o) => new RateLimiter(o as never), base: { rate: 100 }, options: { rate: ['number'], burst: NUM, reserve: NUM, queueTimeout: NUM, maxQueue: NUM, onListenerError: FN, clock: NONE }, use: runGuard },
  { name: 'AdaptiveThrottle', make: (o) => new AdaptiveThrottle(o as never), options: { k: NUM, window: NUM, buckets: NUM, isRejection: FN, onListenerError: FN, clock: NONE }, use: runGuard },
  { name: 'DeadlineGuard', make: (o) => new DeadlineGuard(o as never), base: { timeout: 1_000 }, options: { timeout: ['number'], clock: NONE }, use: runGuard },
  { name: 'AimdLimit', make: (o) => new AimdLimit(o as never), options: { initial: NUM, min: NUM, max: NUM, latencyThresholdMs: NUM, backoffRatio: NUM } },
  { name: 'GradientLimit', make: (o) => new GradientLimit(o as never), options: { initial: NUM, min: NUM, max: NUM, tolerance: NUM, smoothing: NUM } },
  { name: 'Backoff', make: (o) => new Backoff(o as never), options: { base: NUM, max: NUM, factor: NUM, jitter: NUM } },
  {
    name: 'keyed',
    make: (o) => keyed(() => new CircuitBreaker(), o as never),
    options: { domain: FN, maxDomains: NUM },
    use: async (g: ReturnType<typeof keyed>) => settles('keyed run', () => guarded(g, TASK, { key: 'k' }), isOne),
  },
  {
    name: 'Cache',
    make: (o) => new Cache(o as never),
    options: {
      ttl: NUM,
      staleFor: NUM,
      absentTtl: NUM,
      loadTimeout: NUM,
      softTimeout: NUM,
      maxEntries: NUM,
      maxBytes: NUM,
      size: FN,
      validate: ['undefined', 'function'],
      onListenerError: FN,
      backoff: OBJ,
      ttlJitter: NUM,
      earlyRefresh: NUM,
      guard: NONE,
      maxConcurrentLoads: NUM,
      clock: NONE,
      shared: NONE,
      priority: ['undefined', 'number', 'string'],
      staleWhileRevalidate: BOOL,
    },
    use: async (c: Cache<unknown>, clock) => {
      await settles('get', async () => {
        const got = c.get('k', async () => 1);
        await clock.runUntilIdle();
        return got;
      });
      await c.close();
    },
  },
  { name: 'InMemorySharedStore', make: (o) => new InMemorySharedStore(o as never), options: { latencyMs: NUM, clock: NONE } },
  { name: 'MemoryStore', make: (o) => new MemoryStore(o as never), base: { maxEntries: 10 }, options: { maxEntries: ['number'], maxBytes: NUM, sizeOf: FN, onEvict: FN } },
  {
    name: 'Balancer',
    make: (o) => new Balancer(o as never),
    base: { upstreams: [{ id: 'a', target: 'a' }, { id: 'b', target: 'b' }] },
    options: { upstreams: ['array'], outliers: OBJ, health: NONE, panicThreshold: NUM, slowStartMs: NUM, slowStartMinShare: NUM, maxOutstanding: NUM, lowPriorityShare: NUM, isFailure: FN, onListenerError: FN, clock: NONE },
    use: async (b: Balancer<string>) => {
      await settles('balancer run', () => b.run(async () => 1), isOne);
      b.close();
    },
  },
  { name: 'outlierConfig', make: (o) => outlierConfig(o as never), options: { consecutiveErrors: NUM, successRate: ['undefined', 'object', 'boolean'], baseEjectionMs: NUM, maxEjectionMs: NUM, maxEjectionShare: NUM } },
  { name: 'VirtualClock', make: (o) => new VirtualClock(o as never), options: { start: NUM, seed: NUM } },
];

/** Makes `subject` with `options`, a virtual clock filled in where the options leave it out, and uses it. */
async function makeAndUse(subject: Subject, options: unknown): Promise<void> {
  const clock = new VirtualClock();
  let withClock = options;
  try {
    if (typeof options === 'object' && options !== null && !Array.isArray(options) && subject.options['clock'] !== undefined && !('clock' in options)) withClock = { ...options, clock };
  } catch {
    // A hostile object: it goes in as it is.
  }
  let made: unknown;
  try {
    made = subject.make(withClock);
  } catch (error) {
    assert.ok(error instanceof DamperError, `new ${subject.name}(…) threw ${error instanceof Error ? `${error.constructor.name}: ${error.message}` : String(error)}`);
    return;
  }
  if (subject.use !== undefined) await subject.use(made as never, clock);
  await clock.runUntilIdle();
}

describe('options of the wrong type are ConfigErrors at construction, naming the option', () => {
  test('the cases found by hand (issue 13, item 1)', () => {
    const clock = new VirtualClock();
    const cases: readonly [string, () => unknown][] = [
      ['CircuitBreaker options', () => new CircuitBreaker(null as never)],
      ['Retry options', () => new Retry(null as never)],
      ['ConcurrencyLimiter options', () => new ConcurrencyLimiter(null as never)],
      ['RetryBudget options', () => new RetryBudget(null as never)],
      ['AdaptiveThrottle options', () => new AdaptiveThrottle(null as never)],
      ['backoff', () => new Cache({ backoff: null as never })],
      ['backoff', () => new Cache({ backoff: 5 as never })],
      ['AimdLimit options', () => new AimdLimit(null as never)],
      ['GradientLimit options', () => new GradientLimit(null as never)],
      ['keyed options', () => keyed(() => new CircuitBreaker(), null as never)],
      ['VirtualClock options', () => new VirtualClock(null as never)],
      ['timeout', () => new (DeadlineGuard as new () => DeadlineGuard)()],
      ['clock', () => new CircuitBreaker({ clock: {} as never })],
      ['guard', () => new Cache({ guard: {} as never })],
      ['validate', () => new Cache({ validate: 42 as never })],
      ['size', () => new Cache({ size: 42 as never })],
      ['codel', () => new ConcurrencyLimiter({ codel: 5 as never, clock })],
      ['shedDelay', () => new ConcurrencyLimiter({ shedDelay: 5 as never, clock })],
      ['domain', () => keyed(() => new CircuitBreaker(), { domain: 'shard' as never })],
      ['outliers', () => new Balancer({ upstreams: [{ id: 'a', target: 1 }], outliers: 5 as never, clock })],
      ['health', () => new Balancer({ upstreams: [{ id: 'a', target: 1 }], health: 5 as never, clock })],
      ['pipeline: guard 1', () => pipeline(42 as never)],
      ['windowBuckets', () => new CircuitBreaker({ window: 1e12, windowBuckets: 1e9 })],
      ['maxEntries', () => new Cache({ maxEntries: 2e9 })],
      // null is not "absent": these four once fell through `??` to the default.
      ['priority', () => new Cache({ priority: null as never })],
      ['softTimeout', () => new Cache({ softTimeout: null as never })],
    ];
    for (const [name, make] of cases) {
      assert.throws(make, (e: unknown) => e instanceof ConfigError && e.message.includes(name), `${name}: ${make.toString()}`);
    }
  });

  test('a null per-call option is a ConfigError naming it, not the default', async () => {
    const cache = new Cache<number>({ clock: new VirtualClock() });
    for (const name of ['priority', 'softTimeout', 'waitTimeout', 'signal'] as const) {
      await assert.rejects(
        cache.get(`k-${name}`, async () => 1, { [name]: null as never }),
        (e: unknown) => e instanceof ConfigError && e.message.includes(name),
        name,
      );
    }
  });

  test('a breaker with a bad clock fails at construction, not as an unhandled rejection at its first timer', () => {
    assert.throws(() => new CircuitBreaker({ clock: { now: () => 0 } as never, openFor: 10, consecutiveFailures: 1 }), ConfigError);
  });
});

describe('garbage in: a DamperError or a correct result, never a raw TypeError', () => {
  test('every constructor, garbage as its whole options', async () => {
    for (const subject of SUBJECTS) {
      await holds(
        fc.asyncProperty(garbage, async (g) => makeAndUse(subject, g.make())),
        60,
      );
    }
  });

  test('every option of every constructor: a value of the wrong type is a ConfigError that names the option', async () => {
    for (const subject of SUBJECTS) {
      const names = Object.keys(subject.options);
      await holds(
        fc.asyncProperty(fc.constantFrom(...names), garbage, async (name, g) => {
          const value = g.make();
          const options = { ...subject.base, [name]: value };
          const accepted = subject.options[name]!;
          if (!accepted.includes(g.kind)) {
            const clock = new VirtualClock();
            assert.throws(
              () => subject.make(subject.options['clock'] !== undefined && name !== 'clock' ? { clock, ...options } : options),
              (error: unknown) => error instanceof ConfigError && error.message.includes(name),
              `new ${subject.name}({ ${name}: ${g.kind} }) must be a ConfigError naming ${name}`,
            );
            return;
          }
          await makeAndUse(subject, options);
        }),
        150,
      );
    }
  });

  test('the methods: keys, loaders, tasks, call options, instants and listeners of any kind', async () => {
    await holds(
      fc.asyncProperty(garbage, garbage, fc.integer({ min: 0, max: 17 }), async (a, b, which) => {
        const clock = new VirtualClock();
        const cache = new Cache<unknown>({ clock, shared: { store: new InMemorySharedStore({ clock }) } });
        const breaker = new CircuitBreaker({ clock });
        const balancer = new Balancer({ clock, upstreams: [{ id: 'a', target: 1 }] });
        const guards = [
          breaker,
          new Retry({ clock }),
          new ConcurrencyLimiter({ clock }),
          new RateLimiter({ clock, rate: 10 }),
          new AdaptiveThrottle({ clock }),
          new DeadlineGuard({ clock, timeout: 1_000 }),
        ] as const;
        const x = a.make();
        const y = b.make();
        const calls: readonly (() => unknown)[] = [
          () => cache.get(x as never, async () => 1),
          () => cache.get('k', x as never),
          () => cache.get('k', async () => 1, x as never),
          () => cache.set(x as never, y),
          () => cache.set('k', 1, x as never),
          () => cache.delete(x as never),
          () => cache.peek(x as never),
          () => cache.warm(x as never, async () => 1),
          () => cache.restore(x as never),
          () => breaker.execute(x as never),
          () => breaker.execute(TASK, x as never),
          () => guards[Math.floor(which / 2) % guards.length]!.execute(x as never, y as never),
          // run(task, context) is the composition seam: its context comes from callContext() or the cache, and is not re-checked on every call.
          () => guards[which % guards.length]!.run(x as never, callContext()),
          () => balancer.run(TASK, x as never),
          // A clock of their own: with the shared tier's heartbeat on it, advance(1e56) would be 1e56 heartbeats.
          () => new VirtualClock().advance(x as never),
          () => new VirtualClock().setTimer(x as never, y as never),
          () => new Events<{ e: () => void }>().on(x as never, y as never),
          () => cache.on(x as never, y as never),
        ];
        if (process.env['GARBAGE_TRACE'] !== undefined) console.error('method', which, a.label.slice(0, 40), b.label.slice(0, 40));
        const settled = settles(`method ${which}`, calls[which]!);
        // Not runUntilIdle: the shared tier's heartbeat never stops. Past every load's and lease's timeout.
        await clock.advance(30_000);
        await settled;
        for (const g of [...guards, balancer]) assertPlainStats(g.constructor.name, g.stats(), g.stats());
        await cache.close();
        balancer.close();
      }),
      400,
    );
  });

  test('the free functions: seeds, sleeps, signals, contexts', async () => {
    await holds(
      fc.asyncProperty(garbage, garbage, fc.integer({ min: 0, max: 6 }), async (a, b, which) => {
        const clock = new VirtualClock();
        const x = a.make();
        const y = b.make();
        const calls: readonly (() => unknown)[] = [
          () => seededRandom(x as never)(),
          () => createSystemClock(x as never).random(),
          () => sleep(clock, x as never),
          () => sleep(x as never, 1),
          () => onAbort(x as never, y as never),
          () => callContext(x as never),
          () => new SharedSlots(x as never),
        ];
        if (process.env['GARBAGE_TRACE'] !== undefined) console.error('function', which, a.label.slice(0, 40), b.label.slice(0, 40));
        const settled = settles(`function ${which}`, calls[which]!);
        await clock.advance(MAX_TIMER_MS); // the longest sleep there can be
        await settled;
      }),
      200,
    );
  });
});
