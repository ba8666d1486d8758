import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { HeaderError, MAX_TIMER_MS } from '../src/index.js';
import { headerValue, readPriority, readRemainingMs, readRetryAfterMs, withHeaders, writePriority, writeRemainingMs } from '../src/http/headers.js';

// The headers damper reads off the wire are untrusted bytes (issue 17): each
// is a number or a word damper can use, or a HeaderError; never a NaN, a
// negative wait, or a value coerced from something else.

describe('the deadline header: the time left, ms', () => {
  test('digits are read; absent is no deadline; the value is capped at the longest timer', () => {
    assert.equal(readRemainingMs('d', '250'), 250);
    assert.equal(readRemainingMs('d', ' 0 '), 0);
    assert.equal(readRemainingMs('d', undefined), undefined);
    assert.equal(readRemainingMs('d', '9999999999'), MAX_TIMER_MS);
    assert.equal(readRemainingMs('d', ['40']), 40);
  });

  test('anything else is a HeaderError naming the header', () => {
    for (const bad of ['', '1e3', '-5', '0x10', '1.5', '12345678901', ' ', '١٢']) {
      assert.throws(() => readRemainingMs('x-damper-deadline-ms', bad), (e: unknown) => e instanceof HeaderError && e.header === 'x-damper-deadline-ms', JSON.stringify(bad));
    }
    assert.throws(() => readRemainingMs('d', ['1', '2']), HeaderError, 'sent twice: which one?');
  });

  test('property: any string is a whole number of ms within the timer range, or a HeaderError', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 24 }), (text) => {
        try {
          const ms = readRemainingMs('d', text);
          return ms !== undefined && Number.isInteger(ms) && ms >= 0 && ms <= MAX_TIMER_MS && /^\s*\d+\s*$/.test(text);
        } catch (error) {
          return error instanceof HeaderError;
        }
      }),
    );
  });

  test('written as a whole number, never negative', () => {
    assert.equal(writeRemainingMs(12.9), '12');
    assert.equal(writeRemainingMs(-3), '0');
  });
});

describe('the priority header', () => {
  test('named levels in any case, and integers within ±1 000 000', () => {
    assert.equal(readPriority('p', 'LOW'), 'low');
    assert.equal(readPriority('p', 'critical'), 'critical');
    assert.equal(readPriority('p', '-20'), -20);
    assert.equal(readPriority('p', '1000000'), 1_000_000);
    assert.equal(readPriority('p', undefined), undefined);
    for (const bad of ['urgent', '1000001', '1.5', '', 'constructor', '--1']) assert.throws(() => readPriority('p', bad), HeaderError, bad);
    assert.equal(writePriority(readPriority('p', '-7')!), '-7');
  });
});

describe('Retry-After', () => {
  test("delta-seconds, or an HTTP-date read against the response's own Date: no skew between the machines enters it", () => {
    assert.equal(readRetryAfterMs('2', undefined), 2000);
    const date = 'Tue, 01 Dec 2026 20:00:00 GMT';
    assert.equal(readRetryAfterMs('Tue, 01 Dec 2026 20:00:05 GMT', date), 5000);
    assert.equal(readRetryAfterMs('Tue, 01 Dec 2026 19:59:00 GMT', date), 0, 'a date in the past is no wait, never a negative one');
    assert.equal(readRetryAfterMs('Tue, 01 Dec 2026 20:00:05 GMT', undefined), undefined, 'a date with nothing to read it against is no hint');
    for (const bad of ['soon', '-1', '1.5', '']) assert.equal(readRetryAfterMs(bad, date), undefined, bad);
  });

  test('property: never negative, never NaN, never past the longest timer', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), fc.option(fc.string({ maxLength: 40 }), { nil: undefined }), (value, date) => {
        const ms = readRetryAfterMs(value, date);
        return ms === undefined || (Number.isFinite(ms) && ms >= 0 && ms <= MAX_TIMER_MS);
      }),
    );
  });
});

describe('writing headers over a request', () => {
  test('a header of the same name in any case is replaced, never sent twice, whatever shape the headers came in', () => {
    const set = [['x-damper-deadline-ms', '100']] as const;
    const shapes = [{ 'X-Damper-Deadline-Ms': '5', accept: 'a' }, ['X-DAMPER-DEADLINE-MS', '5', 'accept', 'a'], [['x-damper-deadline-ms', '5'], ['accept', 'a']], new Map([['accept', 'a']])];
    for (const headers of shapes) {
      const out = withHeaders(headers as Parameters<typeof withHeaders>[0], set);
      const names = out.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
      assert.equal(names.filter((n) => n === 'x-damper-deadline-ms').length, 1, JSON.stringify(out));
      assert.equal(headerValue(out, 'x-damper-deadline-ms'), '100');
      assert.equal(headerValue(out, 'accept'), 'a');
    }
    assert.deepEqual(withHeaders(null, set), ['x-damper-deadline-ms', '100']);
    assert.deepEqual(withHeaders({ a: ['1', '2'], b: undefined }, []), ['a', '1', 'a', '2']);
  });
});
