#!/usr/bin/env node
// `npm test`: lint, the builds (which type-check), then every test file of the library and
// the lab, on both cores, with a budget you can see (issue 25).
//
// Why a runner of our own rather than one `node --test` per package: Node's
// runner takes one file at a time on a 2-core machine, and runs the library
// before the lab, so the real-time tests (minutes of waiting on real faults)
// and the lab's simulations (minutes of computing) never overlap. Here every
// step is a job with a CPU weight, and jobs start while their weights fit in
// the cores: a computing job weighs a whole core, and the computing jobs fill
// the cores other processes leave free; a real-time test weighs what it
// really uses (its share of one core) and runs on top of them at a higher
// priority. So waiting overlaps computing, two computing jobs never share one
// core, and a real-time test never waits for one. Each test file is still its own
// `node --test` process, and its process group is killed when it ends, so
// nothing a file starts can outlive it and slow the files after it.
//
// DAMPER_TEST_NODES: more Node binaries to run every test file on as well
// (but the few in ONE_NODE, which run on the last), separated by ':' (.ci/run
// sets the Node users run today).
// DAMPER_TEST_ONLY: a substring; only the test files whose path holds it run,
// after the builds (no lint).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, setPriority } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { clearTimeout, setInterval, setTimeout } from 'node:timers';

const ROOT = resolve(import.meta.dirname, '..');
const LAB = join(ROOT, 'lab');
const CORES = availableParallelism();
/** The cores the run may fill: see `freeCores`. */
let capacity = CORES;
/** The whole run's budget, seconds (CI gives 90 minutes; the team keeps the suite under 12). */
const BUDGET_S = 12 * 60;
/** The `nice` of computing jobs: below the real-time tests, which must never wait for a core. */
const COMPUTING_NICE = 10;
/**
 * A file still running after this long is hung: it is killed and fails. This
 * is the only time limit on the lab's computing tests: a limit of their own
 * measures the machine, not the code. CI's run on a slow day failed one: a
 * sweep test's 120 s counted the four grids it shares one worker thread
 * with, 201 s in all, where the same file took 117 s here.
 */
const FILE_LIMIT_MS = 15 * 60_000;

/**
 * Test files that mostly wait on real time (real servers, real faults, real
 * sleeps), with the share of one core each uses (the CPU seconds `npm test`
 * prints per file over its wall time, on this 2-core machine, rounded up).
 * They run at normal priority and the computing jobs at `nice` 10: a
 * real-time test whose event loop stalls fails for the machine, not for the
 * code (the retry storm's naive stack at 40 % load is metastable, and a
 * stalled loop is a trigger of its own: timeouts, then retries; a proxy that
 * adds 80 ms answers past a 300 ms attempt timeout), so it gets a core
 * whenever it asks, and the computing jobs take what is left.
 */
