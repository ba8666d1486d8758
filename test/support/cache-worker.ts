// A process using damper against a real Redis and a real PostgreSQL, driven
// by test/shared-redis.test.ts and test/chaos.test.ts over IPC. Not a test of
// its own (no .test.ts suffix).
//
// Modes (argv[2]):
//   cold   — on "go", 1,000 concurrent gets of one cold key; reports loader calls.
//   steady — a steady read load over many keys until "stop", reporting every 250 ms
//            cumulative counters and latency histograms (keys with a value, cold keys).
import pg from 'pg';
import { Cache, CircuitBreaker, ConcurrencyLimiter, pipeline, RateLimiter, type SharedBackend } from '../../src/index.js';
import { postgresLoader } from '../../src/origin/postgres.js';
import { RedisStore } from '../../src/stores/redis.js';
import { emptyHistogram, record } from './latency-histogram.js';

interface Item {
  id: number;
  version: number;
  valid: boolean;
}

const mode = process.argv[2];
const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};
const send = (m: unknown): void => void process.send?.(m);

/** Counts what reaches the shared tier, so the parent can see L2 hits come back after an outage. */
function counted(store: SharedBackend, stats: { l2Hits: number }): SharedBackend {
  return {
    read: async (key) => {
      const r = await store.read(key);
      if (r !== undefined) stats.l2Hits++;
      return r;
    },
    acquire: (k, t, ttl) => store.acquire(k, t, ttl),
    fill: (k, t, v, ttl) => store.fill(k, t, v, ttl),
    fail: (k, t, f, b) => store.fail(k, t, f, b),
    release: (k, t) => store.release(k, t),
    write: (k, v, ttl) => store.write(k, v, ttl),
    remove: (k) => store.remove(k),
    markTag: (t, r) => store.markTag(t, r),
    tagAge: (t) => store.tagAge(t),
    publish: (c, m) => store.publish(c, m),
    subscribe: (c, l) => store.subscribe(c, l),
  };
}

async function cold(): Promise<void> {
  const store = new RedisStore({ connection: { host: '127.0.0.1', port: Number(env('REDIS_PORT')) } });
  // Eight processes start at once on two cores: a generous store timeout, so the
  // test measures leases, not a store too slow to answer (which loads locally, by design).
  const cache = new Cache<string>({ ttl: 60_000, shared: { store, namespace: env('NAMESPACE'), timeout: 5_000 } });
  let calls = 0;
  const loader = async (): Promise<string> => {
    calls++;
    await new Promise((r) => setTimeout(r, 200));
    return `loaded by ${process.pid}`;
  };
  send({ ready: true });
  await new Promise<void>((resolve) => process.once('message', () => resolve()));
  const values = await Promise.all(Array.from({ length: 1_000 }, () => cache.get('cold-key', loader)));
  send({ calls, distinct: [...new Set(values)] });
  await cache.close();
  await store.close();
}

async function steady(): Promise<void> {
  const keys = Number(env('KEYS'));
  const perSecond = Number(env('GETS_PER_SECOND'));
  const bad = new Set(env('WATCH_IDS').split(',').map(Number));
  const store = new RedisStore({ connection: { host: '127.0.0.1', port: Number(env('REDIS_PORT')), connectTimeout: 1_000, maxRetriesPerRequest: 1 } });
  const pool = new pg.Pool({ connectionString: env('PG_URL'), max: 8, connectionTimeoutMillis: 1_000 });
  pool.on('error', () => {}); // idle clients die with the server; the loader sees the next failure
  const stats = { gets: 0, errorsHad: 0, errorsCold: 0, servedInvalid: 0, pgCalls: 0, pgOk: 0, l2Hits: 0, storeErrors: 0, watchLoads: 0, breakerState: 'closed', errorsHadSeen: [] as string[] };
  const latency = { had: emptyHistogram(), cold: emptyHistogram() };
  const query = postgresLoader<Item, { id: number; version: number; valid: boolean }>({
    pool,
    text: 'SELECT id, version, valid FROM items WHERE id = $1',
    params: (key) => [Number(key.slice(5))],
    row: (r) => ({ id: r.id, version: r.version, valid: r.valid }),
  });
  const loader = async (context: { key: string; signal: AbortSignal }): Promise<Item | undefined> => {
    stats.pgCalls++;
    if (bad.has(Number(context.key.slice(5)))) stats.watchLoads++;
    const item = await query(context);
    stats.pgOk++;
    return item;
  };
  const breaker = new CircuitBreaker({ consecutiveFailures: 5, openFor: 1_000, maxOpenFor: 2_000, probeTimeout: 1_000 });
  breaker.on('state', (e) => (stats.breakerState = e.to));
  const cache = new Cache<Item | undefined>({
    ttl: 10_000,
    ttlJitter: 0.3,
    staleFor: 300_000,
    loadTimeout: 2_000,
    validate: (item) => (item === undefined || item.valid ? true : `row ${item.id} is marked invalid`),
    // The origin budget: a rate PostgreSQL can take (30 loads/s per process, bursts of 5),
    // a concurrency bound, and the origin's breaker.
    guard: pipeline(new RateLimiter({ rate: 30, burst: 5 }), new ConcurrencyLimiter({ limit: 8 }), breaker),
    shared: { store: counted(store, stats), namespace: 'items' },
  });
  cache.on('sharedError', () => stats.storeErrors++);
  const had = new Set<number>();
  const interval = 10;
  let carry = 0;
  const nextId = (): number => 1 + Math.floor(Math.random() * keys);
  let last = performance.now();
  const tick = setInterval(() => {
    // Open loop by the clock, not by the tick: a tick that comes late (a busy
    // machine, a long GC) sends what the schedule owed since the last one, so
    // the rate is the rate asked for however fast the machine is today.
    const now = performance.now();
    carry += (perSecond * (now - last)) / 1_000;
    last = now;
    for (; carry >= 1; carry--) {
      const id = nextId();
      stats.gets++;
      // Whether the key had a value is decided when the caller asks: that is the caller the bounds protect.
      const histogram = had.has(id) ? latency.had : latency.cold;
      const asked = performance.now();
      cache.get(`item:${id}`, loader).then(
        (item) => {
          record(histogram, performance.now() - asked);
          if (item !== undefined && !item.valid) stats.servedInvalid++;
          had.add(id);
        },
        (error: unknown) => {
          record(histogram, performance.now() - asked);
          // The first few, by name and message, for the test's failure message: which rule let an error through.
          if (had.has(id) && stats.errorsHadSeen.length < 5) stats.errorsHadSeen.push(`${(error as Error).name}: ${(error as Error).message}`);
          if (had.has(id)) stats.errorsHad++;
          else stats.errorsCold++;
        },
      );
    }
  }, interval);
  const report = setInterval(() => send({ stats: { ...stats }, latency }), 250);
  send({ ready: true });
  await new Promise<void>((resolve) => process.on('message', (m: unknown) => (m === 'stop' ? resolve() : undefined)));
  clearInterval(tick);
  clearInterval(report);
  send({ stats: { ...stats }, latency, final: true });
  await cache.close();
  await store.close();
  await pool.end();
}

const run = mode === 'cold' ? cold : mode === 'steady' ? steady : undefined;
if (run === undefined) throw new Error(`unknown mode ${mode}`);
run().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
