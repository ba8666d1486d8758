// A small service whose cache and guards export OpenTelemetry metrics as
// Prometheus text on /metrics. Run by the test suite (test/otel-prometheus.test.ts),
// which reads it over HTTP and checks the shipped alert rules against it.
import { createServer } from 'node:http';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { Balancer, Cache, CircuitBreaker, ConcurrencyLimiter, pipeline, Retry, RetryBudget } from 'damper';
import { instrument } from 'damper/otel';

interface User {
  id: string;
  name: string;
}

// Stands in for your database's two replicas: a query takes 50 ms (long enough that 50 users at once overlap and queue behind the limit), user "down" fails, every other id is found.
const replica = (name: string) => ({
  name,
  async findUser(id: string, _opts: { signal: AbortSignal }): Promise<User> {
    await new Promise((resolve) => setTimeout(resolve, 50));
    if (id === 'down') throw new Error(`${name}: database unavailable`);
    return { id, name: `user ${id}` };
  },
});
const replicas = new Balancer({ upstreams: ['db-a', 'db-b'].map((id) => ({ id, target: replica(id) })) });

// The exporter answers on this service's own port; it starts no server of its own.
const exporter = new PrometheusExporter({ preventServerStart: true });
const meterProvider = new MeterProvider({ readers: [exporter] });

// The origin budget: retries under one budget, a breaker, a concurrency limit.
const budget = new RetryBudget({ ratio: 0.2 });
const retry = new Retry({ budget, maxAttempts: 3 });
const breaker = new CircuitBreaker();
const limiter = new ConcurrencyLimiter({ limit: 16 });
const users = new Cache<User>({ ttl: 60_000, staleFor: 3_600_000, guard: pipeline(limiter, breaker, retry) });

// One call each; each returns the function that detaches it.
const detach = [
  instrument(users, { meterProvider, attributes: { 'damper.name': 'users' } }),
  instrument(retry, { meterProvider, attributes: { 'damper.name': 'users' } }),
  instrument(breaker, { meterProvider, attributes: { 'damper.name': 'users' } }),
  instrument(limiter, { meterProvider, attributes: { 'damper.name': 'users' } }),
  instrument(replicas, { meterProvider, attributes: { 'damper.name': 'users-db' } }),
];

const server = createServer((request, response) => {
  const url = new URL(request.url ?? '/', 'http://localhost');
  if (url.pathname === '/metrics') {
    exporter.getMetricsRequestHandler(request, response);
    return;
  }
  const id = url.pathname.replace(/^\/users\//, '');
  users.get(`user:${id}`, ({ signal }) => replicas.run((db, attempt) => db.findUser(id, { signal: attempt }), { signal })).then(
    (user) => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(user)),
    (error: unknown) => response.writeHead(503).end(String(error)),
  );
});

server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  console.log(JSON.stringify({ listening: typeof address === 'object' && address !== null ? address.port : null }));
});

process.on('SIGTERM', () => {
  for (const off of detach) off();
  server.close();
  void meterProvider.shutdown();
});
