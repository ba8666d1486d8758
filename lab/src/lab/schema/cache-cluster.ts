import { z } from 'zod';
import { cacheWindows, origin, parsed, refined, type Report, scenario, span, tagged, when } from './common.js';

/**
 * Which cache nodes a fault hits: `nodes` (indices) or `count` (the first
 * count nodes), parsed as `nodes` (see resolveNodes). That they are nodes of
 * this cluster is the scenario's rule, which knows `nodes.count`.
 */
const nodeList = {
  nodes: z.array(z.int().min(0)).min(1, 'needs at least one node').exactOptional().meta({ description: 'The nodes, by index from 0 (or give count).' }),
  count: z.int().min(1).exactOptional().meta({ description: 'The first count nodes (or give nodes).' }),
};

interface NodeList {
  readonly nodes?: readonly number[];
  readonly count?: number;
}

function nodeListRule(f: NodeList, report: Report): void {
  if (f.nodes === undefined && f.count === undefined) report(['nodes'], 'missing (or give count)');
  if (f.nodes !== undefined && f.count !== undefined) report(['count'], 'give nodes or count, not both');
  if (f.nodes !== undefined && new Set(f.nodes).size !== f.nodes.length) report(['nodes'], 'names a node twice');
}

/** A node fault of either input form, parsed: `count` resolved into the `nodes` it names. */
type Resolved<F> = F extends NodeList ? Omit<F, 'nodes' | 'count'> & { readonly nodes: readonly number[] } : never;

function resolveNodes<F extends NodeList & { kind: string; startS: number; endS: number; label: string }>({ kind, startS, endS, label, nodes, count, ...own }: F): Resolved<F> {
  // Distributed over the union of fault kinds, which the rest of `own` does not keep apart.
  return { kind, startS, endS, label, nodes: nodes ?? Array.from({ length: count ?? 0 }, (_, i) => i), ...own } as unknown as Resolved<F>;
}

const degradeNodes = z
  .strictObject({ kind: z.literal('degrade-nodes'), ...span, ...nodeList, factor: z.number().min(0.0001).max(1).meta({ description: 'The share of their throughput the nodes keep, 0.0001 to 1.' }) })
  .meta({ description: 'From startS to endS the nodes keep `factor` of their throughput: their queues grow, their answers slow down.' });

const failNodes = z.strictObject({ kind: z.literal('fail-nodes'), ...span, ...nodeList }).meta({ description: 'From startS to endS the nodes refuse every call (their data survives).' });

const ejectNodes = z
  .strictObject({ kind: z.literal('eject-nodes'), ...span, ...nodeList, when, trigger: z.boolean().default(false).meta({ description: 'Part of the incident’s cause; by default an operator’s action.' }) })
  .meta({ description: 'At startS the nodes are ejected from the ring (their keys move to the other nodes, cold); at endS empty replacements join.' });

const clusterFault = tagged('kind', 'fault kind', [
  refined(degradeNodes, nodeListRule).transform((f) => ({ ...f, trigger: true })),
  refined(failNodes, nodeListRule).transform((f) => ({ ...f, trigger: true })),
  refined(ejectNodes, nodeListRule),
]);

const fields = scenario(
  'cache-cluster',
  'The Discord 2019 world: clients → web/API processes → a cache cluster on a hash ring → a database.',
  {
    nodes: z
      .strictObject({
        count: z.int().min(1).max(1000).meta({ description: 'Cache nodes.' }),
        capacityOps: z.number().min(1).meta({ description: 'Calls per second each node serves.' }),
        latencyMs: z.int().min(0).max(10_000).meta({ description: 'Round trip of a call, ms.' }),
        maxQueue: z.int().min(0).meta({ description: 'Calls waiting beyond which a node refuses.' }),
        vnodes: z.int().min(1).max(10_000).default(160).meta({ description: 'Points per node on the hash ring.' }),
      })
      .meta({ description: 'The cache cluster: `count` nodes, each serving `capacityOps` calls/s with `latencyMs` round trip, refusing beyond `maxQueue` waiting; `vnodes` ring points per node.' }),
    processes: z.int().min(1).max(1000).meta({ description: 'Web/API processes; requests are spread over them round-robin. Each has its own in-process cache in the damper variant.' }),
    origin,
    cache: z
      .strictObject({
        ...cacheWindows,
        processEntries: z.int().min(1).max(10_000_000).exactOptional().meta({ description: 'How many keys each process’s in-memory cache holds (damper; least recently used first out); default: every key.' }),
      })
      .meta({ description: 'Freshness of cached values, s, how long past it a value may be served stale (damper), and the size of each process’s cache.' }),
    keys: z.record(z.string(), z.int().min(1).max(1_000_000)).meta({ description: 'Keys per client population (by its name): each reads its own keys (`<name>:<i>`) uniformly.' }),
  },
  clusterFault,
);

/** A scenario file of the cache-cluster world (discord-2019); parsed, a `CacheClusterScenario` (world/cache-cluster.ts). */
export const cacheClusterSchema = refined(fields, (s, report) => {
  s.faults.forEach((f, i) => {
    f.nodes?.forEach((n, j) => {
      if (n >= s.nodes.count) report(['faults', i, 'nodes', j], `must be a node index from 0 to ${s.nodes.count - 1}, got ${n}`);
    });
    if (f.count !== undefined && f.count > s.nodes.count) report(['faults', i, 'count'], `must be ≤ nodes.count (${s.nodes.count}), got ${f.count}`);
  });
  const names = new Set<string>();
  s.clients.forEach((c, i) => {
    if (names.has(c.name)) report(['clients', i, 'name'], `"${c.name}" is used twice`);
    names.add(c.name);
    if (s.keys[c.name] === undefined) report(['keys', c.name], 'missing (keys per client population)');
  });
  for (const name of Object.keys(s.keys)) if (!names.has(name)) report(['keys', name], 'names no client population');
})
  // Keys in the order of the populations, as the world draws them.
  .transform((s) => ({ ...parsed(s), keys: Object.fromEntries(s.clients.map((c) => [c.name, s.keys[c.name]!])), faults: s.faults.map(resolveNodes) }));
