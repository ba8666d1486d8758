// damper/http in two tiers, on loopback: a shop that calls an inventory
// service. The shop's admission reads the caller's deadline; its outgoing
// call (damperFetch) carries what is left of it to the inventory, whose own
// admission drops work whose caller has gone and sheds low priority first.
// Run: node --import tsx examples/http.ts
import { createServer, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';
import { request } from 'undici';
import { ConcurrencyLimiter, systemClock } from 'damper';
import { damperAdmission, damperFetch } from 'damper/http';

const listen = (server: Server): Promise<string> =>
  new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));

// The inventory: two requests at a time, the rest queued by priority.
const inventory = createServer(
  damperAdmission({ limiter: new ConcurrencyLimiter({ limit: 2, maxQueue: 4, shedDelay: { low: 10 } }) }, async (_req, res, scope) => {
    await new Promise((r) => setTimeout(r, 100)); // the work
    const left = scope.deadline === undefined ? null : Math.round(scope.deadline - systemClock.now() + 100);
    res.end(JSON.stringify({ left, priority: scope.priority ?? 'normal' }));
  }),
);
const inventoryOrigin = await listen(inventory);

// The shop: its call to the inventory goes through damper, and takes the incoming request's deadline.
const items = damperFetch({ upstreams: [inventoryOrigin] });
const shop = createServer(
  damperAdmission({ timeout: 2_000 }, async (_req, res) => {
    const answer = await items('http://inventory/items');
    res.writeHead(answer.status, { 'content-type': 'application/json' });
    res.end(await answer.text());
  }),
);
const shopOrigin = await listen(shop);

// 1. A caller with 800 ms: the inventory is told what is left of them when the shop calls it.
const first = await request(`${shopOrigin}/cart`, { headers: { 'x-damper-deadline-ms': '800' } });
const seen = (await first.body.json()) as { left: number; priority: string };
console.log(`the inventory was told ${seen.left > 600 && seen.left <= 800 ? 'most' : 'NOT most'} of the caller's 800 ms (${seen.left} ms left at arrival)`);

// 2. A caller with no time left: dropped before any work starts.
const late = await request(`${shopOrigin}/cart`, { headers: { 'x-damper-deadline-ms': '0' } });
await late.body.dump();
console.log(`a caller with 0 ms left: ${late.statusCode}, the handler never ran`);

// 3. A burst of low-priority calls at the inventory while critical ones wait: the low ones are shed with 503 and Retry-After.
const burst = await Promise.all(
  ['critical', 'critical', 'critical', 'low', 'low', 'low', 'low', 'low'].map(async (priority) => {
    const r = await request(`${inventoryOrigin}/items`, { headers: { 'x-damper-priority': priority } });
    await r.body.dump();
    return { priority, status: r.statusCode, retryAfter: r.headers['retry-after'] };
  }),
);
const shed = burst.filter((b) => b.status === 503);
console.log(`burst: critical ${burst.filter((b) => b.priority === 'critical' && b.status === 200).length}/3 served, low ${shed.length}/5 shed with Retry-After ${shed[0]?.retryAfter ?? 'none'}`);

await items.close();
shop.close();
inventory.close();
