import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ClusterFlight, type LeaseStore, type Resolution, type ResolveRequest } from '../src/cache/cluster-flight.js';
import { HardTimeout } from '../src/cache/hard-timeout.js';
import { type Called } from '../src/cache/shared-tier.js';
import { CircuitBreaker, DeadlineExceededError, InMemorySharedStore, LeaseBackoffError, OverloadedError, SharedTierError, sleep, VirtualClock } from '../src/index.js';
import { decodeEnvelope, encodeEnvelope } from '../src/stores/envelope.js';
import { track } from './helpers.js';

// The lease protocol alone (src/cache/cluster-flight.ts): several ClusterFlight
// instances stand for several processes over one InMemorySharedStore, with a
// bus of the test's own (a fill or failure wakes the other processes at once).
// The whole shared tier around it is test/shared-tier.test.ts.

const STALE_FOR = 60_000;

/** Every lease a process was granted, and every token it gave back (filled, failed or released). */
interface LeaseLog {
  readonly granted: string[];
  readonly returned: string[];
}

interface Process {
  readonly flight: ClusterFlight;
  readonly log: LeaseLog;
}

interface World {
  readonly clock: VirtualClock;
  readonly store: InMemorySharedStore;
  readonly processes: Process[];
  /** Origin loads, all processes together. */
  loads: number;
}

async function called<T>(operation: string, p: Promise<T>): Promise<Called<T>> {
  try {
    return { ok: true, value: await p };
  } catch (error) {
    return { ok: false, error: new SharedTierError(operation, error) };
  }
}

/** A process's view of the store: what `SharedTier` hands its leases, without a breaker's opinions. */
function leaseStore(w: World, log: LeaseLog, shareable: boolean): LeaseStore {
  const returned = (token: string): string => (log.returned.push(token), token);
  return {
    async lookup(key, accept) {
      const read = await called('read', w.store.read(key));
      if (!read.ok) return { kind: 'unavailable', error: read.error };
      if (read.value === undefined) return { kind: 'none' };
      const decoded = decodeEnvelope(read.value.value, 1 << 20);
      if (!decoded.ok) return { kind: 'none' };
      const verdict = await accept(decoded.envelope.value);
      if (!verdict.ok) return { kind: 'none' };
      const { ttlMs } = read.value;
      const freshMs = ttlMs - decoded.envelope.staleFor;
      const found = { value: verdict.value, servableMs: ttlMs, loadMs: decoded.envelope.loadMs, tags: decoded.envelope.tags };
      return freshMs > 0 ? { kind: 'hit', freshMs, ...found } : { kind: 'stale', ...found };
    },
    async acquire(key, token, ttlMs) {
      const grant = await called('acquire', w.store.acquire(key, token, ttlMs));
      if (grant.ok && grant.value.granted) log.granted.push(token);
      return grant;
    },
    fill: (key, token, text, ttlMs) => called('fill', w.store.fill(key, returned(token), text, ttlMs)),
    fail: (key, token, failures, backoffMs) => called('fail', w.store.fail(key, returned(token), failures, backoffMs)),
    release: (key, token) => called('release', w.store.release(key, returned(token))),
    encode: (_key, value, freshMs, staleFor, loadMs) => (shareable ? { text: encodeEnvelope(value, staleFor, loadMs), ttlMs: freshMs + staleFor } : undefined),
    async announce(_kind, key) {
      for (const other of w.processes) if (other.log !== log) other.flight.wake(key);
    },
    breaker: new CircuitBreaker({ clock: w.clock }),
  };
}

function world(processes: number, shareable = true): World {
  const clock = new VirtualClock({ seed: 3 });
  const w: World = { clock, store: new InMemorySharedStore({ clock, latencyMs: 1 }), processes: [], loads: 0 };
  for (let i = 0; i < processes; i++) {
    const log: LeaseLog = { granted: [], returned: [] };
    w.processes.push({ flight: new ClusterFlight(leaseStore(w, log, shareable), clock, { id: `p${i}`, leasePoll: 200, leaseMargin: 1_000 }), log });
  }
  return w;
}

/** A load of `ms` virtual ms that yields `value` (or throws it, when it is an Error), counted. */
function loader(w: World, ms: number, value: string | Error = 'v:fresh'): () => Promise<string> {
  return async () => {
    w.loads++;
    await sleep(w.clock, ms);
    if (value instanceof Error) throw value;
    return value;
  };
}

