import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { Cache, ConfigError, DamperError, type LoaderContext } from '../src/index.js';
import { type PgClientLike, type PgPoolLike, postgresLoader } from '../src/origin/postgres.js';
import { sqliteLoader } from '../src/origin/sqlite.js';
import { startPostgres, type PostgresServer } from './support/postgres.js';

interface Article {
  title: string;
  body: string;
}

function context<V>(key: string, signal: AbortSignal = new AbortController().signal): LoaderContext<V> {
  return { key, signal, stale: undefined, setTags: () => {} };
}

const articleRow = (r: { title: string; body: string }): Article => ({ title: r.title, body: r.body });

/** A pool that counts the queries sent through it. */
function counting(pool: pg.Pool): { pool: PgPoolLike; queries: () => number } {
  let n = 0;
  return {
    pool: {
      async connect(): Promise<PgClientLike> {
        const client = await pool.connect();
        const wrapped = Object.create(client) as PgClientLike;
        wrapped.query = (config) => (n++, client.query(config));
        wrapped.release = (destroy) => client.release(destroy);
        return wrapped;
      },
    },
    queries: () => n,
  };
}

describe('postgresLoader (real PostgreSQL)', () => {
  let server: PostgresServer;
  let pool: pg.Pool;
  /** A second connection that watches the server. */
  let observer: pg.Client;
  /** How many backends run a query that sleeps 5 s, as the server sees it. */
  const sleeping = async (): Promise<number> =>
    Number((await observer.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep(5)%' AND pid <> pg_backend_pid()")).rows[0]?.n);
  const until = async (cond: () => Promise<boolean>, withinMs: number, what: string): Promise<void> => {
    const start = performance.now();
    while (!(await cond())) {
      if (performance.now() - start > withinMs) assert.fail(`not within ${withinMs} ms: ${what}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };

  before(async () => {
    server = await startPostgres();
    // One connection: a test can tell whether the connection a load used came back usable.
    pool = new pg.Pool({ connectionString: server.connectionString, max: 1 });
    observer = new pg.Client({ connectionString: server.connectionString });
    await observer.connect();
    // The last test kills the server: idle connections then emit 'error', which must not crash the run.
    pool.on('error', () => undefined);
    observer.on('error', () => undefined);
    await pool.query(`
      CREATE TABLE articles (id text PRIMARY KEY, title text NOT NULL, body text NOT NULL);
      CREATE TABLE tags (article_id text NOT NULL, tag text NOT NULL);
      CREATE SEQUENCE hits;
      INSERT INTO articles VALUES ('a1', 'First', 'Hello'), ('a2', 'Second', 'World');
      INSERT INTO tags VALUES ('a1', 'news'), ('a1', 'tech'), ('a2', 'sport');
    `);
  });

  after(async () => {
    await observer?.end().catch(() => undefined);
    await pool?.end();
    await server?.stop();
  });

  test('pg.Pool fits the structural type, and bad options are refused at construction', () => {
    const asPool: PgPoolLike = pool;
    assert.ok(asPool);
    assert.throws(() => postgresLoader({ pool, text: '  ', row: articleRow }), ConfigError);
    assert.throws(() => postgresLoader({ pool: {} as PgPoolLike, text: 'SELECT 1', row: articleRow }), ConfigError);
  });

  test('a row is mapped to the value; no row is undefined; the statement is prepared under its name', async () => {
    const load = postgresLoader({ pool, text: 'SELECT title, body FROM articles WHERE id = $1', row: articleRow, name: 'article_by_id' });
    assert.deepEqual(await load(context('a1')), { title: 'First', body: 'Hello' });
    assert.deepEqual(await load(context('a2')), { title: 'Second', body: 'World' });
    assert.equal(await load(context('nope')), undefined);
    const { rows } = await pool.query<{ name: string; statement: string }>('SELECT name, statement FROM pg_prepared_statements');
    assert.deepEqual(
      rows.map((r) => r.name),
      ['article_by_id'],
    );
  });

  test('params maps a prefixed key; the default name is derived from the text', async () => {
    const load = postgresLoader({ pool, text: 'SELECT body FROM articles WHERE id = $1', params: (key) => [key.replace(/^article:/, '')], row: (r: { body: string }) => r.body });
    assert.equal(await load(context('article:a2')), 'World');
    const { rows } = await pool.query<{ name: string }>("SELECT name FROM pg_prepared_statements WHERE name LIKE 'damper_%'");
    assert.equal(rows.length, 1);
    assert.match(rows[0]?.name ?? '', /^damper_[0-9a-f]{16}$/);
  });

  test('name: false sends an unnamed statement, as a pooler in transaction mode needs: nothing stays prepared on the connection', async () => {
    const text = 'SELECT title FROM articles WHERE id = $1';
    const load = postgresLoader({ pool, text, row: (r: { title: string }) => r.title, name: false });
    assert.equal(await load(context('a1')), 'First');
    assert.equal(await load(context('a2')), 'Second');
    const { rows } = await pool.query('SELECT name FROM pg_prepared_statements WHERE statement = $1', [text]);
    assert.deepEqual(rows, []);
    assert.throws(() => postgresLoader({ pool, text: 'SELECT 1', row: articleRow, name: '' }), ConfigError);
  });

  test('more than one row is a typed error, not a value', async () => {
    const load = postgresLoader({ pool, text: 'SELECT tag FROM tags WHERE article_id = $1', row: (r: { tag: string }) => r.tag });
    assert.equal(await load(context('a2')), 'sport');
    await assert.rejects(load(context('a1')), (e: unknown) => e instanceof DamperError && e.code === 'TOO_MANY_ROWS' && /"a1" returned 2 rows/.test(e.message));
  });

  test('abort cancels a slow query on the server, rejects at once with the reason, and the connection stays usable', async () => {
    const before = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const pid = before.rows[0]?.pid;
    const load = postgresLoader({ pool, text: 'SELECT $1::text AS body FROM pg_sleep(5)', row: (r: { body: string }) => r.body });
    const ac = new AbortController();
    const reason = new Error('took too long');
    const started = performance.now();
    const pending = load(context('x', ac.signal));
    // Abort only once the server really runs it.
    await until(async () => (await sleeping()) === 1, 3000, 'the query runs on the server');
    const abortedAt = performance.now();
    ac.abort(reason);
    await assert.rejects(pending, (e) => e === reason);
    const rejectedAfter = performance.now() - abortedAt;
    // The only pooled connection comes back once the server has dropped the query: well before pg_sleep's 5 s.
    const after = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const usableAfter = performance.now() - abortedAt;
    assert.equal(after.rows[0]?.pid, pid, 'the same connection, returned to the pool, not destroyed');
    assert.equal(await sleeping(), 0, 'nothing left running on the server');
    assert.ok(rejectedAfter < 250, `rejected ${rejectedAfter.toFixed(1)} ms after the abort`);
    assert.ok(usableAfter < 2000, `connection usable ${usableAfter.toFixed(1)} ms after the abort`);
    assert.ok(abortedAt - started < 3000);
    // And the loader itself works on it again.
    const fast = postgresLoader({ pool, text: 'SELECT body FROM articles WHERE id = $1', row: (r: { body: string }) => r.body });
    assert.equal(await fast(context('a1')), 'Hello');
  });

  test('an already aborted signal never reaches the database', async () => {
    const { pool: counted, queries } = counting(pool);
    const load = postgresLoader({ pool: counted, text: 'SELECT body FROM articles WHERE id = $1', row: (r: { body: string }) => r.body });
    const ac = new AbortController();
    ac.abort(new Error('gone'));
    await assert.rejects(load(context('a1', ac.signal)), /gone/);
    assert.equal(queries(), 0);
  });

  test('through a real Cache: 200 concurrent gets of one key run one query; absent is cached too', async () => {
    const { pool: counted, queries } = counting(pool);
    const load = postgresLoader({
      pool: counted,
      // nextval counts executions on the server itself.
      text: "SELECT title, body, nextval('hits') AS hit FROM articles WHERE id = $1",
      row: articleRow,
    });
    const cache = new Cache<Article | undefined>({ ttl: 60_000 });
    const got = await Promise.all(Array.from({ length: 200 }, () => cache.get('a1', load)));
    assert.equal(queries(), 1);
    for (const v of got) assert.deepEqual(v, { title: 'First', body: 'Hello' });
    assert.equal(Number((await pool.query<{ n: string }>('SELECT last_value AS n FROM hits')).rows[0]?.n), 1, 'one execution on the server');

    const absent = await Promise.all(Array.from({ length: 50 }, () => cache.get('missing', load)));
    assert.deepEqual(new Set(absent), new Set([undefined]));
    assert.equal(await cache.get('missing', load), undefined);
    assert.equal(queries(), 2, 'negative caching: the absent key was queried once');
  });

  test("the cache's loadTimeout cancels the query on the server", async () => {
    const load = postgresLoader({ pool, text: 'SELECT $1::text AS body FROM pg_sleep(5)', row: (r: { body: string }) => r.body });
    const cache = new Cache<string | undefined>({ loadTimeout: 300 });
    const started = performance.now();
    await assert.rejects(cache.get('slow', load), (e: unknown) => e instanceof DamperError && e.code === 'LOAD_TIMEOUT');
    // The server stopped sleeping (a dropped connection would not stop it: the backend sleeps on for 5 s).
    await until(async () => (await sleeping()) === 0, 2000, 'the server dropped the query');
    await pool.query('SELECT 1');
    const elapsed = performance.now() - started;
    assert.ok(elapsed < 3000, `pool usable again after ${elapsed.toFixed(0)} ms`);
  });

  // Last: it kills the server. Checks the test server's chaos controls that later tests rely on.
  test('the test server can be paused, resumed, killed and restarted on the same port', async () => {
    const client = (): pg.Client => {
      const c = new pg.Client({ connectionString: server.connectionString, query_timeout: 300, connectionTimeoutMillis: 300 });
      c.on('error', () => undefined);
      return c;
    };
    const a = client();
    await a.connect();
    server.pause();
    await assert.rejects(a.query('SELECT 1'), /timeout/i, 'a paused server does not answer');
    await assert.rejects(client().connect(), /timeout/i, 'nor accept a session');
    server.resume();
    const b = client();
    await b.connect();
    assert.equal((await b.query<{ n: number }>('SELECT 1 AS n')).rows[0]?.n, 1);
    await server.kill();
    await assert.rejects(b.query('SELECT 1'));
    await assert.rejects(client().connect(), /ECONNREFUSED/);
    await server.restart();
    const c = client();
    await c.connect();
    assert.equal((await c.query<{ n: string }>('SELECT count(*) AS n FROM articles')).rows[0]?.n, '2', 'the data survived');
    await c.end();
    await a.end().catch(() => undefined);
  });
});

describe('sqliteLoader (real SQLite file)', () => {
  let dir: string;
  let db: Database.Database;
  let executions = 0;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'damper-sqlite-'));
    db = new Database(join(dir, 'articles.db'));
    db.exec(`
      CREATE TABLE articles (id TEXT PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL);
      CREATE TABLE tags (article_id TEXT NOT NULL, tag TEXT NOT NULL);
      INSERT INTO articles VALUES ('a1', 'First', 'Hello'), ('a2', 'Second', 'World');
      INSERT INTO tags VALUES ('a1', 'news'), ('a1', 'tech'), ('a2', 'sport');
    `);
    db.function('hit', () => (executions++, 1));
  });

  after(() => {
    db?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  test('a row is mapped; no row is undefined; the statement is prepared once', async () => {
    let prepares = 0;
    const counted = { prepare: (sql: string) => (prepares++, db.prepare(sql)) };
    const load = sqliteLoader({ db: counted, sql: 'SELECT title, body FROM articles WHERE id = ?', row: articleRow });
    assert.deepEqual(await load(context('a1')), { title: 'First', body: 'Hello' });
    assert.deepEqual(await load(context('a2')), { title: 'Second', body: 'World' });
    assert.equal(await load(context('nope')), undefined);
    assert.equal(prepares, 1);
  });

  test('named parameters and a prefixed key', async () => {
    const load = sqliteLoader({ db, sql: 'SELECT body FROM articles WHERE id = @id', params: (key) => ({ id: key.slice('article:'.length) }), row: (r: { body: string }) => r.body });
    assert.equal(await load(context('article:a2')), 'World');
  });

  test('more than one row is a typed error; bad SQL or a statement without rows is refused at construction', async () => {
    const load = sqliteLoader({ db, sql: 'SELECT tag FROM tags WHERE article_id = ?', row: (r: { tag: string }) => r.tag });
    assert.equal(await load(context('a2')), 'sport');
    await assert.rejects(load(context('a1')), (e: unknown) => e instanceof DamperError && e.code === 'TOO_MANY_ROWS');
    // The cursor was closed: the database accepts writes again.
    db.prepare('INSERT INTO tags VALUES (?, ?)').run('a3', 'x');
    assert.throws(() => sqliteLoader({ db, sql: 'SELECT nope FROM missing', row: articleRow }), /no such table/);
    assert.throws(() => sqliteLoader({ db, sql: 'DELETE FROM tags', row: articleRow }), ConfigError);
  });

  test('an aborted signal rejects with its reason and runs nothing', async () => {
    const load = sqliteLoader({ db, sql: 'SELECT body, hit() FROM articles WHERE id = ?', row: (r: { body: string }) => r.body });
    const ac = new AbortController();
    const reason = new Error('gone');
    ac.abort(reason);
    const before = executions;
    await assert.rejects(load(context('a1', ac.signal)), (e) => e === reason);
    assert.equal(executions, before);
  });

  test('through a real Cache: 200 concurrent gets of one key run one query', async () => {
    const load = sqliteLoader({ db, sql: 'SELECT title, body, hit() AS h FROM articles WHERE id = ?', row: articleRow });
    const cache = new Cache<Article | undefined>({ ttl: 60_000 });
    const before = executions;
    const got = await Promise.all(Array.from({ length: 200 }, () => cache.get('a2', load)));
    assert.equal(executions - before, 1);
    for (const v of got) assert.deepEqual(v, { title: 'Second', body: 'World' });
  });
});
