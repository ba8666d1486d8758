// The front: a damper Balancer over article instances, forwarding with fetch.
//
//   node --import tsx examples/articles/front.ts
//
// Env: UPSTREAMS (comma-separated base URLs); when absent, the front starts two
// instances itself as child processes on free loopback ports (DB defaults to
// ./articles.db). PORT (default 0). On listening it prints one line:
// {"ready":true,"port":N,"upstreams":[...]}.
//   GET /articles/:id     forwarded to an instance
//   GET /admin/upstreams  the balancer's snapshot (and eject/restore events seen), the attempt timeout
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Balancer, OverloadedError, type PickedUpstream } from 'damper';

/** Per-attempt timeout of a forwarded request, ms: a hung instance costs this, then the call goes elsewhere. */
const ATTEMPT_TIMEOUT_MS = 250;
/**
 * A health probe not answered within this is a failure, ms. Two in a row take
 * an instance out of rotation. Well above what a live instance takes to answer
 * `/health` on a busy machine (a critical request there): a timeout is where
 * slow is declared dead, so it sits far from slow.
 */
const PROBE_TIMEOUT_MS = 500;

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
    timeout: PROBE_TIMEOUT_MS,
    slowMs: 150,
    unhealthyThreshold: 2,
    healthyThreshold: 2,
  },
  slowStartMs: 2_000,
});
balancer.events.on('eject', (e) => events.push({ at: Date.now(), event: 'eject', id: e.id, detail: e.reason }));
balancer.events.on('ejectRefused', (e) => events.push({ at: Date.now(), event: 'ejectRefused', id: e.id, detail: e.reason }));
balancer.events.on('restore', (e) => events.push({ at: Date.now(), event: 'restore', id: e.id, detail: e.via }));
balancer.events.on('panic', (e) => events.push({ at: Date.now(), event: e.active ? 'panic' : 'panic-end', id: '*' }));
/** Whether each instance passed its last checks, to log the changes ('unhealthy', 'healthy'), not every probe. */
const passing = new Map<string, boolean>();
balancer.events.on('health', (e) => {
  if (!e.ok) events.push({ at: Date.now(), event: 'health-fail', id: e.id, detail: e.healthy });
  if ((passing.get(e.id) ?? true) !== e.healthy) events.push({ at: Date.now(), event: e.healthy ? 'healthy' : 'unhealthy', id: e.id });
  passing.set(e.id, e.healthy);
});

/** The instance answered with an error (5xx other than 503). */
class UpstreamError extends Error {}
/** The instance shed the request (503): overloaded, not failing. */
class InstanceShed extends Error {}
/** No answer within {@link ATTEMPT_TIMEOUT_MS}: slow, or hung; the health checks tell which. */
class AttemptTimedOut extends Error {}

/**
 * Whether a failed attempt counts against the instance. Slow is not dead
 * (principle 5): an attempt past its timeout, and an instance's own 503 (it
 * shed), count neither way. Counted, they ejected the one instance left when
 * the other hung on a busy machine: it answered the spike slowly, three
 * timeouts in a row, and was taken out, as the Columbia Missourian's second
 * server was. A hang gives only timeouts; the health checks judge it.
 */
function countsAgainstInstance(error: unknown): boolean {
  return !(error instanceof AttemptTimedOut || error instanceof InstanceShed);
}

/** One attempt on a picked instance, reported to the balancer as a success, a failure or neither. */
async function attempt(picked: PickedUpstream<string>, path: string, priority: string): Promise<{ status: number; body: string }> {
  const url = picked.target;
  const timeout = AbortSignal.timeout(ATTEMPT_TIMEOUT_MS);
  balancer.start(picked);
  try {
    const r = await fetch(`${url}${path}`, { signal: timeout, headers: { 'x-priority': priority } });
    const body = await r.text();
    if (r.status === 503) throw new InstanceShed(`${url} shed the request (503)`);
    if (r.status >= 500) throw new UpstreamError(`${url} answered ${r.status}`);
    balancer.finish(picked, true);
    return { status: r.status, body };
  } catch (caught) {
    const error = timeout.aborted ? new AttemptTimedOut(`${url}: no answer within ${ATTEMPT_TIMEOUT_MS} ms`) : caught;
    if (countsAgainstInstance(error)) balancer.finish(picked, false);
    else balancer.release(picked);
    throw error;
  }
}

async function forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = req.url ?? '/';
  const header = String(req.headers['x-priority'] ?? 'normal');
  const priority = header === 'low' || header === 'background' || header === 'critical' ? header : 'normal';
  let result: { status: number; body: string } | undefined;
  let lastError: unknown;
  // GETs are idempotent: one more attempt after a failure, on another instance
  // when one has room (a retry sent back to a hung instance fails again).
  const tried = new Set<string>();
  for (let i = 0; i < 2 && result === undefined; i++) {
    const picked = balancer.pick({ priority, avoid: tried });
    if (picked === undefined) {
      lastError = new OverloadedError(`front: every instance is saturated for priority ${priority}; shed`);
      break; // shed, not retried: retrying overload feeds it
    }
    tried.add(picked.id);
    try {
      result = await attempt(picked, path, header);
    } catch (error) {
      lastError = error;
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
    // The attempt timeout too: what a hung instance may cost a request, for whoever judges the front's latency.
    res.end(JSON.stringify({ ...balancer.snapshot(), urls, events, attemptTimeoutMs: ATTEMPT_TIMEOUT_MS }));
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