function request(w: World, load: () => Promise<string>, over: Partial<ResolveRequest<string>> = {}): ResolveRequest<string> {
  const loadTimeout = 10_000;
  return {
    key: 'k',
    hard: new HardTimeout(w.clock, 'k', loadTimeout),
    servable: false,
    early: false,
    failures: 0,
    deadline: w.clock.now() + loadTimeout,
    staleFor: STALE_FOR,
    freshFor: () => 10_000,
    backoff: (failures) => 1_000 * 2 ** failures,
    accept: (value) => ({ ok: true, value: value as string }),
    load,
    tags: () => undefined,
    ...over,
  };
}

/** Runs virtual time for `ms` and answers what `p` settled with by then (the store answers on the clock). */
async function within<T>(w: World, ms: number, p: Promise<T>): Promise<T> {
  const t = track(p);
  await w.clock.advance(ms);
  assert.ok(t.settled, `settled within ${ms} virtual ms`);
  return p;
}

/** Resolves `requests` (one per process, in order) at once and runs virtual time until all are answered. */
async function resolveAll(w: World, requests: ResolveRequest<string>[]): Promise<Resolution<string>[]> {
  const answers = await within(w, 100, Promise.all(requests.map((r, i) => w.processes[i]!.flight.resolve(r))));
  for (const r of requests) r.hard.cancel();
  return answers;
}

/** The invariant, seen from the store: every lease granted is given back once, by its own token; none is left to expire. */
function assertLeasesGivenBack(w: World): void {
  for (const { log } of w.processes) {
    assert.deepEqual([...log.returned].sort(), [...log.granted].sort());
  }
}

describe('one load per key in flight (principle 2, across the cluster)', () => {
  test('four processes resolve one cold key at once: one load; the others are woken by its fill, not by their poll', async () => {
    const w = world(4);
    // The holder fills at ~45 ms; a waiter's own poll would look next at ~80 ms.
    const answers = await within(w, 60, Promise.all(w.processes.map((p) => p.flight.resolve(request(w, loader(w, 40))))));
    assert.equal(w.loads, 1);
    assert.deepEqual(answers.map((a) => a.kind).sort(), ['hit', 'hit', 'hit', 'loaded']);
    assert.ok(answers.every((a) => (a.kind === 'hit' || a.kind === 'loaded') && a.value === 'v:fresh'));
    assert.ok(w.processes.reduce((n, p) => n + p.flight.leaseWaits, 0) >= 3);
    assertLeasesGivenBack(w);
  });

  test('a holder that finds the value on its second look loads nothing and gives the lease back at once', async () => {
    const w = world(2);
    await within(w, 10, w.store.write('k', encodeEnvelope('v:filled', STALE_FOR, 3), 10_000 + STALE_FOR));
    // The first read came before that fill: the cache hands it over as "none".
    const answer = await within(w, 100, w.processes[0]!.flight.resolve(request(w, loader(w, 40)), { kind: 'none' }));
    assert.equal(answer.kind, 'hit');
    assert.equal(w.loads, 0);
    assert.equal(w.store.calls.release, 1);
    assertLeasesGivenBack(w);
  });

  test('an early refresh of a fresh value holds the lease without looking again; one elsewhere is not doubled', async () => {
    const w = world(2);
    await within(w, 10, w.store.write('k', encodeEnvelope('v:old', STALE_FOR, 3), 10_000 + STALE_FOR));
    const [mine, theirs] = await resolveAll(w, [request(w, loader(w, 40), { early: true }), request(w, loader(w, 40), { early: true })]);
    assert.equal(w.loads, 1);
    assert.deepEqual([mine!.kind, theirs!.kind].sort(), ['hit', 'loaded']);
    assertLeasesGivenBack(w);
  });
});

