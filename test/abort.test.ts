import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { describe, test } from 'node:test';
import { abortOwned, NEVER_ABORTS, onAbort, ownedSignal } from '../src/guard/abort.js';

describe('onAbort: a signal shared by many calls carries one listener at most', () => {
  test('one listener however many subscribe, none once the last unsubscribes', () => {
    const controller = new AbortController();
    const offs = Array.from({ length: 100 }, () => onAbort(controller.signal, () => {}));
    assert.equal(getEventListeners(controller.signal, 'abort').length, 1);
    for (const off of offs) off();
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
  });

  test('each callback runs once, in subscription order; an unsubscribed one never', () => {
    const controller = new AbortController();
    const ran: string[] = [];
    onAbort(controller.signal, () => ran.push('a'));
    const offB = onAbort(controller.signal, () => ran.push('b'));
    onAbort(controller.signal, () => ran.push('c'));
    offB();
    controller.abort();
    controller.abort();
    assert.deepEqual(ran, ['a', 'c']);
  });
});

describe('onAbort on the signal of a call that cannot be abandoned: nothing to watch', () => {
  test('no listener, and unsubscribing is harmless: a call with a deadline but no signal of its own paid an add and a remove each', () => {
    const offs = Array.from({ length: 3 }, () => onAbort(NEVER_ABORTS, () => assert.fail('never called')));
    assert.equal(getEventListeners(NEVER_ABORTS, 'abort').length, 0);
    for (const off of offs) off();
    assert.throws(() => onAbort(NEVER_ABORTS, 'nope' as unknown as () => void), /callback must be a function/);
  });
});

describe('onAbort on a signal damper aborts itself: no listener, same rules', () => {
  test('no listener is added; callbacks run after the listeners, in subscription order', () => {
    const controller = new AbortController();
    const signal = ownedSignal(controller);
    const ran: string[] = [];
    signal.addEventListener('abort', () => ran.push('listener'));
    onAbort(signal, () => ran.push('a'));
    onAbort(signal, () => ran.push('b'));
    assert.equal(getEventListeners(signal, 'abort').length, 1);
    abortOwned(controller, new Error('gone'));
    abortOwned(controller, new Error('again'));
    assert.deepEqual(ran, ['listener', 'a', 'b']);
  });

  test('one subscriber, then more: unsubscribing works whichever way they are held', () => {
    const controller = new AbortController();
    const signal = ownedSignal(controller);
    const ran: string[] = [];
    const offA = onAbort(signal, () => ran.push('a'));
    offA();
    const offB = onAbort(signal, () => ran.push('b'));
    onAbort(signal, () => ran.push('c'));
    offB();
    onAbort(signal, () => ran.push('d'));
    offA();
    abortOwned(controller, new Error('gone'));
    assert.deepEqual(ran, ['c', 'd']);
  });

  test('a lone subscriber that unsubscribes is not called', () => {
    const controller = new AbortController();
    const signal = ownedSignal(controller);
    let ran = false;
    const off = onAbort(signal, () => (ran = true));
    off();
    abortOwned(controller, new Error('gone'));
    assert.equal(ran, false);
  });
});
