import { type Timer } from '../../time/clock.js';
import { seededRandom } from '../../time/random.js';
import { VirtualClock } from '../../time/virtual.js';
import { simulate, type World } from '../engine.js';
import { Recorder } from '../metrics.js';
import { type VariantName, type VariantRun } from '../results.js';
import { type FaultSpanDoc, faultTimeline, type Json, type Population, type ScenarioCommon, ScenarioError, sizeAxis, spanAxis } from '../scenario.js';
import { cacheAsideSchema } from '../schema/cache-aside.js';
import { check } from '../schema/problems.js';
import { type WorldKind } from '../worlds.js';
import { KeyPicker, poisson } from '../traffic.js';
import { Database } from './database.js';
import { damperReader, naiveReader, type Reader } from './readers.js';

/** A fault of the cache-aside world. */
export type Fault = FaultSpanDoc &
  (
    | /** The origin's copy of `key` becomes invalid at `startS` and is fixed at `endS`; the write also reaches the cache tier. */
    { readonly kind: 'invalid-value'; readonly key: string }
    /**
     * Operators turn traffic away at the front door from `startS` to `endS`. With
     * `when: "unhealthy"` they do so only if, at `startS`, goodput over the last
     * `holdS` seconds is below the objective: an operator reacts to what the
     * dashboards show, not to which code is running. From `endS` traffic is let
     * back in linearly over `rampS` seconds (the rest is still turned away).
     */
    | { readonly kind: 'cut-traffic'; readonly when: 'always' | 'unhealthy'; readonly rampS: number }
  );

/** The Facebook 2010 world: clients → one cache tier → a database. */
export interface CacheAsideScenario extends ScenarioCommon {
  readonly world: 'cache-aside';
  /** The database: `workers` queries at a time, each taking workers/capacityQps s; beyond `maxQueue` waiting, refused at once. */
  readonly origin: { readonly capacityQps: number; readonly workers: number; readonly maxQueue: number };
  /** Freshness of cached values, s, and how long past it a value may be served stale (damper). */
  readonly cache: { readonly ttlS: number; readonly staleForS: number };
  /** Key popularity: named hot keys with their share of requests, the rest spread over `tailCount` keys. */
  readonly keys: { readonly hot: readonly { readonly key: string; readonly share: number }[]; readonly tailCount: number };
  readonly faults: readonly Fault[];
}

/** Checks a cache-aside scenario document. */
export function parseCacheAside(o: Record<string, Json>, where: string): CacheAsideScenario {
  return check(cacheAsideSchema, o, where);
}

/** The cache-aside world, for the registry in worlds.ts. */
export const cacheAside: WorldKind<CacheAsideScenario> = {
  parse: parseCacheAside,
  run: (scenario, variant, seed, onProgress) => runCacheAside(scenario, variant, seed, onProgress),
  originCapacityQps: (scenario) => scenario.origin.capacityQps,
  cached: true,
  trigger: spanAxis('invalid value held, s'),
  triggerSize: sizeAxis(
    "invalid key's share of reads",
    (s) => s.faults.find((f) => f.kind === 'invalid-value'),
    (f, s) => s.keys.hot.find((h) => h.key === f.key)!.share,
    (s, f, share) => {
      const others = s.keys.hot.reduce((sum, h) => (h.key === f.key ? sum : sum + h.share), 0);
      if (!(share > 0 && share + others <= 1)) throw new ScenarioError(s.name, [{ field: 'keys.hot', problem: `the invalid key's share must be above 0 and at most ${Number((1 - others).toFixed(6))} (the other hot keys hold ${Number(others.toFixed(6))}), got ${share}` }]);
      return { ...s, keys: { ...s.keys, hot: s.keys.hot.map((h) => (h.key === f.key ? { ...h, share } : h)) } };
    },
  ),
};

interface Request {
  readonly population: Population;
  readonly key: string;
  readonly attempt: number;
  readonly start: number;
  done: boolean;
  timeout: Timer | undefined;
}

/**
 * The world of the Facebook 2010 replay: open-loop client populations read
 * keys through a cache tier in front of a database; faults on a timeline
 * write invalid values, fix them, and cut traffic at the front door.
 *
 * Both variants get the same arrivals and keys (drawn from a source of their
 * own, seeded from the run's seed) and the same faults; they differ only in
 * their `Reader`.
 */