describe('an error is not a value, across the cluster (principle 1)', () => {
  test('a failed load leaves a failure marker and the value: the other processes serve it stale, without a load', async () => {
    const w = world(2);
    // Stale in the store: 5 s left of its 60 s stale window.
    await within(w, 10, w.store.write('k', encodeEnvelope('v:last-good', STALE_FOR, 3), 5_000));
    const [failed] = await resolveAll(w, [request(w, loader(w, 40, new Error('origin down')))]);
    assert.equal(failed!.kind, 'failed');
    assert.equal(w.store.calls.fail, 1);
    const stale = await within(w, 10, w.processes[1]!.flight.resolve(request(w, loader(w, 40))));
    assert.equal(w.loads, 1);
    assert.ok(stale.kind === 'stale' && stale.value === 'v:last-good');
    assertLeasesGivenBack(w);
  });

  test('a key whose load failed elsewhere is a LeaseBackoffError here for a caller with nothing to serve, with no load', async () => {
    const w = world(2);
    await resolveAll(w, [request(w, loader(w, 40, new Error('origin down')))]);
    const answer = await within(w, 10, w.processes[1]!.flight.resolve(request(w, loader(w, 40))));
    assert.equal(answer.kind, 'failed');
    assert.ok(answer.kind === 'failed' && answer.error instanceof LeaseBackoffError);
    assert.equal(w.loads, 1);
    assertLeasesGivenBack(w);
  });

  test("a load refused by the holder's own origin budget leaves no marker: the lease goes back for another process", async () => {
    const w = world(2);
    const [refused] = await resolveAll(w, [request(w, loader(w, 0, new OverloadedError('budget full')))]);
    assert.equal(refused!.kind, 'failed');
    assert.equal(w.store.calls.fail, 0);
    const answer = await within(w, 100, w.processes[1]!.flight.resolve(request(w, loader(w, 40))));
    assert.equal(answer.kind, 'loaded');
    assertLeasesGivenBack(w);
  });

  test("a load whose deadline passed in the holder's origin budget's queue leaves no marker either; one that passed during the load does", async () => {
    const w = world(2);
    const queued = new DeadlineExceededError('deadline for "k" passed while it waited for a token', 'admission');
    const [refused] = await resolveAll(w, [request(w, loader(w, 0, queued))]);
    assert.equal(refused!.kind, 'failed');
    assert.equal(w.store.calls.fail, 0, 'the budget refused it: nothing is held against the key');
    await resolveAll(w, [request(w, loader(w, 0, new DeadlineExceededError('call for key "k" passed its deadline')))]);
    assert.equal(w.store.calls.fail, 1, 'the origin did not answer in time: the key backs off');
    assertLeasesGivenBack(w);
  });

  test('a value that cannot be shared frees its lease for the next process', async () => {
    const w = world(2, false);
    const [first] = await resolveAll(w, [request(w, loader(w, 40))]);
    assert.equal(first!.kind, 'loaded');
    assert.equal(w.store.calls.release, 1);
    assert.equal(w.store.calls.fill, 0);
    assertLeasesGivenBack(w);
  });
});

describe('degrade, do not redirect: no lease, no load for a key that can be served (principle 4)', () => {
  test('the store unavailable: a process with a value defers; one with nothing loads once, here', async () => {
    const w = world(2);
    w.store.outage = 'error';
    const [deferred, loaded] = await resolveAll(w, [request(w, loader(w, 40), { servable: true }), request(w, loader(w, 40))]);
    assert.equal(deferred!.kind, 'deferred');
    assert.ok(deferred!.kind === 'deferred' && deferred!.error instanceof SharedTierError && deferred!.retryInMs > 0);
    assert.equal(loaded!.kind, 'loaded');
    assert.equal(w.loads, 1);
    assertLeasesGivenBack(w);
  });

  test('granted, then the store stops answering: no load; the lease it could not give back is given back at its next look, not left to its ttl', async () => {
    const w = world(2);
    // Process 0's store falls silent (refuses) right after granting it the lease.
    const log: LeaseLog = { granted: [], returned: [] };
    const inner = leaseStore(w, log, true);
    const silentAfterGrant: LeaseStore = {
      ...inner,
      async acquire(key, token, ttlMs) {
        const grant = await inner.acquire(key, token, ttlMs);
        if (grant.ok && grant.value.granted) w.store.outage = 'error';
        return grant;
      },
    };
    const p0 = new ClusterFlight(silentAfterGrant, w.clock, { id: 'p0', leasePoll: 200, leaseMargin: 1_000 });
    const first = request(w, loader(w, 40), { servable: true });
    const answer = await within(w, 100, p0.resolve(first));
    first.hard.cancel();
    assert.equal(answer.kind, 'deferred', 'a process with a value serves it and loads nothing');
    assert.equal(w.loads, 0);
    assert.equal(log.returned.length, 1, 'it tried to give the lease back');

    // The store answers again. Without the give-back, process 1 (nothing to serve) would wait out the lease's ttl (11 s).
    w.store.outage = 'none';
    const again = request(w, loader(w, 40), { servable: true });
    const waiting = request(w, loader(w, 40));
    const [, loaded] = await within(w, 1_000, Promise.all([p0.resolve(again), w.processes[1]!.flight.resolve(waiting)]));
    again.hard.cancel();
    waiting.hard.cancel();
    assert.equal(loaded!.kind, 'loaded', 'the other process got the lease within a second, and loaded');
    assert.equal(w.loads, 1);
    assert.equal(log.returned.filter((t) => t === log.granted[0]).length, 2, 'the owed lease was given back again, by its own token');
  });
});
