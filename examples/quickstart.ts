// The README's example, run by the test suite (test/examples.test.ts).
import { Cache, ValidationError } from 'damper';

interface User {
  id: string;
  name: string;
}

// Stands in for your database.
let reads = 0;
const db = {
  async findUser(id: string, _opts: { signal: AbortSignal }): Promise<User | undefined> {
    reads++;
    return id === 'missing' ? undefined : { id, name: `user ${id}` };
  },
};

const users = new Cache<User | undefined>({
  ttl: 60_000, // fresh for a minute
  staleFor: 3_600_000, // then servable for an hour if the database fails
  validate: (u) => u === undefined || u.name.length > 0 || 'user without a name',
});

// 100 concurrent reads of a cold key: one database query.
const all = await Promise.all(Array.from({ length: 100 }, () => users.get('user:1', ({ signal }) => db.findUser('1', { signal }))));
console.log(`100 reads, ${reads} query, name: ${all[0]?.name}`);

// A missing row is cached too (negative caching): the database is not asked again.
await users.get('user:missing', ({ signal }) => db.findUser('missing', { signal }));
await users.get('user:missing', ({ signal }) => db.findUser('missing', { signal }));
console.log(`after two reads of a missing user: ${reads} queries`);

// A value that fails validation is refused and never stored.
try {
  await users.set('user:2', { id: '2', name: '' });
} catch (error) {
  if (error instanceof ValidationError) console.log(`refused: ${error.reason}`);
}