const REAL_TIME = new Map([
  // Averaged 0.6 of a core on a usual day, but 1.05 on a day the host ran
  // everything at half speed (2026-12-02: 167 CPU s in 158 s, alone). Beside
  // the HTTP retry storm there, its workers' Redis calls timed out before the
  // baseline was taken and both files failed (the storm's warm-up was not
  // healthy either). Weighed at the whole machine: it runs beside no other
  // real-time file (it runs on one Node: ONE_NODE).
  ['test/chaos.test.js', 2],
  // On Node 24 alone (ONE_NODE), on a usual day: 0.33 of a core on average,
  // 0.58 at the 95th percentile of its seconds, 1.2 at most (a process
  // start; 2026-12-05, the machine's CPU sampled each second while it ran
  // alone). Beside its twin on the other Node, on a host at half speed, the
  // damper stack's warm-up lost 15 % and 43 % of its first two seconds while
  // the twin's naive storm ran: on such a day every weight here doubles
  // (`share`), and it overlaps no heavy real-time file.
  ['test/http-storm.test.js', 0.8],
  // Uses 0.3 of a core, but its slow upstream is 80 ms against a 300 ms
  // attempt timeout, judged in one event loop beside the load it makes and
  // an in-process proxy: weighed at the whole machine, so it runs beside no
  // other real-time file, its own run on the other Node included. Every
  // failure seen (three clean runs on both Nodes) had that twin beside it,
  // once chaos too: the slow upstream looked dead, was ejected with the 503
  // one, and left no room to eject the hung one (or no upstream that
  // answers). On one Node (three loaded runs) it never failed.
  ['test/http-outgoing.test.js', 2],
  ['test/shared-redis.test.js', 0.6],
  ['test/redis-store.test.js', 0.3],
  ['test/fault-proxy.test.js', 0.2],
  ['test/origin-loaders.test.js', 0.4],
  ['test/observability.test.js', 0.6],
  // A Redis, then a three-node Redis Cluster; subscriptions cut for real.
  ['test/bus-gap.test.js', 0.5],
  // Expiries waited out on a Redis and a three-node Cluster.
  ['test/backend-contract.test.js', 0.3],
  // Three processes and a load generator, 1.7 cores while it runs: weighed
  // above half so it runs beside no other real-time file. Its health checks
  // (200 ms timeout, 100 ms slow) and attempt timeout (250 ms) judge real
  // latency: run niced on a machine the run itself kept busy, it failed in
  // CI (Node 20).
  ['test/example-articles.test.js', 1.5],
  // The lab against real processes (issue 30): a load generator, a tier and
  // a server, a retry storm at up to ~800 requests/s, judged against its
  // simulation by latency bars of 250 ms: 0.37 of a core on average, 0.98
  // at the 95th percentile of its seconds, 1.5 for the seconds its
  // processes start (2026-12-05, sampled as http-storm above, with the
  // balancer's run then in the same file). So it may run beside http-storm
  // on a usual day (1.8 of 2 cores), never beside real-database or chaos.
  ['lab/test/real.test.js', 1],
  // Two servers behind a balancer, one SIGSTOPped and restarted, 70–140
  // calls/s for 40 s per variant, 27 CPU s: run by hand
  // (DAMPER_REAL_BALANCER=1); in the suite it only starts and skips.
  ['lab/test/real-balancer.test.js', 0.5],
  // Processes started, frozen, killed and restarted for real: 16 CPU s in
  // 31 s on each Node (CI, 2026-12-04).
  ['lab/test/process-group.test.js', 0.6],
  // One child spins a core for a second to be measured.
  ['lab/test/host-meter.test.js', 1],
  // The lab against real processes with PostgreSQL and a cache in the
  // server (issue 30): facebook-2010's system at 1,000 reads/s for 40 s per
  // variant, judged against its simulation: 0.55 of a core on average, 1.25
  // at the 95th percentile of its seconds, 1.65 at most (2026-12-05, sampled
  // as http-storm above): weighed above half the cores so it runs beside no
  // other heavy real-time file but http-storm (event loops late are what
  // the host meter reads as the machine's). That run is by hand
  // (DAMPER_REAL_DATABASE=1: the file says why); in the suite it starts a
  // PostgreSQL and pgbouncer and stops them.
  ['lab/test/real-database.test.js', 1.2],
  // A real run's cache nodes (issue 30): a redis-server behind the pacer
  // that serves it at the scenario's pace, its rates and delays checked
  // from below only; then three of them and their pacers' process, an
  // ejection at its instant. A few CPU seconds each, mostly processes
  // starting.
  ['lab/test/real-node-pacer.test.js', 0.3],
  ['lab/test/real-cache-nodes.test.js', 0.4],
  // The tier's one cache in a process of its own (issue 30): a PostgreSQL,
  // a pgbouncer and two such processes start, then a few reads; about 4 CPU
  // s over 7 s, mostly processes starting.
  ['lab/test/real-cache-tier.test.js', 0.5],
]);

/**
 * Computing files that use less than a core (they wait on a browser or on
 * npm), with their share: niced like every computing file, since nothing in
 * them is timed, but weighed at what they use. Any file in neither map is
 * computing and weighs a whole core.
 */
const PART_CORE = new Map([
  ['test/package.test.js', 0.7],
  ['lab/test/report.browser.test.js', 0.6],
  ['lab/test/sweep-report.browser.test.js', 0.6],
  ['lab/test/fidelity-page.browser.test.js', 0.6],
]);

/**
 * Files run on one Node only, the last of the run (Node 24, the one users
 * run, under .ci/run; the machine's own when it is alone), where every other
 * file runs on each. Each is long, and its subject is not the Node it runs
 * on: on both Nodes they were 384 of the 1,458 CPU seconds of a clean run
 * (2026-12-03), and the two real-time ones 248 s of the chain of real-time
 * files, one after another, that was the run's critical path; with them on
 * both Nodes the run took 855 s against its 12-minute budget.
 */