export async function runCacheAside(scenario: CacheAsideScenario, variant: VariantName, seed: number, onProgress?: (fraction: number) => void): Promise<VariantRun> {
  const clock = new VirtualClock({ seed });
  const traffic = seededRandom((seed ^ 0x7a3f_19c5) >>> 0);
  const recorder = new Recorder(scenario.durationS);
  const db = new Database(clock, recorder, scenario.origin);
  const picker = new KeyPicker(scenario.keys.hot, scenario.keys.tailCount);
  const reader: Reader = variant === 'naive' ? naiveReader(clock, db, scenario) : damperReader(clock, db, scenario, picker.keys.length);
  const timeline = faultTimeline(scenario.faults);
  // The run starts in steady state, not cold: the system has served for a long
  // time, so every key is cached with a remaining freshness spread evenly over
  // the ttl. (A cold start would line all expiries up and make a herd that is
  // no part of the incident.) Drawn from a stream of its own, equal for both variants.
  const prewarm = seededRandom((seed ^ 0x2c1b_3c6d) >>> 0);
  const ttlMs = scenario.cache.ttlS * 1000;
  for (const key of picker.keys) await reader.prewarm(key, db.read(key), Math.max(1, Math.ceil(prewarm() * ttlMs)));
  // The share of arrivals the front door lets in: 1, 0 while traffic is cut, rising during a ramp back.
  let admitted = 1;
  let ramp: { from: number; overMs: number } | undefined;
  const admission = seededRandom((seed ^ 0x51ed_270b) >>> 0);
  // Operator actions that were not needed (the system was healthy when they were due).
  const cancelled = new Set<Fault>();
  let pending: Request[] = [];

  const end = (req: Request, ok: boolean): void => {
    if (req.done) return;
    req.done = true;
    req.timeout?.cancel();
    const now = clock.now();
    recorder.ended(req.start, now, ok, ok && now === req.start);
    if (!ok && req.attempt < req.population.retries) {
      clock.setTimer(() => begin(req.population, req.key, req.attempt + 1), req.population.retryDelayMs);
    }
  };

  const begin = (population: Population, key: string, attempt: number): void => {
    const start = clock.now();
    recorder.started(start);
    const req: Request = { population, key, attempt, start, done: false, timeout: undefined };
    if (admitted < 1 && admission() >= admitted) {
      end(req, false);
      return;
    }
    reader.read(key, population.timeoutMs).then(
      (outcome) => {
        if (outcome instanceof Error) return end(req, false);
        if (!outcome.valid && !req.done) recorder.invalidServed++;
        end(req, outcome.valid);
      },
      () => end(req, false),
    );
    pending.push(req);
  };

  const world: World = {
    step(t) {
      let started = false;
      while (timeline.length > 0 && timeline[0]!.at <= t) {
        started = true;
        const e = timeline.shift()!;
        switch (e.fault.kind) {
          case 'invalid-value': {
            // Start: the persistent copy turns invalid and the write reaches the cache tier. End: the fix, in the database only.
            const row = db.write(e.fault.key, !e.starts);
            if (e.starts) reader.push(e.fault.key, row);
            break;
          }
          case 'cut-traffic':
            if (e.starts && e.fault.when === 'unhealthy' && recorder.recentGoodputRatio(t, scenario.objective.holdS) >= scenario.objective.goodputRatio) {
              cancelled.add(e.fault);
            } else if (!cancelled.has(e.fault)) {
              admitted = 0;
              ramp = e.starts ? undefined : { from: t, overMs: e.fault.rampS * 1000 };
            }
            break;
        }
      }
      if (ramp !== undefined) {
        admitted = ramp.overMs === 0 ? 1 : Math.min(1, (t - ramp.from) / ramp.overMs);
        if (admitted === 1) ramp = undefined;
      }
      for (const population of scenario.clients) {
        const n = poisson(population.rate / 1000, traffic);
        for (let i = 0; i < n; i++) begin(population, picker.pick(traffic), 0);
        if (n > 0) started = true;
      }
      return started;
    },
    afterStep(t) {
      // Only requests not answered at once need a timeout timer.
      for (const req of pending) {
        if (!req.done) req.timeout = clock.setTimer(() => end(req, false), req.start + req.population.timeoutMs - t);
      }
      pending = [];
    },
  };

  await simulate({ clock, world, durationMs: scenario.durationS * 1000, ...(onProgress === undefined ? {} : { onProgress }) });
  const series = recorder.series();
  return { series, summary: recorder.summary(scenario, series), skippedFaults: scenario.faults.flatMap((f, i) => (cancelled.has(f) ? [i] : [])) };
}
