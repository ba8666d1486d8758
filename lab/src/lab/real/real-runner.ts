import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { padded } from '../judge/characteristic.js';
import { Recorder } from '../judge/metrics.js';
import { type VariantName, type VariantRun } from '../judge/results.js';
import { judge } from '../judge/verdict.js';
import { type ServiceScenario } from '../schema/service.js';
import { type ProcessArgs } from './process-side.js';
import { freePort } from './loopback.js';
import { startCacheNodes } from './redis-nodes.js';
import { ProcessGroup, type RealChild } from './process-group.js';
import { RealRunError } from './real-error.js';
import { type ListenerProtocol, type ProcessReport, type ServerProcessProtocol, type UsersProtocol } from './real-messages.js';
import { startPgbouncer } from './pgbouncer.js';
import { measureSlotCost, type SlotCost } from './database-calibration.js';
import { startPostgres, type RealPostgres } from './postgres.js';
import { KeySets } from '../world/key-sets.js';
import { activeAt, serviceState } from '../world/service-faults.js';
import { cacheTierApart, checkRealPlan } from './real-plan.js';
import { type RealRun } from './real-run.js';
import { checkStackApplies } from '../stacks/peers.js';
import { type StackSpec } from '../stacks/stack.js';
import { undiciSystem } from '../stacks/undici-stack.js';
import { after, wallNowMs } from './wall-clock.js';

/** Options of one real run. */
export interface RealRunOptions {
  readonly seed: number;
  /** Seconds of unmeasured traffic before time zero (default 3): code compiled, connections open. */
  readonly warmS?: number;
  /** Told of progress: the run's second, of its horizon. */
  readonly onProgress?: (second: number, of: number) => void;
}

/** How far ahead of now time zero is set: every process must have it before it comes. */
const ZERO_AHEAD_MS = 300;
/** How long a server may take to put its data tier back in the steady state before time zero. */
const PREWARM_TIMEOUT_MS = 60_000;
/** How long after the horizon the users may take to end their last calls (beyond the longest timeout) before the run is called hung. */
const DRAIN_SLACK_MS = 30_000;

const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url));

/**
 * Runs `scenario` (fitted to the machine) on real processes on loopback, as
 * `variant`, and judges it as a simulation is judged: the same `Recorder`
 * counts the users' calls (each in the second it was sent) and the origin's
 * load (the requests sent to the servers, or with a database the servers'
 * queries to it), the same `judge` reads them. A database is a PostgreSQL
 * the run starts in its temp dir (postgres.ts), behind a pgbouncer every
 * server shares (pgbouncer.ts). The processes
 * are a `ProcessGroup`'s: whatever happens (an error, a process that dies,
 * Ctrl-C), they are stopped before this returns or the lab exits.
 */
export async function runReal(given: ServiceScenario, variant: VariantName, options: RealRunOptions): Promise<RealRun> {
  return runRealStack(given, { stack: variant, knobs: {} }, options);
}

/**
 * {@link runReal} for any stack (issue 31): a peer's client tiers are its
 * library's, in naive's system; undici's stack is naive's in undici's
 * system (its backoff), which is the scenario file every process reads.
 * `options.timeScale` is the fitting's, which a peer's own durations are
 * divided by.
 */
