import { z } from 'zod';
import { cacheWindows, fault, healthChecks, hotKey, hotKeys, origin, parsed, refined, scenario, tagged } from './common.js';

/** The name of server `i` (0-based): what a `hang-server` fault names. */
export function serverId(i: number): string {
  return `web${i + 1}`;
}

const fields = scenario(
  'web-farm',
  'The Columbia Missourian world: clients → a load balancer with health checks → `servers.count` web servers (workers, a page cache each) → one database.',
  {
    servers: z
      .strictObject({
        count: z.int().min(1).max(100).meta({ description: 'Web servers, named web1, web2…' }),
        cores: z.int().min(1).max(1024).meta({ description: 'Processors, shared by the requests in service.' }),
        workers: z.int().min(1).max(10_000).meta({ description: 'Requests served at once (worker threads: Apache’s MaxClients).' }),
        limit: z.int().min(1).max(10_000).meta({ description: 'damper only: requests admitted to run at once by the server’s ConcurrencyLimiter (the rest queue briefly or are shed).' }),
        backlog: z.int().min(0).max(1_000_000).meta({ description: 'Requests waiting for a worker beyond which connections are refused.' }),
        hitMs: z.int().min(1).max(60_000).meta({ description: 'CPU work to serve a cached page, ms.' }),
        renderMs: z.int().min(0).max(60_000).meta({ description: 'CPU work to render a page from its database row, after the query, ms.' }),
      })
      .meta({ description: 'The web servers, all alike.' }),
    balancer: healthChecks.meta({ description: 'The balancer’s health checks.' }),
    origin,
    cache: z
      .strictObject({
        ...cacheWindows,
        maxLoads: z.int().min(1).max(10_000).meta({ description: 'damper: page loads in flight per server (the origin budget).' }),
        warmRate: z.number().min(0.001).meta({ description: 'damper: loads a restarted server starts per second to warm its cache.' }),
        warmConcurrency: z.int().min(1).meta({ description: 'damper: warm-up loads in flight at once.' }),
      })
      .meta({ description: 'Each server’s page cache: freshness; for damper, the stale window, the origin budget and the warm-up of a restarted server.' }),
    keys: hotKeys({
      maxTail: 1_000_000,
      hot: z.array(hotKey).min(1, 'needs at least one page (the first is the one health checks request)'),
      description: 'Page popularity: named hot pages with their share of requests, the rest spread over `tailCount` pages. The first hot page is the one health checks request.',
    }),
  },
  tagged('kind', 'fault kind', [
    fault('traffic-spike', 'Every client population’s rate × `factor` from startS to endS (the Drudge Report link).', { factor: z.number().min(0).max(100).meta({ description: 'The rate multiplier.' }) }, true),
    fault('hang-server', 'Server `server` stops answering at startS; at endS its process is restarted, with an empty cache.', { server: z.string().min(1).meta({ description: 'The server: web1, web2… (up to servers.count).' }) }, true),
  ]),
);

/** A scenario file of the web-farm world (missourian-2010); parsed, a `WebFarmScenario` (world/web-farm.ts). */
export const webFarmSchema = refined(fields, (s, report) => {
  const ids = Array.from({ length: s.servers.count }, (_, i) => serverId(i));
  s.faults.forEach((f, i) => {
    if (f.kind === 'hang-server' && !ids.includes(f.server)) report(['faults', i, 'server'], `"${f.server}" is not a server (known: ${ids.join(', ')})`);
  });
}).transform(parsed);
