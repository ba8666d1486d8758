// The cache nodes' pacers of a real run, in a process of their own (`damper lab real`, `cache.nodes`).
//
// Each node is a real redis-server the runner started; in front of each, a
// pacer (node-pacer.ts) serves its commands at the scenario's capacity, from
// the simulation's own single-threaded node model, so a node scaled to a few
// hundred calls a second saturates as the simulation's does. The faults done
// to the nodes are applied here at their instants from time zero, as the
// simulation applies them: a slowdown (every answer later), a degradation
// (capacity × factor), an ejection (its connections closed, its data gone,
// until its empty replacement joins). The servers take the ejected nodes off
// their own rings at the same instants (server-process.ts).
import { createSystemClock } from 'damper';
import { ejectedAt, activeAt, serviceState } from '../world/service-faults.js';
import { joinGroup } from './child.js';
import { NodePacer } from './node-pacer.js';
import { atFaultBounds, processArgs } from './process-side.js';
import { type CacheNodesProtocol } from './real-messages.js';

const link = joinGroup<CacheNodesProtocol>({
  // Time zero: each fault's start and end applied at its instant.
  start: ({ zeroMs }) => (atFaultBounds(scenario, zeroMs, apply), null),
  report: () => ({ served: pacers.map((p) => p.served) }),
});
const { args, scenario } = processArgs();
const shape = scenario.cache?.nodes;
if (shape === undefined || args.cacheNodes === undefined) throw new Error('the cache nodes’ process runs a scenario with cache.nodes, and is told their ports');
const latency = shape.latency;
if (latency.kind !== 'constant') throw new Error('a real run’s cache nodes take a constant round trip (real-plan.ts refuses the others)');
const clock = createSystemClock(args.seed);
const pacers = args.cacheNodes.map((ports) => new NodePacer(clock, { capacityOps: shape.capacityOps, latencyMs: latency.ms, maxQueue: shape.maxQueue }, ports.direct));
await Promise.all(pacers.map((pacer, i) => pacer.listen(args.cacheNodes![i]!.paced)));

/** A fault that cannot be done ends the process, and the runner fails the run with its output: never a run that went on without it. */
const fail = (error: unknown): never => {
  console.error('cache nodes: a fault failed:', error);
  process.exit(1);
};

/** The nodes' state at `s` seconds: ejections and replacements first (a replacement is healthy), then each node's slowness and throughput. */
function apply(s: number): void {
  const ejected = ejectedAt(scenario, s);
  pacers.forEach((pacer, i) => {
    if (ejected.has(i) !== pacer.inCluster) return;
    if (ejected.has(i)) pacer.eject().catch(fail);
    else pacer.rejoin().catch(fail);
  });
  serviceState(scenario, activeAt(scenario, s), s).cacheNodes.forEach((state, i) => {
    const pacer = pacers[i]!;
    if (!pacer.inCluster) return;
    pacer.slowness = state.slow;
    pacer.degrade(state.keep);
  });
}

link.ready(null);
