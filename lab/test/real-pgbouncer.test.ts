import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadScenario } from '../src/lab/lab.js';
import { refusedByPooler } from '../src/lab/real/database-pool.js';
import { pgbouncerConfig, sharedBound } from '../src/lab/real/pgbouncer.js';

/**
 * Several servers of a real run on one database (issue 30): the simulated
 * database's one bound (`workers` at once, `maxQueue` waiting, the rest
 * refused) shared through pgbouncer, whichever server a query comes from:
 * its configuration here; the bound itself, on real processes, in
 * real-database.test.ts.
 */

describe('pgbouncer is configured from the scenario’s database: its workers the pool, workers + maxQueue its clients', () => {
  test('missourian-2010: 4 connections to PostgreSQL in transaction mode, 1,004 clients, loopback only', async () => {
    const { database } = await loadScenario('missourian-2010');
    const ini = pgbouncerConfig(database!, { port: 6500, postgresPort: 6501, authFile: '/tmp/run/pgbouncer/users.txt' });
    const settings = new Map(ini.split('\n').flatMap((line) => (line.includes(' = ') ? [line.split(' = ') as [string, string]] : [])));
    assert.equal(settings.get('pool_mode'), 'transaction');
    assert.equal(settings.get('default_pool_size'), '4');
    assert.equal(settings.get('max_db_connections'), '4');
    assert.equal(settings.get('reserve_pool_size'), '0');
    assert.equal(settings.get('max_client_conn'), String(sharedBound(database!)));
    assert.equal(sharedBound(database!), 1004);
    assert.equal(settings.get('listen_addr'), '127.0.0.1');
    assert.equal(settings.get('listen_port'), '6500');
    assert.equal(settings.get('unix_socket_dir'), '', 'no unix socket');
    assert.equal(settings.get('query_wait_timeout'), '0', 'a query waits as long as its caller does');
    assert.equal(settings.get('postgres'), 'host=127.0.0.1 port=6501 dbname=postgres user=postgres');
  });

  test('a login pgbouncer turns away at max_client_conn is the database’s refusal; other errors are not', () => {
    assert.ok(refusedByPooler(new Error('no more connections allowed (max_client_conn)')));
    assert.ok(!refusedByPooler(new Error('connection refused')));
    assert.ok(!refusedByPooler('max_client_conn'));
  });
});
