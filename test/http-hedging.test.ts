import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { RetryBudget } from '../src/index.js';
import { damperInterceptor, HttpDependency, type HttpDependencyOptions } from '../src/http/index.js';
import { FaultProxy } from './support/fault-proxy.js';

// Budgeted hedging through damper/http on real servers (issue 27, item 4):
// two upstreams, one of them slowed by 300 ms through the fault proxy. A
// hedge sent after 40 ms to the other upstream cuts the tail that the slow
// one makes; the slow attempt is cancelled.

const children: ChildProcess[] = [];
const closers: (() => Promise<unknown>)[] = [];

after(async () => {
  for (const c of children) c.kill('SIGKILL');
  for (const close of closers.splice(0)) await close().catch(() => {});
});

async function upstream(name: string): Promise<number> {
  const child = fork(fileURLToPath(new URL('./support/http-upstream.js', import.meta.url)), ['ok', name], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.push(child);
  return new Promise<number>((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve(m.port));
    child.once('exit', (code) => reject(new Error(`upstream ${name} exited with ${code}`)));
  });
}

/** 40 GETs, four at a time, through a dependency made of `options`: each one's time, ms, sorted. */
async function times(options: HttpDependencyOptions): Promise<{ sorted: number[]; dependency: HttpDependency }> {
  const dependency = new HttpDependency(options);
  const base = new Agent({ keepAliveTimeout: 10_000 });
  closers.push(async () => {
    dependency.close();
    await base.destroy();
  });
  const agent = base.compose(damperInterceptor(dependency));
  const out: number[] = [];
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let i = 0; i < 10; i++) {
        const start = performance.now();
        const r = await request('http://service.test/x', { dispatcher: agent });
        await r.body.text();
        assert.equal(r.statusCode, 200);
        out.push(performance.now() - start);
      }
    }),
  );
  return { sorted: out.sort((a, b) => a - b), dependency };
}

const p99 = (sorted: readonly number[]): number => sorted[Math.min(sorted.length - 1, Math.ceil(0.99 * sorted.length) - 1)]!;

describe('a hedge cuts the tail one slow upstream makes, within the retry budget', () => {
  test('one upstream 300 ms slower: without hedging p99 is the slow one; hedged after 40 ms, the other answers', { timeout: 60_000 }, async (t) => {
    const [fast, slow] = await Promise.all([upstream('fast'), upstream('slow')]);
    const proxy = await FaultProxy.start({ port: slow });
    closers.push(() => proxy.close());
    proxy.set('replies', { latencyMs: 300 });
    const upstreams = [`http://127.0.0.1:${fast}`, `http://127.0.0.1:${proxy.port}`];
    // Neither breaker nor throttle nor ejection: a slow upstream answers, and only the hedge is under test.
    const common = { upstreams, breaker: false, throttle: false, balancer: { outliers: { consecutiveErrors: 0, successRate: false } }, retry: { maxAttempts: 1 } } as const;
    const plain = await times(common);
    const hedged = await times({ ...common, hedge: { after: 40 }, budget: new RetryBudget({ ratio: 1, minPerSecond: 100 }) });
    const h = hedged.dependency.stats().hedges!;
    t.diagnostic(`p99 ${p99(plain.sorted).toFixed(0)} ms without hedging, ${p99(hedged.sorted).toFixed(0)} ms hedged (${h.sent} hedges, ${h.won} won)`);
    assert.ok(p99(plain.sorted) >= 300, `without hedging, p99 ${p99(plain.sorted).toFixed(0)} ms: the slow upstream's 300 ms`);
    assert.ok(p99(hedged.sorted) < 250, `hedged, p99 ${p99(hedged.sorted).toFixed(0)} ms (${h.sent} hedges, ${h.won} won)`);
    assert.ok(h.sent > 0 && h.won > 0, JSON.stringify(h));
    assert.equal(h.won, h.sent, 'every hedge went to the fast upstream, and answered first');
  });
});