const ONE_NODE = new Set([
  // Its subject is the faults (SIGSTOP, kill, a slow proxy) over a 129-s
  // timeline; the library's Node-specific paths under it (ioredis, pg,
  // sockets and timers) run on both Nodes in shared-redis, redis-store,
  // bus-gap, origin-loaders and backend-contract.
  'test/chaos.test.js',
  // Two 55-s storms of real HTTP; undici and node:http under damper/http run
  // on both Nodes in http-outgoing, http-hedging and http-admission.
  'test/http-storm.test.js',
  // The shipped retry storm run to its horizon, with a careless damper
  // configuration module and with three naive backoffs: the simulation's
  // subject. How a module is loaded and refused (damper-config) and the
  // client driver's backoff (lab-clients) run on both Nodes.
  'lab/test/careless-config.test.js',
  'lab/test/backoff-edge.test.js',
  // Sweep and check grids: the same simulations the scenario files
  // (lab-*.test.ts) run on both Nodes, cell after cell.
  'lab/test/sweep.test.js',
  'lab/test/check.test.js',
  // docs/lab.md's worked example: two `lab check` grids, as above.
  'lab/test/example-checkout.test.js',
  // Whole scenarios in the service world (the incidents written in it, the
  // examples): the world's parts, one by one, run on both Nodes in
  // lab-service.
  'lab/test/service-scenarios.test.js',
  // A drawn cell of every shipped check grid, to its horizon and to its
  // verdict: sweeps' simulations again (64 s on Node 20, the last file of a
  // clean run at e0c41e5); the rule itself is a property over any run.
  'lab/test/verdict-watch.test.js',
  // A real run beside its simulation: its subject is the model against the
  // machine; undici and node:http under damper/http run on both Nodes in
  // the library's http tests.
  'lab/test/real.test.js',
  'lab/test/real-balancer.test.js',
  // The tier's one cache in its own process, read over loopback sockets:
  // the real runner's wiring; sockets and pg run on both Nodes in the
  // library's tests.
  'lab/test/real-cache-tier.test.js',
  // The same with PostgreSQL behind the server; pg under damper/postgres
  // runs on both Nodes in origin-loaders.
  'lab/test/real-database.test.js',
  // The shipped incidents, whole, and their reports: the world's parts run
  // on both Nodes in lab-service, the lab's run and its determinism in
  // lab.test. On Node 20 these were 153 CPU s of a run that was CPU-bound
  // (2026-12-04: 1,477 CPU s of tests on 2 cores, 949 s).
  'lab/test/lab-facebook.test.js',
  'lab/test/lab-discord.test.js',
  'lab/test/lab-missourian.test.js',
  'lab/test/lab-retry-storm.test.js',
  // Chromium drawing the pages: its subject is the page, not the Node that
  // wrote it (the pages' HTML is written and checked on both in report.test
  // and sweep-report.test).
  'lab/test/report.browser.test.js',
  'lab/test/sweep-report.browser.test.js',
  'lab/test/fidelity-page.browser.test.js',
  // Sweeps and checks split into shards and merged by CLI processes: the
  // sweep and check simulations again, and the merge's rules (properties
  // over parts), which are the same JavaScript on either Node.
  'lab/test/sweep-shard.test.js',
  // The lab's pure computation, no process, socket, signal or module
  // loading of the Node's in them: the per-second series as CSV, the world's
  // and network's parts, the verdict rules, the run-cost estimate, the real
  // runner's fitting (28 CPU s on Node 20 of a run that was CPU-bound,
  // 2026-12-05: 1,127 CPU s of tests in 607 s). The lab's run and
  // determinism (lab.test), its world in full (lab-service), its light
  // signals against the platform's (light-abort), its configuration modules
  // (damper-config), its processes (process-group, host-meter), its pages'
  // HTML (report, fidelity-page, sweep-report) and its command line
  // (scenario, scenario-schema) stay on both.
  'lab/test/series-csv.test.js',
  'lab/test/lab-world.test.js',
  'lab/test/lab-network.test.js',
  'lab/test/verdict.test.js',
  'lab/test/verdict-low-rate.test.js',
  'lab/test/run-cost.test.js',
  'lab/test/real-fit.test.js',
  // The command line's words: usage, help, messages and exit codes, ~130
  // CLI processes (53 CPU s on Node 20). The same JavaScript on either
  // Node; what differs between them under a CLI (process exits, signals,
  // streams) the library's real-process tests run on both.
  'lab/test/cli.test.js',
]);

