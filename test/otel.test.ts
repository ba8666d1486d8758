import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AggregationTemporality, type DataPoint, type Histogram, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { AdaptiveThrottle, ArgumentError, Balancer, Cache, CircuitBreaker, ConcurrencyLimiter, ConfigError, DeadlineGuard, RateLimiter, Retry, RetryBudget, VirtualClock } from '../src/index.js';
import { characteristicAlerts, instrument, RollingRatio } from '../src/otel/index.js';
import { TARGETS } from '../src/otel/catalogue.js';
import { deferred } from './helpers.js';

/** A reader the test collects from by hand: the real SDK's pipeline, no exporter, no timer. */
class ManualReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

interface Collected {
  /** The value of the point of `name` whose attributes include `attributes` (all of them), or undefined. */
  value(name: string, attributes?: Record<string, string>): number | undefined;
  histogram(name: string, attributes?: Record<string, string>): Histogram | undefined;
  names(): string[];
}

async function collect(reader: ManualReader): Promise<Collected> {
  const { resourceMetrics, errors } = await reader.collect();
  assert.deepEqual(errors, []);
  const metrics = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
  const point = (name: string, attributes: Record<string, string> = {}): DataPoint<unknown> | undefined =>
    metrics
      .find((m) => m.descriptor.name === name)
      ?.dataPoints.find((p) => Object.entries(attributes).every(([k, v]) => p.attributes[k] === v)) as DataPoint<unknown> | undefined;
  return {
    value: (name, attributes) => point(name, attributes)?.value as number | undefined,
    histogram: (name, attributes) => point(name, attributes)?.value as Histogram | undefined,
    names: () => metrics.filter((m) => m.dataPoints.length > 0).map((m) => m.descriptor.name),
  };
}

function sdk(): { reader: ManualReader; meterProvider: MeterProvider } {
  const reader = new ManualReader();
  return { reader, meterProvider: new MeterProvider({ readers: [reader] }) };
}

