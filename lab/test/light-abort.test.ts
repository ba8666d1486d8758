import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { LightAbortController, useLightAbort } from '../src/lab/engine/light-abort.js';
import { loadScenarioSource } from '../src/lab/lab.js';
import { scenarioSource } from '../src/lab/scenario-source.js';
import { VARIANTS } from '../src/lab/judge/results.js';
import { type Scenario, worldOf } from '../src/lab/world/worlds.js';
import { judge } from '../src/lab/judge/verdict.js';

/**
 * The lab's light AbortController (engine/light-abort.ts) does what the
 * platform's does: proven here by doing the same things to both and
 * comparing what each showed, step by step, over any sequence of
 * listeners added and removed (some of which add or remove others while
 * the event runs), `onabort`, aborts with and without a reason, and
 * `AbortSignal.any` over mixes; and by the results of a run, which are
 * byte-identical with either.
 */

type Make = () => AbortController;
/** The platform's, taken before any swap. */
const Platform = globalThis.AbortController;
const platform: Make = () => new Platform();
const lightOne: Make = () => new LightAbortController() as unknown as AbortController;

type Op =
  | { readonly kind: 'add'; readonly which: number; readonly once: boolean; readonly object: boolean; readonly stopper: boolean }
  | { readonly kind: 'remove'; readonly which: number }
  | { readonly kind: 'onabort'; readonly which: number | null }
  | { readonly kind: 'stop' }
  | { readonly kind: 'abort'; readonly reason: 'none' | 'error' | 'value' }
  | { readonly kind: 'read' };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('add' as const), which: fc.nat(4), once: fc.boolean(), object: fc.boolean(), stopper: fc.boolean() }),
  fc.record({ kind: fc.constant('remove' as const), which: fc.nat(4) }),
  fc.record({ kind: fc.constant('onabort' as const), which: fc.option(fc.nat(4)) }),
  fc.constant({ kind: 'stop' as const }),
  fc.record({ kind: fc.constant('abort' as const), reason: fc.constantFrom('none' as const, 'error' as const, 'value' as const) }),
  fc.constant({ kind: 'read' as const }),
);

/** What a reader sees of a reason: its kind and words, not its identity. */
function shown(reason: unknown): string {
  if (reason instanceof DOMException) return `DOMException ${reason.name}: ${reason.message}`;
  if (reason instanceof Error) return `Error ${reason.message}`;
  return JSON.stringify(reason) ?? 'undefined';
}

/**
 * Plays `ops` on a controller of `make`, logging every observation.
 * Listener 0, when called, removes listener 1; listener 2 adds listener 3:
 * removal and addition during the event are part of the behaviour.
 */
function play(make: Make, ops: readonly Op[], list: 'as played' | 'never empty' = 'as played'): string[] {
  const log: string[] = [];
  const controller = make();
  const stopper = make();
  const { signal } = controller;
  // A listener no op removes, added first, which logs nothing.
  if (list === 'never empty') signal.addEventListener('abort', () => {});
  const listeners: ((event: Event) => void)[] = [];
  const objects: { handleEvent(event: Event): void }[] = [];
  for (let i = 0; i < 5; i++) {
    listeners.push(function (this: unknown, event: Event) {
      log.push(`listener ${i} (this is the signal: ${this === signal}, event ${event.type}, target is the signal: ${event.target === signal}, aborted ${signal.aborted})`);
      if (i === 0) signal.removeEventListener('abort', listeners[1]!);
      if (i === 2) signal.addEventListener('abort', listeners[3]!);
    });
    objects.push({ handleEvent: (event) => log.push(`object ${i} (${event.type})`) });
  }
  for (const o of ops) {
    switch (o.kind) {
      case 'add':
        signal.addEventListener('abort', o.object ? objects[o.which]! : listeners[o.which]!, { once: o.once, ...(o.stopper ? { signal: stopper.signal } : {}) });
        break;
      case 'remove':
        signal.removeEventListener('abort', listeners[o.which]!);
        signal.removeEventListener('abort', objects[o.which]!);
        break;
      case 'onabort':
        signal.onabort = o.which === null ? null : (event) => log.push(`onabort ${o.which} (${event.type})`);
        break;
      case 'stop':
        stopper.abort();
        break;
      case 'abort':
        controller.abort(o.reason === 'none' ? undefined : o.reason === 'error' ? new Error('gone') : { why: 'value' });
        break;
      case 'read': {
        let thrown = 'nothing';
        try {
          signal.throwIfAborted();
        } catch (error) {
          thrown = shown(error);
        }
        log.push(`aborted ${signal.aborted}, reason ${shown(signal.reason)}, throwIfAborted threw ${thrown}, onabort set ${signal.onabort !== null}`);
        break;
      }
    }
    log.push(`after ${o.kind}`);
  }
  log.push(`instanceof AbortSignal ${signal instanceof AbortSignal}, ${Object.prototype.toString.call(signal)}`);
  return log;
}

