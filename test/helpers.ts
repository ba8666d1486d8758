import { type VirtualClock } from '../src/time/virtual.js';
import type { StandardSchemaV1 } from '@standard-schema/spec';
/** A promise with its resolve and reject exposed, for loaders the test settles by hand. */
export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Records the settlement of a promise without awaiting it, so a test can check "not yet settled". */
export function track<T>(p: Promise<T>): { settled: boolean; value?: T; error?: unknown } {
  const state: { settled: boolean; value?: T; error?: unknown } = { settled: false };
  p.then(
    (value) => {
      state.settled = true;
      state.value = value;
    },
    (error: unknown) => {
      state.settled = true;
      state.error = error;
    },
  );
  return state;
}

/** A Standard Schema validator (the async kind) whose verdict never comes for the values `hangs` picks. */
export function hangingSchema<V>(hangs: (value: unknown) => boolean): StandardSchemaV1<V, V> {
  return { '~standard': { version: 1, vendor: 'test', validate: (value) => (hangs(value) ? new Promise(() => {}) : { value: value as V }) } };
}

/** Runs `clock` until nothing is left to do, and says how `p` ended: for calls whose every step is on the virtual clock. */
export async function settleOn<T>(clock: VirtualClock, p: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  const out: { value?: T; error?: unknown } = {};
  p.then(
    (value) => void (out.value = value),
    (error: unknown) => void (out.error = error),
  );
  await clock.runUntilIdle();
  return out;
}
