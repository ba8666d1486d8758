import { VirtualClock } from 'damper';
import { Clients, type RunOptions } from '../clients.js';
import { Recorder } from '../metrics.js';
import { Network } from '../network.js';
import { type VariantName, type VariantRun } from '../results.js';
import { type FaultSpanDoc, type Json, type ScenarioCommon, ScenarioError, sizeAxis, spanAxis } from '../scenario.js';
import { cacheAsideSchema } from '../schema/cache-aside.js';
import { check } from '../schema/problems.js';
import { remainingFreshness, stream, STREAMS } from '../streams.js';
import { type WorldKind } from '../worlds.js';
import { KeyPicker } from '../traffic.js';
import { Database } from './database.js';
import { damperSettings } from '../damper-config.js';
import { TrafficCut } from './traffic-cut.js';
import { damperReader, naiveReader, type Reader } from './readers.js';
import { DamperGauges } from '../damper-gauges.js';
import { LabCounters } from '../lab-counters.js';

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
  run: (scenario, variant, seed, options) => runCacheAside(scenario, variant, seed, options),
  originCapacityQps: (scenario) => scenario.origin.capacityQps,
  cached: () => true,
  trigger: spanAxis('invalid value held (s)'),
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

/**
 * The world of the Facebook 2010 replay: open-loop client populations read
 * keys through a cache tier in front of a database; faults on a timeline
 * write invalid values, fix them, and cut traffic at the front door.
 *
 * Both variants get the same arrivals and keys and the same faults; they
 * differ only in their `Reader`.
 */
export async function runCacheAside(scenario: CacheAsideScenario, variant: VariantName, seed: number, options: RunOptions = {}): Promise<VariantRun> {
  const clock = new VirtualClock({ seed });
  const recorder = new Recorder(scenario.durationS);
  const network = new Network(clock, scenario.network.hopDelay, seed);
  const db = new Database(clock, recorder, scenario.origin, network);
  const picker = new KeyPicker(scenario.keys.hot, scenario.keys.tailCount);
  let reader: Reader;
  let characteristics: LabCounters | DamperGauges;
  if (variant === 'naive') {
    const counters = new LabCounters(clock);
    reader = naiveReader(clock, db, scenario, counters.cache(''));
    characteristics = counters;
  } else {
    const gauges = new DamperGauges(clock);
    reader = damperReader(clock, db, scenario, picker.keys.length, await damperSettings(scenario, clock), gauges.watch);
    characteristics = gauges;
  }
  const freshness = remainingFreshness(seed, scenario.cache.ttlS * 1000);
  for (const key of picker.keys) await reader.prewarm(key, db.read(key), freshness());
  const door = new TrafficCut(stream(seed, STREAMS.admission));
  const pick = (random: () => number): string => picker.pick(random);
  const clients = new Clients<Fault>(
    { clock, recorder, scenario, seed, network, characteristics },
    {
      send(req, replies) {
        if (door.turnsAway()) replies.fail(req);
        else reader.read(req, replies);
      },
      fault({ fault, starts }, t) {
        switch (fault.kind) {
          case 'invalid-value': {
            // Start: the persistent copy turns invalid and the write reaches the cache tier. End: the fix, in the database only.
            const row = db.write(fault.key, !starts);
            if (starts) reader.push(fault.key, row);
            break;
          }
          case 'cut-traffic':
            door.cut(t, starts ? undefined : fault.rampS * 1000);
            break;
        }
      },
      keys: () => pick,
      everyStep: (t) => door.update(t),
    },
  );
  await clients.run(options);
  return clients.result();
}
