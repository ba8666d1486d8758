// The front: a damper Balancer over article instances, forwarding with fetch.
//
//   node --import tsx examples/articles/front.ts
//
// Env: UPSTREAMS (comma-separated base URLs); when absent, the front starts two
// instances itself as child processes on free loopback ports (DB defaults to
// ./articles.db). PORT (default 0). On listening it prints one line:
// {"ready":true,"port":N,"upstreams":[...]}.
//   GET /articles/:id     forwarded to an instance
//   GET /admin/upstreams  the balancer's snapshot (and eject/restore events seen)
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Balancer, OverloadedError } from 'damper';

/** Per-attempt timeout of a forwarded request, ms: a hung instance costs this, then the call goes elsewhere. */
const ATTEMPT_TIMEOUT_MS = 250;

const children: ChildProcess[] = [];

/** Starts one instance on a free loopback port and resolves with its base URL once it listens. */
export function startInstance(env: Record<string, string>): Promise<{ url: string; child: ChildProcess }> {
  const script = fileURLToPath(new URL('./instance.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script], { env: { ...process.env, PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`instance exited with ${String(code)} before listening`)));
    createInterface({ input: child.stdout! }).once('line', (line) => {
      const { port } = JSON.parse(line) as { port: number };
      resolve({ url: `http://127.0.0.1:${port}`, child });
    });
  });
}

let urls = (process.env['UPSTREAMS'] ?? '').split(',').filter((u) => u !== '');
if (urls.length === 0) {
  // One after the other: the first creates and seeds the database (switching
  // it to WAL takes an exclusive lock the second would otherwise run into).
  const started = [await startInstance({ NAME: 'a' }), await startInstance({ NAME: 'b' })];
  urls = started.map((s) => s.url);
}

/** Balancer events seen, `at` in epoch ms. */
const events: { at: number; event: string; id: string; detail?: unknown }[] = [];
const balancer = new Balancer<string>({
  upstreams: urls.map((url, i) => ({ id: String.fromCharCode(97 + i), target: url })),
  maxOutstanding: 48, // calls in flight per instance: a hung one holds at most this many; beyond it (all full) the front sheds with 503
  outliers: { consecutiveErrors: 3, baseEjectionMs: 2_000, successRate: false },
  health: {
    check: async (url, signal) => {
      const r = await fetch(`${url}/health`, { signal });
      await r.arrayBuffer();
      if (!r.ok) throw new Error(`health ${r.status}`);
    },
    interval: 250,
    timeout: 200,
    slowMs: 100,
    unhealthyThreshold: 2,
    healthyThreshold: 2,
  },
  slowStartMs: 2_000,
});
balancer.events.on('eject', (e) => events.push({ at: Date.now(), event: 'eject', id: e.id, detail: e.reason }));
balancer.events.on('ejectRefused', (e) => events.push({ at: Date.now(), event: 'ejectRefused', id: e.id, detail: e.reason }));
balancer.events.on('restore', (e) => events.push({ at: Date.now(), event: 'restore', id: e.id, detail: e.via }));
balancer.events.on('health', (e) => {
  if (!e.ok) events.push({ at: Date.now(), event: 'health-fail', id: e.id, detail: e.healthy });
});

class UpstreamError extends Error {}

/** One attempt through the balancer: a 5xx or no answer within the timeout counts against the instance. */
async function attempt(path: string, priority: string): Promise<{ status: number; body: string }> {
  return balancer.run(async (url, signal) => {
    const r = await fetch(`${url}${path}`, { signal: AbortSignal.any([signal, AbortSignal.timeout(ATTEMPT_TIMEOUT_MS)]), headers: { 'x-priority': priority } });
    const body = await r.text();
    if (r.status >= 500) throw new UpstreamError(`${url} answered ${r.status}`);
    return { status: r.status, body };
  }, { priority: priority === 'low' || priority === 'background' || priority === 'critical' ? priority : 'normal' });
}

async function forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = req.url ?? '/';
  const priority = String(req.headers['x-priority'] ?? 'normal');
  let result: { status: number; body: string } | undefined;
  let lastError: unknown;
  // GETs are idempotent: one more attempt after a failure, which the balancer
  // routes by load (a hung instance has its slots full, or is out).
  for (let i = 0; i < 2 && result === undefined; i++) {
    try {
      result = await attempt(path, priority);
    } catch (error) {
      lastError = error;
      if (error instanceof OverloadedError) break; // shed, not retried: retrying overload feeds it
    }
  }
  if (result === undefined) {
    const status = lastError instanceof OverloadedError ? 503 : 502;
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: String(lastError) }));
    return;
  }
  res.writeHead(result.status, { 'content-type': 'application/json' });
  res.end(result.body);
}

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/admin/upstreams') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ...balancer.snapshot(), urls, events }));
    return;
  }
  if (req.method === 'GET' && (req.url?.startsWith('/articles/') ?? false)) {
    void forward(req, res);
    return;
  }
  res.writeHead(404, { 'content-type': 'application/json' });
  res.end('{"error":"no such route"}');
});
server.listen(Number(process.env['PORT'] ?? 0), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  console.log(JSON.stringify({ ready: true, port, upstreams: urls }));
});

function shutdown(): void {
  balancer.close();
  server.close();
  server.closeAllConnections();
  for (const c of children) c.kill('SIGTERM');
  process.exit(0);
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