/**
 * Files known to take longest, started first (longest-processing-time first
 * keeps a long file from starting last); the rest follow in path order, on
 * the machine's Node before the others. Seconds on Node 20, as `npm test`
 * printed them on this 2-core machine: only the order matters.
 */
const EXPECTED_S = new Map([
  ['test/chaos.test.js', 130],
  ['test/http-storm.test.js', 130],
  ['lab/test/sweep.test.js', 100],
  ['lab/test/check.test.js', 80],
  ['lab/test/verdict-watch.test.js', 60],
  ['lab/test/real.test.js', 80],
  ['lab/test/real-balancer.test.js', 1],
  ['lab/test/real-database.test.js', 15],
  ['lab/test/example-checkout.test.js', 70],
  ['lab/test/peer-stacks.test.js', 70],
  ['lab/test/service-scenarios.test.js', 50],
  ['lab/test/lab-discord.test.js', 45],
  ['test/package.test.js', 40],
  ['lab/test/report.browser.test.js', 35],
  ['lab/test/sweep-report.browser.test.js', 35],
  ['lab/test/cli.test.js', 35],
  ['lab/test/lab-missourian.test.js', 35],
  ['lab/test/lab-service.test.js', 35],
  ['lab/test/lab-retry-storm.test.js', 30],
  ['lab/test/lab-facebook.test.js', 30],
  ['lab/test/careless-config.test.js', 20],
  ['lab/test/backoff-edge.test.js', 20],
  ['test/example-articles.test.js', 13],
  ['test/tags.test.js', 10],
]);

const nodes = [process.execPath, ...(process.env.DAMPER_TEST_NODES ?? '').split(':').filter((p) => p !== '')];
const only = process.env.DAMPER_TEST_ONLY;
const started = performance.now();
const cpuAtStart = cpuTimes();
const seconds = (ms) => (ms / 1000).toFixed(1);

/** @typedef {{ name: string, weight: number, after: string[], cwd: string, command: string, args: string[], env?: Record<string, string>, expected: number, clean?: string[], file?: string, node?: string }} Job */
/** @typedef {{ job: Job, ok: boolean, ms: number, output: string, cpuS: number | undefined }} Done */

/** @type {Job[]} */
const jobs = [];
const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const eslint = join(ROOT, 'node_modules', 'eslint', 'bin', 'eslint.js');
const node = process.execPath;

// The builds are the critical path: each test file waits for them; lint waits for nothing.
jobs.push(
  { name: 'build the library (dist/)', weight: 1, after: [], cwd: ROOT, command: node, args: [tsc, '-p', 'tsconfig.build.json'], expected: 1e6, clean: ['dist'] },
  { name: 'build the lab (lab/dist/)', weight: 1, after: ['build the library (dist/)'], cwd: LAB, command: node, args: [tsc, '-p', 'tsconfig.build.json'], expected: 1e6, clean: ['lab/dist'] },
  { name: 'build the library tests (build/)', weight: 1, after: [], cwd: ROOT, command: node, args: [tsc, '-p', 'tsconfig.test.json'], expected: 1e6, clean: ['build'] },
  { name: 'build the lab tests (lab/build/)', weight: 1, after: ['build the library (dist/)'], cwd: LAB, command: node, args: [tsc, '-p', 'tsconfig.test.json'], expected: 1e6, clean: ['lab/build'] },
);
// The builds type-check as they emit, under the same strict settings: the
// library's tests build covers src, test, bench and examples, the lab's tests
// build lab/src, lab/test and lab/examples (against the library's built
// types, as a user's code sees them). So `npm run typecheck` (all of it at
// once, without emitting) is for editors, not a job here: it cost ~18 s of CPU.
if (only === undefined) jobs.push({ name: 'lint', weight: 1, after: [], cwd: ROOT, command: node, args: [eslint, '.'], expected: 60 });

const BUILDS = ['build the library (dist/)', 'build the lab (lab/dist/)'];
const labels = new Map(nodes.map((n) => [n, spawnSync(n, ['--version'], { encoding: 'utf8' }).stdout.trim()]));

