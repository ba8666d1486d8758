// The README's shared-tier example, run by the test suite against a
// redis-server it starts (test/examples.test.ts). Two caches stand for two
// processes: they share values, one loads a missing key for both, and a
// `set` in one reaches the other.
import { Cache } from 'damper';
import { RedisStore } from 'damper/redis';

interface User {
  id: string;
  name: string;
}

let queries = 0;
const db = {
  async findUser(id: string): Promise<User | undefined> {
    queries++;
    await new Promise((resolve) => setTimeout(resolve, 50));
    return { id, name: `user ${id}` };
  },
};

const port = Number(process.env['REDIS_PORT'] ?? 6379);
const [a, b] = [0, 1].map(() => {
  const store = new RedisStore({ connection: { host: '127.0.0.1', port } });
  const users = new Cache<User | undefined>({ ttl: 60_000, shared: { store, namespace: 'users' } });
  return { store, users };
}) as [{ store: RedisStore; users: Cache<User | undefined> }, { store: RedisStore; users: Cache<User | undefined> }];

// Both "processes" ask for the same cold key at once: one query in the cluster.
const [fromA, fromB] = await Promise.all([a.users.get('user:1', () => db.findUser('1')), b.users.get('user:1', () => db.findUser('1'))]);
console.log(`two processes, ${queries} query: ${fromA?.name} / ${fromB?.name}`);

// A write in one reaches the other's memory through the bus.
await a.users.set('user:1', { id: '1', name: 'renamed' });
while (b.users.peek('user:1')?.name === 'user 1') await new Promise((resolve) => setTimeout(resolve, 1));
console.log(`after a set in a: b reads ${(await b.users.get('user:1', () => db.findUser('1')))?.name}, ${queries} query in all`);

for (const { store, users } of [a, b]) {
  await users.close();
  await store.close();
}