describe('light AbortController', () => {
  test('property: any sequence of listeners, removals, onabort and aborts shows the same as the platform’s', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 30 }), (ops) => {
        // Node's EventTarget drops a type's whole list when its count of
        // listeners reaches zero, the `onabort` handler's place included,
        // while the handler still counts as placed: once `onabort` was set
        // and then null, the last listener's removal makes a later `onabort`
        // silent on Node 24 and a TypeError on Node 20 ("reading 'size'").
        // Where the platform does that, the light signal is held to what it
        // does when its list never empties (a silent listener added first):
        // the library never sets `onabort`, and a lost handler is no
        // behaviour to copy. CI found such a sequence on a drawn seed.
        const kept = play(platform, ops, 'never empty');
        let played: string[] | undefined;
        try {
          played = play(platform, ops);
        } catch (error) {
          assert.ok(error instanceof TypeError && process.versions.node.startsWith('20.'), `the platform threw ${String(error)}`);
        }
        const lost = played === undefined || !isDeepStrictEqual(played, kept);
        assert.deepEqual(play(lightOne, ops), lost ? kept : played, lost ? 'against the platform whose list never empties' : 'against the platform');
      }),
      {
        numRuns: 3000,
        // The sequence CI found (Node 20, 2026-12-05): Node loses the handler set at the end.
        examples: [
          [
            [
              { kind: 'add', which: 0, once: false, object: false, stopper: true },
              { kind: 'onabort', which: 0 },
              { kind: 'onabort', which: null },
              { kind: 'stop' },
              { kind: 'add', which: 0, once: false, object: false, stopper: false },
              { kind: 'onabort', which: 0 },
              { kind: 'abort', reason: 'none' },
            ],
          ],
        ],
      },
    );
  });

  test('a write to aborted or reason changes nothing, as on the platform’s', () => {
    for (const make of [platform, lightOne]) {
      const { signal } = make();
      assert.throws(() => {
        (signal as { aborted: boolean }).aborted = true;
      }, TypeError);
      assert.equal(signal.aborted, false);
    }
  });

  test('AbortSignal.any over light and platform signals, while swapped in', () => {
    const restore = useLightAbort();
    try {
      assert.notEqual(globalThis.AbortController, undefined);
      const a = new AbortController();
      assert.ok(a instanceof LightAbortController, 'the swap is in place');
      const b = new Platform();
      const either = AbortSignal.any([a.signal, b.signal]);
      const seen: unknown[] = [];
      either.addEventListener('abort', () => seen.push(either.reason));
      b.abort('second');
      a.abort('first');
      assert.deepEqual(seen, ['second'], 'the first to abort gives the reason, once');
      const already = AbortSignal.any([new AbortController().signal, AbortSignal.abort('done')]);
      assert.equal(already.aborted, true);
      assert.equal(already.reason, 'done');
    } finally {
      restore();
    }
    assert.ok(!(new AbortController() instanceof LightAbortController), 'restored after');
    const platformAny = AbortSignal.any([new AbortController().signal]);
    assert.equal(platformAny.aborted, false, 'the platform’s any again');
  });

  test('a run gives byte-identical results with light signals and with the platform’s', async () => {
    // retry-storm cut short: both variants, its retries and attempt timeouts, trigger and recovery.
    const shipped = await loadScenarioSource('retry-storm');
    const doc = shipped.doc as { durationS: number };
    const scenario = scenarioSource(JSON.stringify({ ...doc, durationS: 200 }), shipped.where, shipped.path).scenario as Scenario;
    const withSignals = async (signals: 'light' | 'platform'): Promise<string> => {
      const runs = [];
      for (const variant of VARIANTS) runs.push(judge(scenario, await worldOf(scenario).run(scenario, variant, 3, { signals })));
      return JSON.stringify(runs);
    };
    const light = await withSignals('light');
    assert.ok(light.includes('"recovered"'), 'judged runs');
    assert.equal(light, await withSignals('platform'));
  });
});