describe('instrument: what each target exports, read through the real SDK', () => {
  test('a cache: requests by result, loads, the load-duration histogram and the characteristic ratios', async () => {
    const { reader, meterProvider } = sdk();
    const clock = new VirtualClock({ seed: 1 });
    const cache = new Cache<number>({ clock, ttl: 1_000, staleFor: 60_000, ttlJitter: 0, earlyRefresh: 0 });
    instrument(cache, { meterProvider, clock, attributes: { 'damper.name': 'users' } });
    const got = cache.get('a', () => new Promise((resolve) => clock.setTimer(() => resolve(1), 40)));
    await clock.advance(40);
    await got;
    for (let i = 0; i < 3; i++) await cache.get('a', () => 2);
    await clock.advance(1_001);
    assert.equal(await cache.get('a', () => Promise.reject(new Error('down'))), 1, 'stale while the refresh fails');
    await clock.settle();
    const c = await collect(reader);
    const users = { 'damper.name': 'users' };
    assert.equal(c.value('damper.cache.requests', { ...users, 'damper.result': 'hit' }), 3);
    assert.equal(c.value('damper.cache.requests', { 'damper.result': 'miss' }), 1);
    assert.equal(c.value('damper.cache.requests', { 'damper.result': 'stale' }), 1);
    assert.equal(c.value('damper.cache.requests', { 'damper.result': 'error' }), 0);
    assert.equal(c.value('damper.cache.loads', users), 2, 'the read-driven loads (the first point)');
    assert.equal(c.value('damper.cache.load.errors'), 1);
    assert.equal(c.value('damper.cache.entries'), 1);
    assert.equal(c.value('damper.cache.origin_amplification'), 2 / 5);
    assert.equal(c.value('damper.cache.stale_ratio'), 0, 'a stale read while revalidating is routine, not the origin failing');
    assert.equal(c.value('damper.cache.stale', { 'damper.reason': 'revalidate' }), 1);
    assert.equal(c.value('damper.cache.loads', { 'damper.cause': 'read' }), 2);
    assert.equal(c.value('damper.cache.loads', { 'damper.cause': 'warm' }), 0);
    const ok = c.histogram('damper.cache.load.duration', { 'damper.result': 'success' });
    assert.equal(ok?.count, 1);
    assert.equal(ok?.sum, 0.04, 'seconds, the unit OpenTelemetry prescribes for durations');
    assert.equal(c.histogram('damper.cache.load.duration', { 'damper.result': 'error' })?.count, 1);
    assert.equal(c.names().some((n) => n.startsWith('damper.cache.shared')), false, 'no shared-tier points without a shared tier');
  });

  test('a breaker: its state as one point per state, calls by result, trips', async () => {
    const { reader, meterProvider } = sdk();
    const clock = new VirtualClock({ seed: 1 });
    const breaker = new CircuitBreaker({ clock, consecutiveFailures: 2 });
    instrument(breaker, { meterProvider, clock });
    await breaker.execute(async () => 1);
    for (let i = 0; i < 2; i++) await assert.rejects(breaker.execute(() => Promise.reject(new Error('x'))));
    await assert.rejects(breaker.execute(async () => 1), /open/i);
    const c = await collect(reader);
    assert.equal(c.value('damper.breaker.state', { 'damper.state': 'open' }), 1);
    assert.equal(c.value('damper.breaker.state', { 'damper.state': 'closed' }), 0);
    assert.equal(c.value('damper.breaker.calls', { 'damper.result': 'success' }), 1);
    assert.equal(c.value('damper.breaker.calls', { 'damper.result': 'failure' }), 2);
    assert.equal(c.value('damper.breaker.calls', { 'damper.result': 'rejected' }), 1);
    assert.equal(c.value('damper.breaker.trips'), 1);
  });

  test('a limiter: levels, shed by reason, the shed ratio and the queueing delay of queued calls', async () => {
    const { reader, meterProvider } = sdk();
    const clock = new VirtualClock({ seed: 1 });
    const limiter = new ConcurrencyLimiter({ clock, limit: 1, maxQueue: 1, codel: false });
    instrument(limiter, { meterProvider, clock });
    const slow = deferred<number>();
    const first = limiter.execute(() => slow.promise);
    const second = limiter.execute(async () => 2);
    await assert.rejects(limiter.execute(async () => 3), /refused/);
    let c = await collect(reader);
    assert.equal(c.value('damper.limiter.in_flight'), 1);
    assert.equal(c.value('damper.limiter.queued'), 1);
    assert.equal(c.value('damper.limiter.shed', { 'damper.reason': 'full' }), 1);
    await clock.advance(25);
    slow.resolve(1);
    await Promise.all([first, second]);
    c = await collect(reader);
    assert.equal(c.value('damper.limiter.admitted'), 2);
    assert.equal(c.value('damper.limiter.waited'), 1);
    assert.equal(c.value('damper.limiter.shed_ratio'), 1 / 3);
    const delay = c.histogram('damper.limiter.queue.delay');
    assert.equal(delay?.count, 1);
    assert.equal(delay?.sum, 0.025);
  });

  test('a retry: calls, retries, budget refusals and the retry ratio', async () => {
    const { reader, meterProvider } = sdk();
    const clock = new VirtualClock({ seed: 1 });
    const retry = new Retry({ clock, maxAttempts: 3, baseDelay: 1, budget: new RetryBudget({ clock, ratio: 0, minPerSecond: 0.1 }) });
    instrument(retry, { meterProvider, clock });
    let attempts = 0;
    const failing = retry.execute(async () => {
      attempts++;
      throw new Error('down');
    });
    await clock.runUntilIdle();
    await assert.rejects(failing);
    const c = await collect(reader);
    assert.equal(c.value('damper.retry.calls'), 1);
    assert.equal(c.value('damper.retry.retries'), attempts - 1);
    assert.equal(c.value('damper.retry.budget.refusals'), 1, 'a floor of 0.1/s over 10 s allows one retry; the next is refused');
    assert.equal(c.value('damper.retry.ratio'), attempts - 1);
  });

  test('a balancer: per upstream in flight, ejected, slow start; routed and panic', async () => {
    const { reader, meterProvider } = sdk();
    const clock = new VirtualClock({ seed: 1 });
    const balancer = new Balancer({ clock, upstreams: [{ id: 'a', target: 'a' }, { id: 'b', target: 'b' }] });
    instrument(balancer, { meterProvider, clock });
    const held = deferred<void>();
    const call = balancer.run(() => held.promise);
    const c = await collect(reader);
    assert.equal(c.value('damper.balancer.picks'), 1);
    assert.equal((c.value('damper.balancer.upstream.in_flight', { 'damper.upstream': 'a' }) ?? 0) + (c.value('damper.balancer.upstream.in_flight', { 'damper.upstream': 'b' }) ?? 0), 1);
    assert.equal(c.value('damper.balancer.upstream.ejected', { 'damper.upstream': 'a' }), 0);
    assert.equal(c.value('damper.balancer.panic'), 0);
    held.resolve();
    await call;
  });

  test('every other guard attaches, and reports its counters', async () => {
    const { reader, meterProvider } = sdk();
    const clock = new VirtualClock({ seed: 1 });
    const rate = new RateLimiter({ clock, rate: 10 });
    const throttle = new AdaptiveThrottle({ clock });
    const deadline = new DeadlineGuard({ clock, timeout: 100 });
    const budget = new RetryBudget({ clock });
    for (const target of [rate, throttle, deadline, budget]) instrument(target, { meterProvider, clock });
    await rate.execute(async () => 1);
    await throttle.execute(async () => 1);
    await deadline.execute(async () => 1);
    const c = await collect(reader);
    assert.equal(c.value('damper.rate_limiter.admitted'), 1);
    assert.equal(c.value('damper.throttle.calls'), 1);
    assert.equal(c.value('damper.throttle.rejection_probability'), 0);
    assert.equal(c.value('damper.deadline.calls'), 1);
    assert.equal(typeof c.value('damper.retry_budget.available'), 'number');
  });
});

