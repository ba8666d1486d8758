import { z } from 'zod';
import { cacheWindows, fault, hotKey, hotKeys, nonNegative, origin, parsed, refined, scenario, tagged, when } from './common.js';

const fields = scenario(
  'cache-aside',
  'The Facebook 2010 world: clients → one cache tier → a database.',
  {
    origin,
    cache: z.strictObject(cacheWindows).meta({ description: 'Freshness of cached values, s, and how long past it a value may be served stale (damper).' }),
    keys: hotKeys({
      maxTail: 10_000_000,
      hot: z.array(hotKey),
      description: 'Key popularity: named hot keys with their share of requests, the rest spread over `tailCount` keys.',
    }),
  },
  tagged('kind', 'fault kind', [
    fault('invalid-value', 'The origin’s copy of `key` becomes invalid at `startS` and is fixed at `endS`; the write also reaches the cache tier.', { key: z.string().min(1).meta({ description: 'A hot key (one of keys.hot).' }) }, true),
    fault(
      'cut-traffic',
      'Operators turn traffic away at the front door from `startS` to `endS`, then let it back in linearly over `rampS` seconds.',
      { when, rampS: nonNegative('Seconds over which traffic is let back in after endS (at most durationS).').default(0) },
      false,
    ),
  ]),
);

/** A scenario file of the cache-aside world (facebook-2010); parsed, a `CacheAsideScenario` (world/cache-aside.ts). */
export const cacheAsideSchema = refined(fields, (s, report) => {
  const hot = new Set(s.keys.hot.map((h) => h.key));
  s.faults.forEach((f, i) => {
    if (f.kind === 'invalid-value' && !hot.has(f.key)) report(['faults', i, 'key'], `"${f.key}" is not one of keys.hot`);
    if (f.kind === 'cut-traffic' && f.rampS > s.durationS) report(['faults', i, 'rampS'], `must be ≤ durationS (${s.durationS}), got ${f.rampS}`);
  });
}).transform(parsed);
