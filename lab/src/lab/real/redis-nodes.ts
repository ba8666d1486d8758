import { fileURLToPath } from 'node:url';
import { freePort, LOOPBACK } from './loopback.js';
import { type ProcessArgs } from './process-side.js';
import { type ProcessGroup, type RealChild } from './process-group.js';
import { type CacheNodesProtocol } from './real-messages.js';
import { type NodePorts } from './redis-ring.js';

const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url));

/**
 * The cache tier on nodes (`cache.nodes`): a redis-server per node on a
 * free loopback port, keeping nothing on disk (the simulation's nodes lose
 * their data when killed), and the process of their pacers in front of
 * them (cache-nodes-process.ts). `ports`: where the servers find each.
 */
export async function startCacheNodes(group: ProcessGroup, dir: string, count: number, base: Omit<ProcessArgs, 'index' | 'below'>): Promise<{ readonly ports: readonly NodePorts[]; readonly pacers: RealChild<CacheNodesProtocol> }> {
  const ports: NodePorts[] = [];
  const taken = new Set<number>();
  // Ports first, all different (a port just freed may be handed out again), then the servers, started side by side.
  const fresh = async (): Promise<number> => {
    let port = await freePort();
    while (taken.has(port)) port = await freePort();
    taken.add(port);
    return port;
  };
  for (let i = 0; i < count; i++) ports.push({ direct: await fresh(), paced: await fresh() });
  const redis = ports.map(({ direct }, i) => group.spawn(`redis${i}`, 'redis-server', ['--port', String(direct), '--bind', LOOPBACK, '--save', '', '--appendonly', 'no', '--dir', dir], { readyWhen: { kind: 'port', port: direct } }));
  await Promise.race([Promise.all(redis.map((r) => r.ready())), group.failure]);
  const pacers = group.fork<CacheNodesProtocol>('cache-nodes', here('cache-nodes-process.js'), [JSON.stringify({ ...base, index: 0, below: [], cacheNodes: ports } satisfies ProcessArgs)]);
  await Promise.race([pacers.ready(), group.failure]);
  return { ports, pacers };
}
