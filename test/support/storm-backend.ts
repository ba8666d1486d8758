// The back end of the retry-storm test, in a process of its own. Not a test.
//
// It slows with concurrency, as a database or a thread pool does: a fixed
// number of work slots, each request holding one for its service time (that
// time multiplied while the test's trigger lasts), and a FIFO queue behind
// them, so latency is the queueing plus the service time, and grows with what
// is in the system. Like any node:http service that does not look, it does the
// work of a request whose caller has gone: node:http only says so to a handler
// that listens for it. What it counts is the harm: arrivals, and the work it
// finished for a caller who had gone.
//
// argv[2] is a ServiceConfig as JSON. In the damper stack the same handler
// sits behind damperAdmission, with a limiter of as many slots as it has.
import { type IncomingMessage, type ServerResponse } from 'node:http';
import { ConcurrencyLimiter } from '../../src/index.js';
import { damperAdmission } from '../../src/http/index.js';
import { serve, serviceConfig } from './storm-service.js';
import { PerSecond, WORLD } from './storm-world.js';

const config = serviceConfig();
const series = new PerSecond();
let factor = 1;
let busy = 0;
const queue: (() => void)[] = [];

function work(_req: IncomingMessage, res: ServerResponse): void {
  series.add('served');
  let gone = false;
  res.once('close', () => {
    if (!res.writableFinished) gone = true;
  });
  const job = (): void => {
    busy++;
    setTimeout(() => {
      busy--;
      series.add('done');
      if (gone) series.add('wasted');
      else res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
      queue.shift()?.();
    }, WORLD.backend.serviceMs * factor);
  };
  if (busy < WORLD.backend.slots) job();
  else queue.push(job);
  series.max('queued', queue.length);
}

// damper: admitted through a limiter of as many slots as the back end has, so what waits, waits there.
const admitted = config.stack === 'damper' && config.setup.admission ? damperAdmission({ limiter: new ConcurrencyLimiter({ limit: WORLD.backend.slots }) }, work) : undefined;
serve(admitted ?? work, series, {
  slowdown: (f) => {
    factor = f;
  },
  extra: () => ({ queued: queue.length, busy, admission: admitted?.stats(), limiter: admitted?.limiter.stats() }),
});
