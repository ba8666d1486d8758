import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';

// examples/articles end to end, on loopback: two instances (SQLite through a
// damper Cache) behind a front with a damper Balancer. One instance is hung
// (SIGSTOP) during a load spike; then both restart cold and warm up.

interface Ready {
  port: number;
  pid?: number;
}

interface UpstreamSnap {
  id: string;
  state: string;
  ejections: number;
}
interface FrontSnap {
  panic: boolean;
  attemptTimeoutMs: number;
  upstreams: UpstreamSnap[];
  events: { at: number; event: string; id: string }[];
}
interface Stats {
  queries: number;
  warmQueries: number;
  liveQueries: number;
  hot: number;
  warmRate: number;
  startedAt: number;
  warm: { loaded: number; durationMs: number } | null;
}

const HOT = 50;
const WARM_RATE = 100;
const WARM_CONCURRENCY = 4; // examples/articles/instance.ts

function start(script: string, env: Record<string, string>, children: ChildProcess[]): Promise<{ child: ChildProcess; ready: Ready }> {
  const child = spawn(process.execPath, ['--import', 'tsx', `examples/articles/${script}`], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start in 15 s: ${stderr}`)), 15_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited with ${String(code)}: ${stderr}`));
    });
    createInterface({ input: child.stdout! }).once('line', (line) => {
      clearTimeout(timer);
      resolve({ child, ready: JSON.parse(line) as Ready });
    });
  });
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

async function json<T>(url: string): Promise<T> {
  const r = await fetch(url, { signal: AbortSignal.timeout(2_000) });
  return (await r.json()) as T;
}

