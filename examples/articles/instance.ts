// One article service instance: node:http in front of SQLite (better-sqlite3),
// read through a damper Cache, shedding by priority with a ConcurrencyLimiter.
//
//   node --import tsx examples/articles/instance.ts   (env below)
//
// Env: DB (SQLite file, created and seeded when missing; default ./articles.db),
// PORT (default 0: a free port), NAME (label in logs), HOT (comma-separated ids
// warmed on start; default 1..50), WARM_RATE (warm-up loads per second, default 100),
// SNAPSHOT (file: restore the cache from it on start, write it on SIGTERM).
// On listening it prints one line: {"ready":true,"port":N,"pid":P}.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import Database from 'better-sqlite3';
import { Cache, ConcurrencyLimiter, OverloadedError, type Priority, type Snapshot, type WarmSummary } from 'damper';

export interface Article {
  id: number;
  title: string;
  body: string;
}

const name = process.env['NAME'] ?? `instance-${process.pid}`;
const dbFile = process.env['DB'] ?? 'articles.db';
const port = Number(process.env['PORT'] ?? 0);
const hot = (process.env['HOT'] ?? Array.from({ length: 50 }, (_, i) => String(i + 1)).join(','))
  .split(',')
  .filter((s) => s !== '');
const warmRate = Number(process.env['WARM_RATE'] ?? 100);
const snapshotFile = process.env['SNAPSHOT'];
export const ARTICLES = 1000;

// --- the origin: SQLite, and a count of every query that reaches it ---
const db = new Database(dbFile);
db.pragma('busy_timeout = 5000'); // two instances may create and seed the same file at once
db.pragma('journal_mode = WAL');
db.exec('CREATE TABLE IF NOT EXISTS articles (id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL)');
const count = db.prepare('SELECT COUNT(*) AS n FROM articles').get() as { n: number };
if (count.n === 0) {
  const insert = db.prepare('INSERT OR IGNORE INTO articles (id, title, body) VALUES (?, ?, ?)');
  db.transaction(() => {
    for (let id = 1; id <= ARTICLES; id++) insert.run(id, `Article ${id}`, `Body of article ${id}. `.repeat(20));
  })();
}
const byId = db.prepare('SELECT id, title, body FROM articles WHERE id = ?');
const stats = { queries: 0, warmQueries: 0, liveQueries: 0, requests: 0, shed: 0, startedAt: Date.now() };
let warmSummary: WarmSummary | undefined;
let restored = 0;

function query(id: string, source: 'warm' | 'live'): Article | undefined {
  stats.queries++;
  if (source === 'warm') stats.warmQueries++;
  else stats.liveQueries++;
  return byId.get(Number(id)) as Article | undefined;
}

// --- damper: the cache in front of the query; its guard is the origin budget ---
const originBudget = new ConcurrencyLimiter({ limit: 8, maxQueue: 256, queueTimeout: 500 });
const articles = new Cache<Article | undefined>({ ttl: 60_000, staleFor: 600_000, guard: originBudget });

// --- damper: the service's own overload control, shedding by priority ---
const service = new ConcurrencyLimiter({ limit: 32, maxQueue: 512, queueTimeout: 1_000 });

function priorityOf(req: IncomingMessage): Priority {
  if (req.url === '/health') return 'critical';
  const p = req.headers['x-priority'];
  return p === 'critical' || p === 'low' || p === 'background' ? p : 'normal';
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = req.url ?? '/';
  if (req.method === 'GET' && url === '/admin/stats') {
    send(res, 200, { name, pid: process.pid, ...stats, cacheSize: articles.size, restored, warm: warmSummary ?? null, hot: hot.length, warmRate, originLimit: originBudget.limit });
    return;
  }
  stats.requests++;
  try {
    await service.execute(
      async () => {
        if (req.method === 'GET' && url === '/health') return send(res, 200, { ok: true, name });
        const m = /^\/articles\/(\d+)$/.exec(url);
        if (req.method === 'GET' && m !== null) {
          const id = m[1]!;
          const article = await articles.get(id, () => query(id, 'live'));
          if (article === undefined) return send(res, 404, { error: 'not found', id });
          return send(res, 200, { ...article, servedBy: name });
        }
        send(res, 404, { error: 'no such route' });
      },
      { priority: priorityOf(req) },
    );
  } catch (error) {
    if (error instanceof OverloadedError) {
      stats.shed++;
      if (!res.headersSent) send(res, 503, { error: 'overloaded' });
      return;
    }
    if (!res.headersSent) send(res, 500, { error: String(error) });
  }
}

const server = createServer((req, res) => void handle(req, res));
server.keepAliveTimeout = 5_000;
server.listen(port, '127.0.0.1', () => {
  const address = server.address();
  const bound = typeof address === 'object' && address !== null ? address.port : port;
  console.log(JSON.stringify({ ready: true, name, port: bound, pid: process.pid }));
  void warmUp();
});

// --- principle 7: cold is a state to manage. Restore a snapshot, then warm the hot ids at a bounded rate. ---
async function warmUp(): Promise<void> {
  if (snapshotFile !== undefined && existsSync(snapshotFile)) {
    const saved = JSON.parse(readFileSync(snapshotFile, 'utf8')) as { savedAt: number; snapshot: Snapshot<Article | undefined> };
    restored = (await articles.restore(saved.snapshot, { elapsedMs: Math.max(0, Date.now() - saved.savedAt), maxAgeMs: 600_000 })).restored;
  }
  warmSummary = await articles.warm(hot, ({ key }) => query(key, 'warm'), { concurrency: 4, rate: warmRate });
}

function shutdown(): void {
  if (snapshotFile !== undefined) writeFileSync(snapshotFile, JSON.stringify({ savedAt: Date.now(), snapshot: articles.snapshot() }));
  server.close();
  server.closeAllConnections();
  db.close();
  process.exit(0);
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