export async function runRealStack(given: ServiceScenario, spec: StackSpec, options: RealRunOptions & { readonly timeScale?: number }): Promise<RealRun> {
  const timeScale = options.timeScale ?? 1;
  const scenario = spec.stack === 'undici' ? undiciSystem(given, timeScale) : given;
  checkStackApplies(scenario, spec.stack);
  checkRealPlan(scenario);
  const dir = mkdtempSync(join(tmpdir(), 'damper-real-'));
  const scenarioFile = join(dir, 'scenario.json');
  writeFileSync(scenarioFile, JSON.stringify(scenario));
  const group = new ProcessGroup();
  const base = { scenarioFile, variant: spec.stack, knobs: spec.knobs, timeScale, seed: options.seed, port: 0 };
  const listen = async (name: string, module: string, args: ProcessArgs): Promise<{ child: RealChild<ListenerProtocol>; origin: string }> => {
    // A port of its own, in its arguments: a restarted server comes back on it, where its callers' connections point.
    const child = group.fork<ListenerProtocol>(name, here(module), [JSON.stringify({ ...args, port: await freePort() })]);
    const { port } = await Promise.race([child.ready(), group.failure]);
    return { child, origin: `http://127.0.0.1:${port}` };
  };
  let database: RealPostgres | undefined;
  // The servers' way to the database: pgbouncer, whose bound they share; the runner's own connection (the faults' writes) goes straight to it.
  let databasePort: number | undefined;
  let slotCost: SlotCost | undefined;
  try {
    if (scenario.database !== undefined) {
      const keys = new KeySets(scenario.clients, scenario.keys).keys;
      database = await startPostgres(group, dir, keys, scenario.database.workers);
      databasePort = (await startPgbouncer(group, dir, database.port, scenario.database)).port;
      // A query holds its slot a little past its sleep (about 1.4 ms here): measured, and taken off, so the capacity is the scenario's.
      slotCost = await measureSlotCost(databasePort, scenario.database, keys[0]!);
      await database.takeOff(slotCost.overheadMs);
    }
    const cacheNodes = scenario.cache?.nodes === undefined ? undefined : await startCacheNodes(group, dir, scenario.cache.nodes.count, base);
    const withDatabase = databasePort === undefined ? {} : { databasePort };
    const cacheTier = cacheTierApart(scenario) ? await listen('cache-tier', 'cache-tier-process.js', { ...base, index: 0, below: [], ...withDatabase }) : undefined;
    const servers = [];
    for (let i = 0; i < scenario.servers.count; i++) {
      const reach = { ...withDatabase, ...(cacheNodes === undefined ? {} : { cacheNodes: cacheNodes.ports }), ...(cacheTier === undefined ? {} : { cacheTier: Number(new URL(cacheTier.origin).port) }) };
      servers.push(await listen(`server${i}`, 'server-process.js', { ...base, index: i, below: [], ...reach }));
    }
    // Who holds the data tier, which the write path pushes into, a flush empties and the steady state is put back in: the cache tier's process, or each server.
    const holders = (cacheTier === undefined ? servers : [cacheTier]).map(({ child }) => child as RealChild<ServerProcessProtocol>);
    const listeners = [...servers];
    let below = servers.map((s) => s.origin);
    for (let t = (scenario.tiers?.count ?? 1) - 1; t >= 1; t--) {
      const tier = await listen(`tier${t}`, 'tier-process.js', { ...base, index: t, below });
      listeners.push(tier);
      below = [tier.origin];
    }
    const users = group.fork<UsersProtocol>('users', here('users-process.js'), [JSON.stringify({ ...base, index: 0, below } satisfies ProcessArgs)]);
    await Promise.race([users.ready(), group.failure]);
    const longest = Math.max(...scenario.clients.map((p) => p.timeoutMs));
    const warmS = options.warmS ?? 3;
    await Promise.race([users.request({ type: 'warm', seconds: warmS }, { timeoutMs: warmS * 1000 + longest + DRAIN_SLACK_MS }), group.failure]);
    // The steady state put back after the warm-up, before time zero, while no call is out. Done at zero instead, it held
    // each server's event loop as the run began (discord-2019's 900 keys written and restored), and the users'
    // Dependency took two of the four servers out for the run's first 30 s (as many as its ejection bound allows): the
    // other two carried every call, each within its own origin budget, and damper loaded half what it did simulated.
    await Promise.race([Promise.all(holders.map((child) => child.request({ type: 'prewarm' }, { timeoutMs: PREWARM_TIMEOUT_MS }))), group.failure]);
    const zero = group.startClock(wallNowMs() + ZERO_AHEAD_MS);
    const first = { type: 'start', zeroMs: zero, life: 'first' } as const;
    await Promise.all([...listeners.map(({ child }) => child.request(first)), cacheNodes?.pacers.request(first), cacheTier?.child.request(first)]);
    const run = users.request({ type: 'run', zeroMs: zero }, { timeoutMs: zero - wallNowMs() + scenario.durationS * 1000 + longest + DRAIN_SLACK_MS });
    const faults = scheduleFaults(scenario, group, zero, database, holders);
    const progress = everySecond(() => options.onProgress?.(Math.floor((wallNowMs() - zero) / 1000), scenario.durationS));
    try {
      await Promise.race([run, group.failure, faults.failed]);
    } finally {
      progress();
      faults.cancel();
    }
    // The origin's load: with a database, the queries the servers sent it (as the simulated database records them); without, what
    // the innermost caller sent the servers (tier-clients.ts says why: a hung server reads nothing). The tiers were started
    // innermost first, right after the servers; without tiers the users call the servers themselves.
    const usersReport = await users.request({ type: 'report' });
    const innermost = listeners[servers.length]?.child;
    const loads =
      database === undefined
        ? [innermost === undefined ? usersReport : await innermost.request({ type: 'report' })]
        : [...faults.earlier, ...(await Promise.all([...servers, ...(cacheTier === undefined ? [] : [cacheTier])].map(({ child }) => child.request({ type: 'report' }))))];
    const figures = judged(scenario, usersReport, summed(loads.map((load) => load.sent ?? [])));
    const host = await group.host(Math.ceil(scenario.durationS));
    return { ...figures, host, ...(slotCost === undefined ? {} : { database: slotCost }) };
  } finally {
    await database?.close().catch(() => {});
    await group.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Per-second counts of several processes, added second by second. */
function summed(counts: readonly (readonly number[])[]): number[] {
  const sum = Array.from({ length: Math.max(0, ...counts.map((c) => c.length)) }, () => 0);
  for (const c of counts) c.forEach((n, s) => (sum[s]! += n));
  return sum;
}

/** Calls `fn` once a second until the returned cancel is called. */
function everySecond(fn: () => void): () => void {
  let cancel = after(1000, function tick() {
    fn();
    cancel = after(1000, tick);
  });
  return () => cancel();
}

/**
 * The faults done to processes, at their instants from `zero`: a hang
 * (SIGSTOP until it ends, then SIGCONT, or a restart), an operator's
 * restart (a new process on the old one's port, told time zero again); and
 * those done to the data: an invalid value written to the database (and
 * pushed into the cache tier's `holders`, as the write path does) and fixed
 * at its end, a cache flush of the holders, a database slowdown (the knob, for queries that
 * start then). `failed` rejects if a fault cannot be done. `earlier`: what
 * each server replaced by a new process had reported by then.
 */
function scheduleFaults(scenario: ServiceScenario, group: ProcessGroup, zero: number, database: RealPostgres | undefined, holders: readonly RealChild<ServerProcessProtocol>[]): { cancel(): void; failed: Promise<never>; earlier: readonly ProcessReport[] } {
  const cancels: (() => void)[] = [];
  let fail: (error: unknown) => void = () => {};
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => {});
  const at = (s: number, action: () => Promise<unknown>): void => void cancels.push(after(zero + s * 1000 - wallNowMs(), () => void action().catch(fail)));
  // With a database, a server counts the origin's load (its queries): what a process counted is asked for while it can answer, before it is replaced.
  const earlier: ProcessReport[] = [];
  const keep = async (name: string): Promise<void> => {
    if (database !== undefined) earlier.push(await group.child<ListenerProtocol>(name).request({ type: 'report' }));
  };
  const restart = async (name: string): Promise<void> => {
    await group.restart(name);
    await group.child<ListenerProtocol>(name).request({ type: 'start', zeroMs: zero, life: 'restarted' });
  };
  const slowdownAt = (s: number): number => serviceState(scenario, activeAt(scenario, s), s).databaseSlowdown;
  for (const f of scenario.faults) {
    if (f.kind === 'invalid-value') {
      at(f.startS, async () => {
        const row = await database!.write(f.key, false);
        await Promise.all(holders.map((holder) => holder.request({ type: 'push', key: f.key, row })));
      });
      at(f.endS, () => database!.write(f.key, true));
    } else if (f.kind === 'cache-flush') {
      at(f.startS, () => Promise.all(holders.map((holder) => holder.request({ type: 'flush' }))));
    } else if (f.kind === 'slowdown' && f.target === 'database') {
      for (const b of [f.startS, f.endS]) at(b, () => database!.slowdown(slowdownAt(b)));
    } else if (f.kind === 'hang') {
      const name = `server${f.server}`;
      at(f.startS, async () => (f.then === 'restart' ? await keep(name) : undefined, await group.stop(name)));
      at(f.endS, () => (f.then === 'restart' ? restart(name) : group.cont(name)));
    } else if (f.kind === 'restart') {
      for (const i of f.servers ?? [...Array(scenario.servers.count).keys()]) at(f.startS, async () => (await keep(`server${i}`), await restart(`server${i}`)));
    }
  }
  return { cancel: () => cancels.forEach((c) => c()), failed, earlier };
}

/** The run's figures: the users' calls and the requests sent to the servers (`sent`, by second) into a `Recorder`, judged. */
function judged(scenario: ServiceScenario, users: ProcessReport, sent: readonly number[]): Omit<RealRun, 'host'> {
  const recorder = new Recorder(scenario.durationS);
  const calls = users.calls;
  if (calls === undefined) throw new RealRunError('the users reported no calls');
  const horizonMs = recorder.seconds * 1000;
  const measured = (i: number): boolean => calls[i]! >= 0 && calls[i]! < horizonMs;
  // Every call is started before any ends: the recorder counts what is in flight per second sent.
  for (let i = 0; i < calls.length; i += 3) if (measured(i)) recorder.started(calls[i]!);
  for (let i = 0; i < calls.length; i += 3) if (measured(i)) recorder.ended(calls[i]!, Math.max(calls[i]!, calls[i + 1]!), calls[i + 2] === 1 ? 'good' : 'bad');
  sent.forEach((n, s) => {
    for (let k = 0; k < n; k++) recorder.originQuery(s * 1000);
  });
  const series = recorder.series();
  const run: VariantRun = { summary: recorder.summary(scenario, series), series, characteristics: padded({}, recorder.seconds), skippedFaults: [] };
  return judge(scenario, run);
}