/** The test files after their build, found once it has run; `needs`: the builds they use besides their own. */
function testJobs(root, build, needs) {
  const dir = join(root, 'build', 'test');
  if (!existsSync(dir)) return [];
  const files = readdirSync(dir, { recursive: true }).filter((f) => f.endsWith('.test.js')).sort();
  return files.flatMap((f) => {
    const key = relative(ROOT, join(root, 'test', f));
    const source = key.replace(/\.js$/, '.ts');
    if (only !== undefined && !source.includes(only)) return [];
    return (ONE_NODE.has(key) ? nodes.slice(-1) : nodes).map((n) => ({
      name: `${source}${nodes.length > 1 ? ` [node ${labels.get(n)}]` : ''}`,
      weight: REAL_TIME.get(key) ?? PART_CORE.get(key) ?? 1,
      after: [...needs, build],
      cwd: root,
      command: n,
      args: ['--test', '--test-reporter=spec', join(root, 'build', 'test', f)],
      // One lab thread per file: the weights above count a computing file as one core. And the file's kind, for
      // test/runner.test.ts, which checks from inside a job that the runner really lowered a computing job's priority.
      env: { DAMPER_LAB_THREADS: '1', DAMPER_TEST_JOB: REAL_TIME.has(key) ? 'real-time' : 'computing' },
      // The other Nodes (24) run the lab about a third faster than 20.
      expected: (EXPECTED_S.get(key) ?? 0) * (n === nodes[0] ? 1 : 0.7),
      file: key,
      node: labels.get(n),
    }));
  });
}

/** @type {Map<string, Done>} */
const done = new Map();
/** @type {Set<Job>} */
const running = new Set();
/**
 * Each package's test files, and the builds they wait for. The library's use
 * the library alone, so they start without waiting for the lab's builds: the
 * real-time files, which run one after another, are the run's other critical
 * path, and they start ~20 s sooner (2026-12-02: the first began 39 s in).
 */
const suites = [
  { root: ROOT, build: 'build the library tests (build/)', needs: ['build the library (dist/)'] },
  { root: LAB, build: 'build the lab tests (lab/build/)', needs: BUILDS },
];
const expanded = new Set();

function expand() {
  for (const suite of suites) {
    if (expanded.has(suite) || ![...suite.needs, suite.build].every((b) => done.has(b))) continue;
    expanded.add(suite);
    jobs.push(...testJobs(suite.root, suite.build, suite.needs));
  }
}

const computing = (job) => job.file === undefined || !REAL_TIME.has(job.file);
/** The weight of the running jobs of one kind. */
const load = (kind) => [...running].filter((j) => computing(j) === kind).reduce((sum, j) => sum + weighed(j), 0);

/**
 * Whether `job` fits now. The computing jobs fill the cores the run may use
 * (those other processes leave free), one core each; the real-time ones fill
 * the same cores again on top, at their shares: they preempt the niced
 * computing jobs, but not another process at normal priority, so on a busy
 * machine they too fit in what it leaves (one of them heavier than that runs
 * with no other real-time job beside it).
 */
function fits(job) {
  const kind = computing(job);
  const running = load(kind);
  return running === 0 || running + weighed(job) <= capacity + 1e-9;
}

/**
 * A job's weight today. A real-time file's weight is its share of a core on
 * a usual day; on a host slower than usual (`hostSpeed`) the same work takes
 * a larger share, so it weighs more, and two that fit together on a usual
 * day run one after the other (issue 25's slow day ran everything at half
 * speed, and real-time files that shared the cores then failed). A faster
 * day changes nothing: the weights are never below a usual day's. A
 * computing job weighs its core whatever the day.
 */
function weighed(job) {
  return computing(job) ? job.weight : job.weight / Math.min(1, speed.share);
}

/** Next jobs to start: every prerequisite done, longest expected first, while the cores have room. */
function schedule() {
  expand();
  const ready = jobs.filter((j) => !done.has(j.name) && !running.has(j) && j.after.every((a) => done.has(a)));
  ready.sort((a, b) => b.expected - a.expected || a.name.localeCompare(b.name));
  for (const job of ready) {
    if (job.after.some((a) => !done.get(a).ok)) {
      finish(job, false, 0, `not run: ${job.after.filter((a) => !done.get(a).ok).join(', ')} failed\n`);
      continue;
    }
    // A job heavier than the cores (or any job on an idle machine) runs alone rather than never.
    if (running.size > 0 && !fits(job)) continue;
    start(job);
  }
  if (running.size === 0 && done.size === jobs.length) report();
}

