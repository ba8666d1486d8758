// The tier's one cache of a real run, in a process of its own (`damper lab real`, `cache.scope: tier` without nodes).
//
// The simulation's tier has one cache that every server reads through:
// naive's look-aside map, or damper's `Cache`, so one load of a key serves
// every server, and a flush or an invalid value's push reaches it once.
// Here it is the same composition (server-data.ts, as a server of its own
// would build it), over PostgreSQL behind pgbouncer, and the servers read
// through it over loopback (cache-tier-link.ts). Because it is no server's
// process, a server's hang or restart leaves it whole, as the simulation's
// tier outlives its servers. Its queries are the origin's load.
import { createSystemClock } from 'damper';
import { damperSettings } from '../damper-config.js';
import { joinGroup } from './child.js';
import { processArgs } from './process-side.js';
import { type ServerProcessProtocol } from './real-messages.js';
import { OWN, serverData } from './server-data.js';
import { serveReads } from './cache-tier-link.js';

const link = joinGroup<ServerProcessProtocol>({
  start: ({ zeroMs }) => ((data.pool.sent.zero = zeroMs), null),
  report: () => ({ sent: data.pool.sent.values }),
  push: ({ key, row }) => (data.tier.push(key, row), null),
  flush: () => (data.tier.flush(), null),
  prewarm: async () => (await data.prewarm(), null),
});
const { args, scenario } = processArgs();
const clock = createSystemClock(args.seed);
/** What the tier cannot go on from ends the process, and the runner fails the run with its output. */
function fail(error: Error): never {
  console.error('cache tier:', error.message);
  process.exit(1);
}
const settings = args.variant === 'damper' ? await damperSettings(scenario, clock) : {};
// No render: a row's render (servers.missService) is a server's work, and real-plan.ts refuses it beside a tier's cache.
const data = (await serverData(scenario, args, clock, settings, undefined)) ?? fail(new Error('the cache tier’s process runs a scenario with a database'));
await data.prewarm();
const server = await serveReads(data.tier.reader(OWN), args.port, fail);
link.ready({ port: (server.address() as { port: number }).port });
