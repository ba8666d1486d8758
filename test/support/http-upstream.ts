// An upstream for the damper/http tests, in a process of its own so that the
// test can SIGSTOP it (a hung server whose connections stay open, as the
// Missourian's web server hung) without stopping itself. Not a test (no
// .test.ts suffix).
//
// argv[2] is its behaviour: `ok` answers 200 with its name (listening with an
// accept queue of argv[4] connections when given); `503` answers 503
// (with `Retry-After: <argv[4]>` when given); `ok-then-503` answers 200 to its
// first argv[4] requests and 503 to every later one; `stream` answers 200 and
// sends one chunk every 50 ms for argv[4] ms. argv[3] is its name. It tells the
// parent its port over IPC, then serves until killed.
import { createServer } from 'node:http';
import { type AddressInfo } from 'node:net';

const [mode = 'ok', name = 'upstream', arg] = process.argv.slice(2);

let served = 0;

const server = createServer((req, res) => {
  const seen = { name, deadline: req.headers['x-damper-deadline-ms'] ?? null, priority: req.headers['x-damper-priority'] ?? null, id: req.headers['x-test-id'] ?? null };
  served++;
  if (mode === 'ok-then-503' && served > Number(arg)) {
    res.writeHead(503, { 'content-type': 'application/json' });
    res.end(JSON.stringify(seen));
    return;
  }
  if (mode === '503') {
    res.writeHead(503, { 'content-type': 'application/json', ...(arg === undefined ? {} : { 'retry-after': arg }) });
    res.end(JSON.stringify(seen));
    return;
  }
  if (mode === 'stream') {
    res.writeHead(200, { 'content-type': 'text/plain' });
    const until = Date.now() + Number(arg ?? 1000);
    const tick = setInterval(() => {
      if (Date.now() >= until || res.destroyed) {
        clearInterval(tick);
        res.end();
      } else res.write('.');
    }, 50);
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(seen));
});

server.keepAliveTimeout = 30_000;
server.listen({ port: 0, host: '127.0.0.1', ...(mode === 'ok' && arg !== undefined ? { backlog: Number(arg) } : {}) }, () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});
// The parent gone, nothing is left behind.
process.on('disconnect', () => process.exit(0));