/**
 * Gives the session `pid` leads (`detached: true` makes one) the computing
 * nice as a whole. With the kernel's autogroups on (Linux's default for
 * desktops, and this machine's: /proc/sys/kernel/sched_autogroup_enabled),
 * the CPU is shared fairly between sessions first and by nice only within
 * one, so a niced job alone in its session took as much CPU as a real-time
 * test in another: half of a core they shared, measured (9 % once its
 * session was niced). The real-time tests, which the nice exists for, were
 * starved by the very jobs meant to yield to them. The group's nice covers
 * every thread and process the job starts later. Without autogroups the
 * file is absent and the task's nice above is what counts.
 */
function deprioritizeSession(pid) {
  try {
    writeFileSync(`/proc/${pid}/autogroup`, String(COMPUTING_NICE));
  } catch {
    // No autogroups (or not Linux): nothing to do.
  }
}

/**
 * Gives the computing nice to the sessions of what a computing job started
 * in sessions of its own, which its session's nice does not reach:
 * Chromium's browser and zygote processes call setsid, so the browser
 * tests' Chromium ran at nice 0, a whole autogroup beside the real-time
 * tests (seen beside test/http-outgoing.test.ts, whose 80 ms upstream then
 * timed out three times in a row and was ejected: a clean .ci/run, Node
 * 20). Each sweep reads /proc once: a process that descends from a
 * computing job's session leader but is in another session gets the nice,
 * and so does its autogroup.
 */
function deprioritizeEscapees(leaders) {
  if (leaders.size === 0) return;
  let names;
  try {
    names = readdirSync('/proc');
  } catch {
    return; // Not Linux.
  }
  const parent = new Map();
  const session = new Map();
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // Gone meanwhile.
    }
    // After the command's name (which may hold spaces and parentheses): state, ppid, pgrp, session.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    parent.set(Number(name), Number(fields[1]));
    session.set(Number(name), Number(fields[3]));
  }
  for (const [pid, sid] of session) {
    if (leaders.has(sid)) continue;
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) {
      if (!leaders.has(p)) continue;
      try {
        setPriority(pid, COMPUTING_NICE);
      } catch {
        // Gone, or not allowed.
      }
      deprioritizeSession(pid);
      break;
    }
  }
}

/** The session leaders of the computing jobs running now. */
const computingLeaders = new Set();
/** Every half second while a computing job runs: Chromium starts its processes within its first second. */
const escapeeSweep = setInterval(() => deprioritizeEscapees(computingLeaders), 500);
escapeeSweep.unref();