describe('the characteristic ratios are over a window, not since the start', () => {
  test('origin amplification rises within one window of the loop starting, and falls after it', async () => {
    const { reader, meterProvider } = sdk();
    const clock = new VirtualClock({ seed: 1 });
    const cache = new Cache<number>({ clock, ttl: 3_600_000, ttlJitter: 0, earlyRefresh: 0 });
    instrument(cache, { meterProvider, clock, ratioWindow: 10_000 });
    // Ten minutes of hits on one key: amplification near 0.
    for (let s = 0; s < 600; s++) {
      await cache.get('hot', () => 1);
      await clock.advance(1_000);
    }
    assert.ok((await collect(reader)).value('damper.cache.origin_amplification')! < 0.01);
    // Every read a new key (a cache that stopped absorbing): within one window the gauge reads 1,
    // where a ratio since the start would still read 20 / 620.
    for (let s = 0; s < 20; s++) {
      await cache.get(`cold:${s}`, () => 1);
      await clock.advance(1_000);
    }
    assert.equal((await collect(reader)).value('damper.cache.origin_amplification'), 1);
    for (let s = 0; s < 20; s++) {
      await cache.get('hot', () => 1);
      await clock.advance(1_000);
    }
    assert.equal((await collect(reader)).value('damper.cache.origin_amplification'), 0);
  });
});

describe('instrument: detaching, and what it refuses', () => {
  test('after detach nothing more is observed and the listeners are gone', async () => {
    const { reader, meterProvider } = sdk();
    const clock = new VirtualClock({ seed: 1 });
    const cache = new Cache<number>({ clock });
    const detach = instrument(cache, { meterProvider, clock });
    await cache.get('a', () => 1);
    assert.equal((await collect(reader)).value('damper.cache.loads'), 1);
    detach();
    detach();
    await cache.get('b', () => 1);
    const c = await collect(reader);
    // The SDK keeps reporting a cumulative stream's last value; what matters is that it no longer moves.
    assert.equal(c.value('damper.cache.loads'), 1, 'the load after detach was not observed');
    assert.equal(c.histogram('damper.cache.load.duration')?.count, 1, 'the load after detach was not recorded');
  });

  test('bad targets are ArgumentErrors, bad options ConfigErrors', () => {
    for (const target of [42, null, {}, new Map()]) assert.throws(() => instrument(target as never), ArgumentError);
    // @ts-expect-error the type says so first: a Map is not a cache, a guard or a balancer
    assert.throws(() => instrument(new Map()), ArgumentError);
    const cache = new Cache<number>({});
    assert.throws(() => instrument(cache, { meterProvider: {} as never }), ConfigError);
    assert.throws(() => instrument(cache, { attributes: { bad: {} as never } }), ConfigError);
    assert.throws(() => instrument(cache, { ratioWindow: -1 }), ConfigError);
    assert.throws(() => instrument(cache, { clock: {} as never }), ConfigError);
    assert.throws(() => instrument(cache, null as never), ConfigError);
  });

  test('RollingRatio refuses what would poison its window', () => {
    const clock = new VirtualClock({ seed: 1 });
    assert.throws(() => new RollingRatio({} as never, 1_000), ConfigError);
    assert.throws(() => new RollingRatio(clock, 0), ConfigError);
    assert.throws(() => new RollingRatio(clock, 1_000, Number.NaN), ArgumentError);
    const ratio = new RollingRatio(clock, 1_000);
    assert.throws(() => ratio.read(1, Number.POSITIVE_INFINITY), ArgumentError);
    assert.throws(() => ratio.read('1' as never, 2), ArgumentError);
    assert.equal(ratio.read(1, 4), 0.25, 'a refused read leaves the window as it was');
  });

  test('without a meter provider it uses the global one, a no-op until an SDK registers', () => {
    const detach = instrument(new Cache<number>({}));
    detach();
  });

  test('each characteristic alert watches a ratio that instrument() exports', () => {
    const ratios = new Set(TARGETS.flatMap((t) => t.instruments.filter((i) => i.kind === 'gauge' && i.unit === '1').map((i) => i.name)));
    for (const a of characteristicAlerts) assert.ok(ratios.has(a.metric), a.metric);
  });
});
