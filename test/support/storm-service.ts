// What every service process of the retry-storm test shares: its config from
// argv, and its conversation with the test over IPC (its port when it
// listens; counting from the test's time zero; the trigger; its counts when
// asked). Not a test.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { type AddressInfo } from 'node:net';
import { type Command, type PerSecond, type Reply, type ServiceConfig } from './storm-world.js';

export function serviceConfig(): ServiceConfig {
  const text = process.argv[2];
  if (text === undefined) throw new Error('a storm service needs its ServiceConfig as JSON in argv[2]');
  return JSON.parse(text) as ServiceConfig;
}

export interface ServiceHooks {
  /** The trigger: the back end's service time is multiplied by `factor`. */
  readonly slowdown?: (factor: number) => void;
  /** What else the service reports beside its per-second counts (its guards' stats, say). */
  readonly extra?: () => unknown;
}

/**
 * Serves `listener` on loopback, counting each request as an arrival at the
 * door (before any admission: the load the service is sent, not what it lets
 * in), and answers the test.
 */
export function serve(listener: (req: IncomingMessage, res: ServerResponse) => void, series: PerSecond, hooks: ServiceHooks = {}): void {
  const send = (reply: Reply): void => void process.send?.(reply);
  const server = createServer((req, res) => {
    series.add('arrivals');
    listener(req, res);
  });
  // Keep-alive longer than any phase: the test measures the stacks, not reconnections after idle.
  server.keepAliveTimeout = 60_000;
  process.on('message', (command: Command) => {
    if (command.type === 'start') series.restart(command.at);
    else if (command.type === 'slowdown') hooks.slowdown?.(command.factor);
    else send({ type: 'report', series: series.report(), extra: hooks.extra?.() });
  });
  server.listen(0, '127.0.0.1', () => send({ type: 'listening', port: (server.address() as AddressInfo).port }));
  // The test gone, nothing is left behind.
  process.on('disconnect', () => process.exit(0));
}