function start(job) {
  running.add(job);
  for (const dir of job.clean ?? []) rmSync(join(ROOT, dir), { recursive: true, force: true });
  const t0 = performance.now();
  // A group of its own, so that whatever the file started (servers, workers, a stopped process) goes with it.
  const child = spawn(job.command, job.args, { cwd: job.cwd, env: { ...process.env, ...job.env }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  if (computing(job)) {
    // Before it starts its worker threads and processes, which inherit it.
    try {
      setPriority(child.pid, COMPUTING_NICE);
    } catch {
      // Not allowed here: the weights alone keep the cores apart.
    }
    deprioritizeSession(child.pid);
    computingLeaders.add(child.pid);
  }
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const limit = setTimeout(() => {
    output += `\n${job.name}: still running after ${FILE_LIMIT_MS / 60_000} minutes: killed\n`;
    kill(child.pid);
  }, FILE_LIMIT_MS);
  groups.add(child.pid);
  let cpuS;
  child.on('exit', () => {
    cpuS = reapedCpuS();
    // At the file's exit its group goes too: a child it left holding the output pipe would otherwise keep 'close' from coming.
    kill(child.pid);
  });
  child.on('close', (code, signal) => {
    clearTimeout(limit);
    groups.delete(child.pid);
    computingLeaders.delete(child.pid);
    running.delete(job);
    finish(job, code === 0, performance.now() - t0, output + (code === 0 ? '' : `\nexit ${code ?? signal}\n`), cpuS);
    schedule();
  });
}

let reaped = cpuTimes()?.children;

/**
 * The CPU seconds of the child just reaped (with what it waited for): the
 * growth of this process's cutime + cstime since the last reap, read in the
 * 'exit' handler, when only that child has been added. Shown beside each
 * file's time, so that the weights in REAL_TIME and PART_CORE can be kept true.
 */
function reapedCpuS() {
  const now = cpuTimes()?.children;
  if (now === undefined || reaped === undefined) return undefined;
  const ticks = now - reaped;
  reaped = now;
  return ticks / 100;
}

/** Process groups of the jobs running now. */
const groups = new Set();

function kill(pid) {
  try {
    process.kill(-pid, 'SIGCONT');
    process.kill(-pid, 'SIGKILL');
  } catch {
    // The group is gone already.
  }
}

function finish(job, ok, ms, output, cpuS) {
  done.set(job.name, { job, ok, ms, output, cpuS });
  const mark = ok ? '✔' : '✖';
  const cpu = cpuS === undefined ? '' : `, CPU ${cpuS.toFixed(1)} s`;
  process.stdout.write(`\n${mark} ${job.name} (${seconds(ms)} s${cpu}, ${seconds(performance.now() - started)} s into the run)\n`);
  if (!ok || job.file !== undefined) process.stdout.write(output.replace(/^/gm, '  '));
}

function report() {
  const all = [...done.values()];
  const failed = all.filter((d) => !d.ok);
  const files = all.filter((d) => d.job.file !== undefined).sort((a, b) => b.ms - a.ms);
  const total = (performance.now() - started) / 1000;
  process.stdout.write('\nThe ten slowest test files:\n');
  for (const d of files.slice(0, 10)) process.stdout.write(`  ${seconds(d.ms).padStart(6)} s  ${d.cpuS === undefined ? '' : `(CPU ${d.cpuS.toFixed(0).padStart(3)} s)  `}${d.job.name}\n`);
  process.stdout.write(`\n${all.length - failed.length} of ${all.length} jobs passed (${files.length} test files on ${nodes.map((n) => labels.get(n)).join(' and ')}) in ${total.toFixed(0)} s on ${CORES} cores.\n`);
  const cpu = cpuShares(cpuAtStart, cpuTimes());
  if (cpu !== undefined) {
    process.stdout.write(`The machine's CPU over the run: ${cpu.ours}% this run, ${cpu.others}% other processes, ${cpu.stolen}% stolen by the host (a virtual machine's neighbours), ${cpu.idle}% idle.\n`);
    // The lab's simulations compute on every core: another busy process halves them while the waiting tests barely notice (issue 25's slowdown).
    if (cpu.others + cpu.stolen >= 15) process.stdout.write(`WARNING: ${cpu.others + cpu.stolen}% of the machine went to other work: this run's times are not this code's.\n`);
  }
  process.stdout.write(`${speed.line}\n`);
  if (speed.share < SLOW_HOST) process.stdout.write(`WARNING: the host ran at ${Math.round(speed.share * 100)} % of its usual speed: expect every file to take about ${(1 / speed.share).toFixed(1)}× as long, whatever the code.\n`);
  if (failed.length > 0) process.stdout.write(`Failed:\n${failed.map((d) => `  ${d.job.name}\n`).join('')}`);
  if (total > BUDGET_S) process.stdout.write(`WARNING: the run took ${(total / 60).toFixed(1)} minutes, over the ${BUDGET_S / 60}-minute budget: find what slowed it (the ten slowest files above).\n`);
  process.exitCode = failed.length > 0 ? 1 : 0;
}

/**
 * The machine's CPU counters, in clock ticks (Linux /proc/stat: user, nice,
 * system, idle, iowait, irq, softirq, steal), and the CPU this runner's
 * children used (/proc/self/stat's cutime and cstime: every test file's
 * process and what it waited for); undefined elsewhere. A run that is slow
 * while other processes used much of the machine, or the host stole it (a
 * virtual machine's neighbours), was slowed from outside, not by the tests.
 */
function cpuTimes() {
  try {
    const machine = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
    // The command name, in parentheses, may hold spaces: count fields after it.
    const self = readFileSync('/proc/self/stat', 'utf8');
    const fields = self.slice(self.lastIndexOf(')') + 2).split(' ');
    return { machine, children: Number(fields[13]) + Number(fields[14]) };
  } catch {
    return undefined;
  }
}

function cpuShares(from, to) {
  if (from === undefined || to === undefined) return undefined;
  const d = to.machine.map((v, i) => v - from.machine[i]);
  const total = d.reduce((a, b) => a + b, 0);
  if (!(total > 0)) return undefined;
  const pct = (n) => Math.max(0, Math.round((100 * n) / total));
  const busy = d[0] + d[1] + d[2] + d[5] + d[6];
  const ours = to.children - from.children;
  return { ours: pct(ours), others: pct(busy - ours), stolen: pct(d[7]), idle: pct(d[3] + d[4]) };
}

/**
 * The CPU milliseconds {@link calibrate} took on this 2-core machine on a
 * usual day (2026-12-02, idle, Node 20: the fastest of five, 106–135 ms), when a clean
 * clone's `.ci/run` took 11.5 minutes. Hours before, the same code took
 * 28–33 minutes: the host ran everything at about half speed, no CPU was
 * stolen as the kernel counts it, and nothing in the run could tell. That is
 * issue 25's unexplained slowdown (the lab's files, which only compute, took
 * 744 s where they had taken 257 s): this figure tells it on the day.
 */
const CALIBRATION_USUAL_MS = 120;
/** Slower than this share of the usual speed, the run's times are the host's, and it says so. */
const SLOW_HOST = 0.67;

/**
 * A fixed piece of work shaped like a simulation's engine (a binary heap of
 * timers, a map of keys, integer arithmetic), in this process: its CPU
 * milliseconds, about 0.12 s on a usual day. Allocation-heavy work (objects,
 * promises, strings) was tried first: the garbage collector made it vary
 * 230–360 ms from one idle try to the next, this one 106–135.
 */
function calibrate() {
  const t0 = process.cpuUsage();
  const heap = new Float64Array(1 << 16);
  let size = 0;
  const swap = (i, j) => {
    const t = heap[i];
    heap[i] = heap[j];
    heap[j] = t;
  };
  const push = (v) => {
    let i = size++;
    heap[i] = v;
    while (i > 0 && heap[(i - 1) >> 1] > heap[i]) {
      swap(i, (i - 1) >> 1);
      i = (i - 1) >> 1;
    }
  };
  const pop = () => {
    const top = heap[0];
    heap[0] = heap[--size];
    for (let i = 0; ; ) {
      const l = 2 * i + 1;
      let m = i;
      if (l < size && heap[l] < heap[m]) m = l;
      if (l + 1 < size && heap[l + 1] < heap[m]) m = l + 1;
      if (m === i) return top;
      swap(i, m);
      i = m;
    }
  };
  const keys = new Map();
  let x = 12_345;
  let check = 0;
  for (let i = 0; i < 1_500_000; i++) {
    x = (Math.imul(x, 1_103_515_245) + 12_345) >>> 0;
    if (size < 60_000) push(x / 4_294_967_296 + i);
    else check += pop();
    keys.set(x & 4_095, (keys.get(x & 4_095) ?? 0) + 1);
  }
  const used = process.cpuUsage(t0);
  if (Math.round(check) + keys.size !== 477_000_334_086) throw new Error('the calibration computed something else: it is not the work CALIBRATION_USUAL_MS was measured on');
  return (used.user + used.system) / 1_000;
}

/** The host's speed against a usual day: the fastest of five calibrations (the first also compiles it), and the line that says it. */
function hostSpeed() {
  const ms = Math.min(...Array.from({ length: 5 }, calibrate));
  const share = CALIBRATION_USUAL_MS / ms;
  const line = `The host's speed: a fixed piece of work took ${ms.toFixed(0)} ms of CPU, ${CALIBRATION_USUAL_MS} ms on a usual day: ${Math.round(share * 100)} % of its usual speed.`;
  return { share, line };
}

/**
 * The cores left by other processes, measured over one second before the run
 * starts (in half cores, at least one). On a machine that is busy with other
 * work, the run's weights fit in what is left, so that its real-time tests
 * are never starved: a busy machine makes the run slower, not red.
 */
async function freeCores() {
  const before = cpuTimes();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const after = cpuTimes();
  if (before === undefined || after === undefined) return CORES;
  const d = after.machine.map((v, i) => v - before.machine[i]);
  const total = d.reduce((a, b) => a + b, 0);
  if (!(total > 0)) return CORES;
  const busyCores = ((d[0] + d[1] + d[2] + d[5] + d[6] + d[7]) / total) * CORES;
  return Math.max(1, CORES - Math.round(busyCores * 2) / 2);
}

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    for (const pid of groups) kill(pid);
    process.exit(130);
  });
}

capacity = await freeCores();
if (capacity < CORES) process.stdout.write(`Other processes are keeping ${(CORES - capacity).toFixed(1)} of the ${CORES} cores busy: the run fills ${capacity.toFixed(1)}.\n`);
const speed = hostSpeed();
process.stdout.write(`${speed.line}\n`);
schedule();
