import { z } from 'zod';
import { fault, parsed, refined, retryDelay, scenario, tagged } from './common.js';

const client = refined(
  z
    .strictObject({
      layers: z.int().min(1).max(5).meta({ description: 'Tiers of clients between users and the server, each retrying at the tier below.' }),
      attemptTimeoutMs: z.int().min(1).max(600_000).meta({ description: 'The innermost tier’s timeout per attempt, ms.' }),
      retries: z.int().min(0).max(10).meta({ description: 'Retries per tier: up to (1 + retries)^layers attempts reach the server per call.' }),
      ...retryDelay.shape,
    })
    .meta({ description: 'The client stack between users and the server: tiers, the innermost’s attempt timeout, retries per tier.' }),
  retryDelay.rule,
).transform(retryDelay.parsed);

const fields = scenario(
  'retry-storm',
  'The generic retry storm: open-loop users call a server through a stack of clients that time out and retry; the server slows down the more work it holds.',
  {
    server: z
      .strictObject({
        workers: z.int().min(1).max(10_000).meta({ description: 'Requests in service at once.' }),
        baseServiceMs: z.number().min(1).max(600_000).meta({ description: 'Service time of a request on an idle server, ms.' }),
        slowdownPerInFlight: z.number().min(0).max(100).meta({ description: 'Each request the server holds (in service and queued) adds this share to every service time started.' }),
        maxQueue: z.int().min(0).max(10_000_000).meta({ description: 'Requests waiting beyond which the server refuses at once.' }),
        admissionLimit: z
          .int()
          .min(1)
          .max(1_000_000)
          .optional()
          .meta({ description: 'damper’s admission limit: requests its ConcurrencyLimiter admits at once (in service or in the server’s own queue); default: workers. Its own setting: the best one is not the worker count.' }),
      })
      .meta({ description: 'The server: service time baseServiceMs × (1 + slowdownPerInFlight × requests held) × the slowdown fault’s factor.' })
      .transform(({ admissionLimit, ...server }) => ({ ...server, admissionLimit: admissionLimit ?? server.workers })),
    client,
  },
  tagged('kind', 'fault kind', [
    fault('load-spike', 'Users’ arrival rate × `factor` from startS to endS.', { factor: z.number().min(0).max(1000).meta({ description: 'The rate multiplier.' }) }, true),
    fault('server-slowdown', 'The server’s service time × `factor` from startS to endS (for requests starting service then).', { factor: z.number().min(0.01).max(1000).meta({ description: 'The service-time multiplier.' }) }, true),
  ]),
);

/** A scenario file of the retry-storm world; parsed, a `RetryStormScenario` (world/retry-storm.ts). */
export const retryStormSchema = refined(fields, (s, report) => {
  s.clients.forEach((c, i) => {
    // Retries belong to the client stack here (client.retries), where both variants can act on them.
    if (c.retries !== 0) report(['clients', i, 'retries'], 'must be 0 in the retry-storm world: retries are the client stack\'s (client.retries)');
  });
}).transform(parsed);
