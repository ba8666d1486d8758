import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { alertStates, evaluateAlert } from '../src/lab/judge/alerts.js';

const rule = { above: 0.5, forMs: 3000 };

describe('alerts: a rule fires as Prometheus fires it, `gauge > above` held for `forMs`', () => {
  test('fires at the first sample forMs after the condition became true, and reports it still firing', () => {
    //                 0    1    2    3    4    5    6    7
    const values = [0.1, 0.2, 0.6, 0.7, 0.8, 0.9, 0.7, 0.6];
    assert.deepEqual(evaluateAlert(rule, values), { firstFiredSeconds: 5, firingAtEnd: true });
  });

  test('a dip to the threshold or below before forMs resets it: no fire', () => {
    const values = [0.6, 0.7, 0.8, 0.5, 0.9, 0.9, 0.9, 0.2];
    assert.deepEqual(evaluateAlert(rule, values), { firstFiredSeconds: null, firingAtEnd: false }, '0.5 is not above 0.5; the run from 4 s lasts 2 s only');
  });

  test('a missing sample resets it, as an absent series does', () => {
    assert.deepEqual(evaluateAlert(rule, [0.9, 0.9, null, 0.9, 0.9, 0.9, 0.9]), { firstFiredSeconds: 6, firingAtEnd: true });
  });

  test('it resolves when the condition ends, and the first firing time stays', () => {
    const values = [0.9, 0.9, 0.9, 0.9, 0.9, 0.1, 0.9, 0.9, 0.9, 0.9, 0.1];
    assert.deepEqual(evaluateAlert(rule, values), { firstFiredSeconds: 3, firingAtEnd: false });
  });

  test('forMs 0 fires at the first sample above; the sample step counts in ms', () => {
    assert.deepEqual(evaluateAlert({ above: 1, forMs: 0 }, [0, 0, 2]), { firstFiredSeconds: 2, firingAtEnd: true });
    assert.deepEqual(evaluateAlert({ above: 1, forMs: 1000 }, [2, 2, 2], 500), { firstFiredSeconds: 1, firingAtEnd: true }, 'samples at 0, 0.5 and 1 s');
  });
});

describe('alerts: each series is an instance of its own; a gauge the variant lacks is not reported', () => {
  const rules = [
    { alert: 'AmplificationHigh', metric: 'damper.cache.origin_amplification', above: 0.5, forMs: 2000 },
    { alert: 'ShedHigh', metric: 'damper.limiter.shed_ratio', above: 0.1, forMs: 0 },
  ];

  test('first fired when the earliest series did; firing at the end when any series is', () => {
    const states = alertStates(rules, {
      'damper.cache.origin_amplification': {
        'process=0': [0.9, 0.9, 0.9, 0.9, 0.1],
        'process=1': [0.1, 0.9, 0.9, 0.9, 0.9],
      },
    });
    assert.deepEqual(states, { AmplificationHigh: { firstFiredSeconds: 2, firingAtEnd: true } });
  });

  test('two series that take turns above the threshold never fire: Prometheus does not add them up', () => {
    const states = alertStates(rules, {
      'damper.cache.origin_amplification': {
        a: [0.9, 0.1, 0.9, 0.1, 0.9],
        b: [0.1, 0.9, 0.1, 0.9, 0.1],
      },
    });
    assert.deepEqual(states, { AmplificationHigh: { firstFiredSeconds: null, firingAtEnd: false } });
  });
});