/** A fixed number of requests at a fixed concurrency, ids skewed towards the hot ones (seeded); `latencies[n - 1]` is the n-th request sent's. */
async function load(base: string, total: number, concurrency: number, onSent?: (n: number) => void): Promise<{ ok: number; latencies: number[]; ids: Set<string>; statuses: Map<number, number> }> {
  let seed = 42;
  const rand = (): number => ((seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648);
  const latencies: number[] = [];
  const ids = new Set<string>();
  const statuses = new Map<number, number>();
  let sent = 0;
  let ok = 0;
  const worker = async (): Promise<void> => {
    while (sent < total) {
      const n = ++sent;
      onSent?.(n);
      const id = String(rand() < 0.9 ? 1 + Math.floor(rand() * HOT) : 1 + HOT + Math.floor(rand() * 150));
      ids.add(id);
      const t = performance.now();
      let status = 0;
      try {
        const r = await fetch(`${base}/articles/${id}`, { signal: AbortSignal.timeout(5_000) });
        await r.arrayBuffer();
        status = r.status;
      } catch {
        status = 0;
      }
      latencies[n - 1] = performance.now() - t;
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      if (status === 200) ok++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { ok, latencies, ids, statuses };
}

function p99(latencies: number[]): number {
  const sorted = [...latencies].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]!;
}

// No time limit of its own: every wait in it is bounded (start 15 s, warm-up 20 s, each request 5 s), and a
// whole-test limit measured the host (14 s to 44 s on one day). The runner's per-file limit catches a hang.
test('examples/articles: a hung instance is taken out of rotation, the other never; a cold restart stays within the warm-up budget', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'damper-articles-'));
  const children: ChildProcess[] = [];
  t.after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await Promise.all(children.map(exited));
    rmSync(dir, { recursive: true, force: true });
  });
  const instanceEnv = (name: string, port: number): Record<string, string> => ({
    NAME: name,
    PORT: String(port),
    DB: join(dir, 'articles.db'),
    HOT: Array.from({ length: HOT }, (_, i) => String(i + 1)).join(','),
    WARM_RATE: String(WARM_RATE),
  });

  // One after the other: the first creates and seeds the database file (and
  // switches it to WAL, which needs an exclusive lock); started together, the
  // second could find it locked.
  const a = await start('instance.ts', instanceEnv('a', 0), children);
  const b = await start('instance.ts', instanceEnv('b', 0), children);
  const urls = [a, b].map((x) => `http://127.0.0.1:${x.ready.port}`);
  const front = await start('front.ts', { UPSTREAMS: urls.join(','), PORT: '0' }, children);
  const base = `http://127.0.0.1:${front.ready.port}`;

  // The spike starts once both instances have warmed their hot ids: this part is about the hang; the cold
  // restart below is the cold-start test.
  for (const x of [a, b]) {
    const port = x.ready.port;
    const until = Date.now() + 20_000;
    while ((await json<Stats>(`http://127.0.0.1:${port}/admin/stats`)).warm === null) {
      assert.ok(Date.now() < until, `instance on port ${port} still warming after 20 s`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  // Spike through the front; instance a is hung (SIGSTOP) once a fifth of it is sent.
  const TOTAL = 3_000;
  let hungAt = 0;
  const spike = await load(base, TOTAL, 32, (n) => {
    if (n === TOTAL / 5) {
      a.child.kill('SIGSTOP');
      hungAt = Date.now();
    }
  });
  const successRate = spike.ok / TOTAL;
  // Latency is judged against the same spike's before the hang, on the same machine in the same minute, not
  // against a figure in ms: on a host twice as slow as usual the whole spike's p99 was 1.36 s (Node 20, a
  // clean run) with every request answered. After the hang one instance carries what two did, at the same
  // concurrency (a closed loop: twice the wait), and a request caught on the hung one pays one attempt
  // timeout before its retry goes to the other.
  // Before the hang, past the front's first requests (its connections opened, its code compiled: up to 1.6 s each on a busy host).
  const calmP99 = p99(spike.latencies.slice(TOTAL / 10, TOTAL / 5));
  const hungP99 = p99(spike.latencies.slice(TOTAL / 5));
  const snap = await json<FrontSnap>(`${base}/admin/upstreams`);
  const hungBound = 2 * calmP99 + snap.attemptTimeoutMs + 100;
  t.diagnostic(`spike: ${TOTAL} requests, concurrency 32, instance a hung after ${TOTAL / 5}: success ${(successRate * 100).toFixed(2)} %, p99 ${calmP99.toFixed(1)} ms before the hang, ${hungP99.toFixed(1)} ms after (bound ${hungBound.toFixed(0)}), statuses ${JSON.stringify([...spike.statuses])}`);

  const aSnap = snap.upstreams.find((u) => u.id === 'a')!;
  const bSnap = snap.upstreams.find((u) => u.id === 'b')!;
  // Out of rotation: ejected (errors) or failing its health checks. A hang gives no errors, only timeouts, which
  // the front does not count (slow is not dead), so the health checks take it out: two probes unanswered.
  const OUT = new Set(['eject', 'unhealthy']);
  const IN = new Set(['restore', 'healthy']);
  const aOutAt = snap.events.find((e) => e.id === 'a' && OUT.has(e.event) && e.at >= hungAt)?.at;
  // Or out already when it hung (its probes went unanswered on a machine this busy) and not back since.
  const before = snap.events.filter((e) => e.id === 'a' && e.at < hungAt && (OUT.has(e.event) || IN.has(e.event)));
  const outAtHang = OUT.has(before.at(-1)?.event ?? '');
  t.diagnostic(
    `front after the spike: a ${aSnap.state} (${aSnap.ejections} ejections), b ${bSnap.state} (${bSnap.ejections}); a out ${aOutAt === undefined ? 'never' : `${aOutAt - hungAt} ms`} after the hang; events from 1 s before the hang: ${JSON.stringify(snap.events.filter((e) => e.at >= hungAt - 1_000).map((e) => ({ ...e, at: e.at - hungAt })))}`,
  );

  assert.ok(snap.attemptTimeoutMs > 0, 'the front says its attempt timeout');
  assert.ok(successRate >= 0.99, `success rate ${successRate} through the hang`);
  assert.ok(hungP99 <= hungBound, `p99 ${hungP99.toFixed(1)} ms after the hang, against ${calmP99.toFixed(1)} ms before it: a hung instance costs at most one attempt timeout`);
  assert.notEqual(aSnap.state, 'healthy', 'the hung instance is out of rotation');
  // Two probes (500 ms timeout each, 250 ms ± 20 % apart, the first up to an interval away): about 1.6 s at most.
  assert.ok((aOutAt !== undefined && aOutAt - hungAt < 3_000) || outAtHang, 'the hung instance is out of rotation within a few health-check rounds (or was out already when it hung)');
  assert.ok(!snap.events.some((e) => e.id === 'a' && IN.has(e.event) && e.at >= hungAt), 'the hung instance is never back in rotation while it hangs');
  // The one instance left carries the spike: never ejected (its slowness and its sheds are not errors), never
  // failing its checks (so the front never falls back to routing to the hung one: no panic).
  assert.ok(!snap.events.some((e) => e.id === 'b' && OUT.has(e.event)), 'b never out of rotation');
  assert.equal(bSnap.state, 'healthy', 'the other instance is never out');
  assert.equal(bSnap.ejections, 0);
  assert.equal(snap.panic, false);

  // Restart both cold, on the same ports (the front's upstream set is fixed).
  a.child.kill('SIGKILL');
  b.child.kill('SIGKILL');
  await Promise.all([exited(a.child), exited(b.child)]);
  const restartedAt = Date.now();
  const [a2, b2] = await Promise.all([start('instance.ts', instanceEnv('a', a.ready.port), children), start('instance.ts', instanceEnv('b', b.ready.port), children)]);
  const cold = await load(base, 1_500, 16);
  const elapsed = Date.now() - restartedAt;
  t.diagnostic(`cold restart: 1500 requests in ${elapsed} ms, success ${((cold.ok / 1_500) * 100).toFixed(2)} %, p99 ${p99(cold.latencies).toFixed(1)} ms, ${cold.ids.size} distinct ids`);
  const stats = await Promise.all([a2, b2].map((x) => json<Stats>(`http://127.0.0.1:${x.ready.port}/admin/stats`)));
  for (const [i, s] of stats.entries()) {
    const up = Date.now() - s.startedAt;
    const warmBudget = Math.min(HOT, Math.floor((up * WARM_RATE) / 1000) + WARM_CONCURRENCY);
    const liveBudget = cold.ids.size; // each distinct id reaches SQLite at most once per instance (coalescing, ttl 60 s)
    t.diagnostic(`instance ${i === 0 ? 'a' : 'b'}: ${s.queries} SQLite queries (warm ${s.warmQueries} ≤ ${warmBudget}, live ${s.liveQueries} ≤ ${liveBudget}); warm-up ${JSON.stringify(s.warm)}`);
    assert.ok(s.warmQueries <= warmBudget, `warm-up queries ${s.warmQueries} > rate × time ${warmBudget}`);
    assert.ok(s.liveQueries <= liveBudget, `live queries ${s.liveQueries} > distinct ids ${liveBudget}`);
    assert.ok(s.queries <= HOT + liveBudget);
  }
  assert.ok(cold.ok / 1_500 >= 0.99, `cold restart success ${cold.ok / 1_500}`);
  const total = stats.reduce((n, s) => n + s.queries, 0);
  assert.ok(total < 1_500 / 2, `origin saw ${total} queries for 1500 requests: the caches absorb most of the cold start`);
});
