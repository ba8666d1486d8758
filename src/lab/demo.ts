import { Cache } from '../cache/cache.js';
import { sleep } from '../time/clock.js';
import { seededRandom } from '../time/random.js';
import { VirtualClock } from '../time/virtual.js';

/**
 * The short demo `npm start` runs until the incident lab lands: the Facebook
 * 2010 loop in miniature. Clients read one configuration key through a cache
 * while its database first fails, then serves an invalid value, then heals.
 * The same traffic runs through a naive cache-aside loop (the postmortem's
 * behaviour: an error or an invalid value deletes the key and queries the
 * database again) and through damper's `Cache`, on one virtual clock, so the
 * run takes milliseconds and is the same every time for a given seed.
 */

/** What the demo's timeline does, in virtual ms. */
export const DEMO_TIMELINE = {
  durationMs: 10_000,
  failFrom: 2_000,
  invalidFrom: 5_000,
  healedAt: 8_000,
  requestsPerSecond: 1_000,
  dbLatencyMs: 20,
  ttlMs: 1_000,
} as const;

/** Counts for one variant. */
export interface DemoCounts {
  requests: number;
  databaseQueries: number;
  errorsSeen: number;
  valuesServed: number;
  invalidServed: number;
  /** Database queries in the busiest second. */
  peakQueriesPerSecond: number;
}

export interface DemoResult {
  seed: number;
  naive: DemoCounts;
  damper: DemoCounts;
}

interface Config {
  readonly version: number;
  readonly valid: boolean;
}

const isValid = (c: Config): boolean => c.valid;

/** A database whose health follows the timeline, counting queries per second. */
function database(clock: VirtualClock, counts: DemoCounts): () => Promise<Config> {
  const perSecond = new Map<number, number>();
  let version = 0;
  return async () => {
    counts.databaseQueries++;
    const second = Math.floor(clock.now() / 1000);
    const n = (perSecond.get(second) ?? 0) + 1;
    perSecond.set(second, n);
    counts.peakQueriesPerSecond = Math.max(counts.peakQueriesPerSecond, n);
    await sleep(clock, DEMO_TIMELINE.dbLatencyMs);
    const t = clock.now();
    if (t >= DEMO_TIMELINE.failFrom && t < DEMO_TIMELINE.invalidFrom) throw new Error('database unavailable');
    return { version: ++version, valid: !(t >= DEMO_TIMELINE.invalidFrom && t < DEMO_TIMELINE.healedAt) };
  };
}

/** The postmortem's cache-aside loop, bugs included: errors and invalid values delete the key. */
function naiveReader(clock: VirtualClock, query: () => Promise<Config>): () => Promise<Config> {
  const cache = new Map<string, { value: Config; expires: number }>();
  return async () => {
    const hit = cache.get('config');
    if (hit !== undefined && hit.expires > clock.now() && isValid(hit.value)) return hit.value;
    try {
      const value = await query();
      if (!isValid(value)) throw new Error('invalid configuration value');
      cache.set('config', { value, expires: clock.now() + DEMO_TIMELINE.ttlMs });
      return value;
    } catch (error) {
      cache.delete('config');
      throw error;
    }
  };
}

function damperReader(clock: VirtualClock, query: () => Promise<Config>): () => Promise<Config> {
  const cache = new Cache<Config>({ clock, ttl: DEMO_TIMELINE.ttlMs, staleFor: 60_000, validate: isValid });
  return () => cache.get('config', () => query());
}

async function drive(seed: number, make: (clock: VirtualClock, query: () => Promise<Config>) => () => Promise<Config>): Promise<DemoCounts> {
  const clock = new VirtualClock({ seed });
  const counts: DemoCounts = { requests: 0, databaseQueries: 0, errorsSeen: 0, valuesServed: 0, invalidServed: 0, peakQueriesPerSecond: 0 };
  const read = make(clock, database(clock, counts));
  const pending: Promise<void>[] = [];
  // Open-loop Poisson arrivals: clients do not slow down because the system
  // does. Arrivals draw from their own source so both variants see the same traffic.
  const arrivals = seededRandom(seed);
  const gap = (): number => (-Math.log(1 - arrivals()) * 1000) / DEMO_TIMELINE.requestsPerSecond;
  for (let t = gap(); t < DEMO_TIMELINE.durationMs; t += gap()) {
    await clock.advanceTo(t);
    counts.requests++;
    pending.push(
      read().then(
        (v) => {
          counts.valuesServed++;
          if (!v.valid) counts.invalidServed++;
        },
        () => {
          counts.errorsSeen++;
        },
      ),
    );
  }
  await clock.runUntilIdle();
  await Promise.all(pending);
  return counts;
}

/** Runs both variants over the same timeline and seed. */
export async function runDemo(seed = 1): Promise<DemoResult> {
  return { seed, naive: await drive(seed, naiveReader), damper: await drive(seed, damperReader) };
}

/** The side-by-side table the CLI prints. */
export function formatDemo(r: DemoResult): string {
  const t = DEMO_TIMELINE;
  const rows: [string, keyof DemoCounts][] = [
    ['requests', 'requests'],
    ['database queries (loader calls)', 'databaseQueries'],
    ['peak database queries in 1 s', 'peakQueriesPerSecond'],
    ['errors seen by callers', 'errorsSeen'],
    ['values served', 'valuesServed'],
    ['invalid values served', 'invalidServed'],
  ];
  const w = Math.max(...rows.map(([l]) => l.length));
  const lines = [
    `damper demo: one configuration key, ${t.requestsPerSecond} reads/s for ${t.durationMs / 1000} s (virtual time, seed ${r.seed})`,
    `  0–${t.failFrom / 1000} s healthy · ${t.failFrom / 1000}–${t.invalidFrom / 1000} s database errors · ${t.invalidFrom / 1000}–${t.healedAt / 1000} s database serves an invalid value · then healed`,
    '',
    `${''.padEnd(w)}  ${'naive cache-aside'.padStart(18)}  ${'damper'.padStart(10)}`,
    ...rows.map(([label, k]) => `${label.padEnd(w)}  ${String(r.naive[k]).padStart(18)}  ${String(r.damper[k]).padStart(10)}`),
    '',
    'naive: every error or invalid value deletes the key, so every request goes to the database (Facebook, 2010).',
    'damper: one load at a time, errors and invalid values back off, the last known good value is served.',
  ];
  return lines.join('\n');
}
