import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type BatchObservableCallback } from '@opentelemetry/api';
import { forbidRealTime } from 'damper';
import { VirtualMeterProvider } from '../src/lab/judge/virtual-meter.js';

describe('virtual meter: a collection is a call in virtual time, never a read of the real clock', () => {
  test('collect runs the batch callbacks then and there and returns what they observed, attributes included', () => {
    const provider = new VirtualMeterProvider();
    const meter = provider.getMeter('damper', '0.1.0');
    const ratio = meter.createObservableGauge('damper.cache.origin_amplification', { unit: '1', description: 'loads ÷ requests' });
    const requests = meter.createObservableCounter('damper.cache.requests', { unit: '{request}' });
    let loads = 1;
    meter.addBatchObservableCallback(
      (r) => {
        r.observe(ratio, loads / 4, { cache: 'users' });
        r.observe(requests, 4, { cache: 'users' });
      },
      [ratio, requests],
    );
    assert.deepEqual(provider.collect(), [
      { instrument: 'damper.cache.origin_amplification', value: 0.25, attributes: { cache: 'users' } },
      { instrument: 'damper.cache.requests', value: 4, attributes: { cache: 'users' } },
    ]);
    loads = 3;
    assert.equal(provider.collect()[0]?.value, 0.75, 'each collection observes anew');
  });

  test('collecting under forbidRealTime reads no real time: the ban records no offence', () => {
    const provider = new VirtualMeterProvider();
    const meter = provider.getMeter('damper');
    const gauge = meter.createObservableGauge('g');
    meter.addBatchObservableCallback((r) => r.observe(gauge, 1), [gauge]);
    meter.createHistogram('h', { unit: 'ms', advice: { explicitBucketBoundaries: [1, 10] } }).record(5, { k: 'v' });
    const ban = forbidRealTime();
    try {
      assert.equal(provider.collect().length, 1);
    } finally {
      ban();
    }
    assert.equal(ban.violation, undefined);
  });

  test('the same name and version give the same meter; a removed callback is no longer run', () => {
    const provider = new VirtualMeterProvider();
    assert.equal(provider.getMeter('damper', '1'), provider.getMeter('damper', '1'));
    assert.notEqual(provider.getMeter('damper', '1'), provider.getMeter('damper', '2'));
    const meter = provider.getMeter('damper', '1');
    const a = meter.createObservableGauge('a');
    const b = meter.createObservableUpDownCounter('b');
    const first: BatchObservableCallback = (r) => r.observe(a, 1);
    const second: BatchObservableCallback = (r) => r.observe(b, 2);
    meter.addBatchObservableCallback(first, [a]);
    meter.addBatchObservableCallback(second, [b]);
    assert.equal(provider.callbacks, 2);
    meter.removeBatchObservableCallback(first, [a]);
    assert.equal(provider.callbacks, 1);
    assert.deepEqual(provider.collect(), [{ instrument: 'b', value: 2, attributes: {} }]);
    meter.removeBatchObservableCallback(second, [a]);
    assert.equal(provider.callbacks, 1, 'a registration is the callback with its observables');
  });

  test('an observation of an instrument not registered with the callback, or a callback that returns a promise, is an error', () => {
    const provider = new VirtualMeterProvider();
    const meter = provider.getMeter('damper');
    const mine = meter.createObservableGauge('mine');
    const other = meter.createObservableGauge('other');
    meter.addBatchObservableCallback((r) => r.observe(other, 1), [mine]);
    assert.throws(() => provider.collect(), /observed other, which it was not registered for/);

    const async = new VirtualMeterProvider();
    const m = async.getMeter('damper');
    const g = m.createObservableGauge('g');
    m.addBatchObservableCallback(async (r) => r.observe(g, 1), [g]);
    assert.throws(() => async.collect(), /returned a promise; collections are synchronous/);
  });

  test('the synchronous instruments damper/otel does not use throw, naming themselves', () => {
    const meter = new VirtualMeterProvider().getMeter('damper');
    assert.throws(() => meter.createCounter('c'), /createCounter\(c\) is not supported/);
    assert.throws(() => meter.createUpDownCounter('u'), /createUpDownCounter\(u\) is not supported/);
    assert.throws(() => meter.createGauge('g'), /createGauge\(g\) is not supported/);
    assert.throws(() => meter.createObservableGauge('o').addCallback(() => {}), /use meter.addBatchObservableCallback/);
  });
});
