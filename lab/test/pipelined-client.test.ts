import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { VirtualClock } from 'damper';
import { type BackendUnderTest, sharedBackendContract } from 'damper/testing';
import { CacheCluster, CacheNodeError } from '../src/lab/world/cache-nodes.js';
import { IOREDIS_GIVE_UP_MS, PipelinedClient } from '../src/lab/world/pipelined-client.js';

// A server's client to the cache nodes as ioredis keeps it: one pipelined
// connection per node, its replies in the order sent. A real run's ring of
// redis-servers behaves so (node-pacer.ts); discord-2019 on real processes
// showed what the simulation missed without it.

/** Runs `p` to its end in virtual time. */
async function settle<T>(clock: VirtualClock, p: Promise<T>): Promise<T> {
  let done = false;
  const out = p.finally(() => (done = true));
  for (let i = 0; i < 100_000 && !done; i++) await clock.advance(1);
  return out;
}

/** Two keys on different nodes of `c`. */
function keysOnTwoNodes(c: CacheCluster): readonly [string, string] {
  const first = 'k:0';
  for (let i = 1; ; i++) if (c.ring.nodeOf(`k:${i}`) !== c.ring.nodeOf(first)) return [first, `k:${i}`];
}

describe('replies in the order sent, per node', () => {
  test('a full queue’s refusal waits for the answers to the connection’s earlier calls to that node', async () => {
    const clock = new VirtualClock({ seed: 1 });
    // 10 calls/s and room for 2 waiting: the third and fourth calls are refused by the node at once.
    const c = new CacheCluster(clock, 1, { capacityOps: 10, latencyMs: 0, maxQueue: 2 });
    const client = new PipelinedClient(c);
    const t0 = clock.now();
    const ended: { readonly i: number; readonly at: number; readonly how: string }[] = [];
    const calls = Array.from({ length: 4 }, (_, i) =>
      client.read('k').then(
        () => void ended.push({ i, at: clock.now() - t0, how: 'answered' }),
        (e: unknown) => void ended.push({ i, at: clock.now() - t0, how: e instanceof CacheNodeError ? 'refused' : String(e) }),
      ),
    );
    await settle(clock, Promise.all(calls));
    assert.deepEqual(
      ended.map((e) => [e.i, e.how]),
      [
        [0, 'answered'],
        [1, 'answered'],
        [2, 'refused'],
        [3, 'refused'],
      ],
      'the replies come in the order the calls were sent',
    );
    // The node refused the third at once; its refusal reached the client only with the second's answer, a tenth of a second on.
    assert.ok(ended[2]!.at >= ended[1]!.at && ended[2]!.at >= 99, `the refusal came at ${ended[2]!.at} ms`);
    // Straight to the cluster (a connection per call), the same refusal comes at once, before any earlier answer.
    const direct = Array.from({ length: 3 }, () => c.read('k').catch(() => 'refused'));
    const t1 = clock.now();
    await assert.rejects(c.read('k'), CacheNodeError);
    assert.equal(clock.now(), t1);
    await settle(clock, Promise.all(direct));
  });

  test('another node’s replies do not wait: one connection per node', async () => {
    const clock = new VirtualClock({ seed: 1 });
    const c = new CacheCluster(clock, 2, { capacityOps: 1000, latencyMs: 1, maxQueue: 100 });
    const client = new PipelinedClient(c);
    const [slow, fast] = keysOnTwoNodes(c);
    c.nodeOf(slow)!.hang();
    const stuck = client.read(slow);
    const t0 = clock.now();
    await settle(clock, client.read(fast));
    assert.ok(clock.now() - t0 <= 5, `a healthy node answered in ${clock.now() - t0} ms beside a hung one`);
    assert.equal(client.owed(c.ring.nodeOf(slow)), 1);
    c.nodeOf(slow)!.resume();
    await settle(clock, stuck);
    assert.equal(client.owed(c.ring.nodeOf(slow)), 0);
  });

  test('an ejected node fails the calls its connection owed when ioredis gives up reconnecting, 10.5 s later, not at once', async () => {
    // Measured against ioredis 5 at its defaults: 20 reconnections turned away, 10,533–10,641 ms; bentocache's L2, which sets no timeout, waits that long on real processes.
    const clock = new VirtualClock({ seed: 1 });
    const c = new CacheCluster(clock, 2, { capacityOps: 1, latencyMs: 0, maxQueue: 100 });
    const client = new PipelinedClient(c);
    const [key] = keysOnTwoNodes(c);
    const node = c.ring.nodeOf(key);
    const outcomes: string[] = [];
    const owed = Array.from({ length: 5 }, () => client.read(key).then(() => outcomes.push('answered'), () => outcomes.push('failed')));
    await clock.advance(10);
    c.eject(node);
    await clock.advance(IOREDIS_GIVE_UP_MS - 1);
    assert.deepEqual(outcomes, ['answered'], 'held while ioredis reconnects');
    await settle(clock, Promise.all(owed));
    assert.deepEqual(outcomes, ['answered', 'failed', 'failed', 'failed', 'failed']);
    assert.equal(clock.now(), 10 + IOREDIS_GIVE_UP_MS);
    assert.equal(client.owed(node), 0);
    // The key's calls go to its new node meanwhile, and are answered.
    assert.notEqual(c.ring.nodeOf(key), node);
  });
});

// Ordering changes when a reply arrives, never what a call does.
describe('the shared-backend contract, through pipelined connections', () => {
  sharedBackendContract(test, async (): Promise<BackendUnderTest> => {
    const clock = new VirtualClock({ seed: 1 });
    const c = new CacheCluster(clock, 3, { capacityOps: 1000, latencyMs: 1, maxQueue: 100 });
    const stores = [new PipelinedClient(c), new PipelinedClient(c)] as const;
    return { stores, pass: (ms) => clock.advance(ms), settle: (call) => settle(clock, call), close: async () => {} };
  });
});
