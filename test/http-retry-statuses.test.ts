import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { BreakerOpenError, RetryBudget } from '../src/index.js';
import { damperFetch } from '../src/http/index.js';

// `retryStatuses` is one list with one meaning: a status in it is the
// upstream failing the request, so it is retried and counted against the
// upstream alike, by its breaker and by the balancer. Before, a 408 added to
// the list was retried yet counted as a success (issue 27, item 3).

describe('a status in retryStatuses is retried and counted against its upstream alike', () => {
  let server: Server;
  let origin: string;
  let hits = 0;
  before(async () => {
    // In process: the test is about what the client counts, not about a fault.
    server = createServer((req, res) => {
      hits++;
      res.statusCode = Number(req.url?.slice(1)) || 200;
      res.end('answer');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  /** The upstream's breaker: its state and its failures in a row. */
  function breakerOf(fetch: ReturnType<typeof damperFetch>): [string | undefined, number | undefined] {
    const breaker = fetch.dependency.stats().upstreams[0]?.breaker;
    return [breaker?.state, breaker?.consecutiveFailures];
  }

  /** A client of one upstream whose breaker opens after three failed requests and then refuses; two attempts per request, a budget that never runs out. */
  function client(retryStatuses?: number[]): ReturnType<typeof damperFetch> {
    return damperFetch({
      upstreams: [origin],
      ...(retryStatuses === undefined ? {} : { retryStatuses }),
      breaker: { consecutiveFailures: 3, openFor: 60_000 },
      // The breaker of the only upstream refuses while open (the default would send past it, through the throttle).
      breakerReach: 'unbounded',
      throttle: false,
      budget: new RetryBudget({ ratio: 1, minPerSecond: 1_000 }),
      retry: { maxAttempts: 2, baseDelay: 1, maxDelay: 2 },
    });
  }

  test('a 408 listed: each request tries twice, the breaker counts each 408, and once open it refuses the next request unsent (a refused retry leaves the 408 as the answer)', async () => {
    const fetch = client([408, 500, 502, 503, 504, 429]);
    const refusedByBreaker = (error: unknown): boolean => error instanceof Error && error.cause instanceof BreakerOpenError;
    try {
      hits = 0;
      const first = await fetch(`${origin}/408`);
      assert.equal(first.status, 408, 'the last failing answer reaches the caller');
      await first.text();
      assert.equal(hits, 2, 'retried');
      assert.deepEqual(breakerOf(fetch), ['closed', 2], 'both attempts counted against the upstream');
      // The third 408 opens the breaker; this request's retry is refused by it, so the 408 the upstream sent is the answer.
      const second = await fetch(`${origin}/408`);
      assert.equal(second.status, 408, 'the answer the upstream gave, not the local refusal of the retry');
      assert.equal(await second.text(), 'answer');
      assert.equal(hits, 3);
      assert.equal(breakerOf(fetch)[0], 'open');
      await assert.rejects(fetch(`${origin}/408`), refusedByBreaker);
      assert.equal(hits, 3, 'refused without a request sent');
    } finally {
      await fetch.close();
    }
  });

  test('a 408 not listed (the default list): an answer like any other, neither retried nor counted', async () => {
    const fetch = client();
    try {
      hits = 0;
      for (let i = 0; i < 5; i++) {
        const r = await fetch(`${origin}/408`);
        assert.equal(r.status, 408);
        await r.text();
      }
      assert.equal(hits, 5, 'never retried');
      assert.deepEqual(breakerOf(fetch), ['closed', 0]);
    } finally {
      await fetch.close();
    }
  });
});
