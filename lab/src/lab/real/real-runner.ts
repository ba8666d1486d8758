import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { padded } from '../judge/characteristic.js';
import { Recorder } from '../judge/metrics.js';
import { type VariantName, type VariantRun } from '../judge/results.js';
import { judge } from '../judge/verdict.js';
import { type ServiceScenario } from '../schema/service.js';
import { type Timer } from 'damper';
import { type ProcessArgs } from './process-side.js';
import { RealRunError } from './real-error.js';
import { at, type FromProcess, type ProcessReport, realClock, type ToProcess, wallNow } from './real-messages.js';
import { checkRealPlan } from './real-plan.js';
import { type RealRun } from './real-run.js';

/** Options of one real run. */
export interface RealRunOptions {
  readonly seed: number;
  /** Seconds of unmeasured traffic before time zero (default 3): code compiled, connections open. */
  readonly warmS?: number;
  /** Told of progress: the run's second, of its horizon. */
  readonly onProgress?: (second: number, of: number) => void;
}

/** How far ahead of now time zero is announced: every process must have it before it comes. */
const ZERO_AHEAD_MS = 300;

/** A process of the run and its line. */
interface Role {
  readonly name: string;
  readonly module: string;
  readonly args: ProcessArgs;
  child: ChildProcess;
  port: number;
}

const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url));

/**
 * Runs `scenario` (fitted to the machine) on real processes on loopback, as
 * `variant`, and judges it as a simulation is judged: the same `Recorder`
 * counts the users' calls (each in the second it was sent) and the servers'
 * arrivals (the origin's load), the same `judge` reads them.
 */
export async function runReal(scenario: ServiceScenario, variant: VariantName, options: RealRunOptions): Promise<RealRun> {
  checkRealPlan(scenario);
  const dir = mkdtempSync(join(tmpdir(), 'damper-real-'));
  const scenarioFile = join(dir, 'scenario.json');
  writeFileSync(scenarioFile, JSON.stringify(scenario));
  const roles: Role[] = [];
  const base = { scenarioFile, variant, seed: options.seed, port: 0 };
  try {
    const servers: Role[] = [];
    for (let i = 0; i < scenario.servers.count; i++) servers.push(await start(roles, `server${i}`, 'server-process.js', { ...base, index: i, below: [] }));
    const layers = scenario.tiers?.count ?? 1;
    let below = servers.map((s) => origin(s));
    for (let t = layers - 1; t >= 1; t--) below = [origin(await start(roles, `tier${t}`, 'tier-process.js', { ...base, index: t, below }))];
    const users = await start(roles, 'users', 'users-process.js', { ...base, index: 0, below });
    await warm(users, options.warmS ?? 3);
    const zero = wallNow() + ZERO_AHEAD_MS;
    for (const role of roles) send(role, { type: 'zero', at: zero });
    const finished = expect(users, 'finished');
    const faults = scheduleFaults(scenario, roles, zero);
    const progress = everySecond(() => options.onProgress?.(Math.floor((wallNow() - zero) / 1000), scenario.durationS));
    try {
      await Promise.race([finished, died(roles)]);
    } finally {
      progress.cancel();
      faults.forEach((f) => f.cancel());
    }
    const reports = new Map<string, ProcessReport>();
    for (const role of roles) {
      const reply = expect(role, 'report');
      send(role, { type: 'collect' });
      reports.set(role.name, ((await reply) as Extract<FromProcess, { type: 'report' }>).report);
    }
    return judged(scenario, reports, servers);
  } finally {
    for (const role of roles) stop(role);
    rmSync(dir, { recursive: true, force: true });
  }
}

function origin(role: Role): string {
  return `http://127.0.0.1:${role.port}`;
}

async function start(roles: Role[], name: string, module: string, args: ProcessArgs): Promise<Role> {
  const role: Role = { name, module, args, child: spawnRole(module, args), port: 0 };
  roles.push(role);
  const listening = (await expect(role, 'listening')) as Extract<FromProcess, { type: 'listening' }>;
  role.port = listening.port;
  return role;
}

function spawnRole(module: string, args: ProcessArgs): ChildProcess {
  return fork(here(module), [JSON.stringify(args)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

function send(role: Role, message: ToProcess): void {
  role.child.send(message);
}

/** The next message of `type` from `role`; rejects if the process exits first. */
function expect(role: Role, type: FromProcess['type']): Promise<FromProcess> {
  return new Promise((resolve, reject) => {
    const child = role.child;
    const onMessage = (message: FromProcess): void => {
      if (message.type !== type) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(message);
    };
    const onExit = (code: number | null, signal: string | null): void => reject(new RealRunError(`${role.name} exited (${signal ?? `code ${code}`}) before it said ${type}`));
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

/** Rejects when any process exits on its own while the run goes on. */
function died(roles: readonly Role[]): Promise<never> {
  return new Promise((_, reject) => {
    for (const role of roles) role.child.once('exit', (code, signal) => reject(new RealRunError(`${role.name} exited (${signal ?? `code ${code}`}) during the run`)));
  });
}

function stop(role: Role): void {
  if (role.child.exitCode === null && role.child.signalCode === null) {
    role.child.kill('SIGCONT');
    role.child.kill('SIGKILL');
  }
}

async function warm(users: Role, seconds: number): Promise<void> {
  const warmed = expect(users, 'warmed');
  send(users, { type: 'warm', seconds });
  await warmed;
}

/** The faults done to processes: a hang (SIGSTOP until it ends, then SIGCONT or a restart), an operator's restart. */
function scheduleFaults(scenario: ServiceScenario, roles: Role[], zero: number): Timer[] {
  const timers: Timer[] = [];
  const atS = (s: number, action: () => void): void => void timers.push(at(zero + s * 1000, action));
  const server = (i: number): Role => roles.find((r) => r.name === `server${i}`)!;
  for (const f of scenario.faults) {
    if (f.kind === 'hang') {
      atS(f.startS, () => server(f.server).child.kill('SIGSTOP'));
      atS(f.endS, () => (f.then === 'restart' ? void restart(server(f.server), zero) : server(f.server).child.kill('SIGCONT')));
    } else if (f.kind === 'restart') {
      for (const i of f.servers ?? [...Array(scenario.servers.count).keys()]) atS(f.startS, () => void restart(server(i), zero));
    }
  }
  return timers;
}

/** Calls `fn` once a second until cancelled. */
function everySecond(fn: () => void): Timer {
  let timer = realClock.setTimer(function tick() {
    fn();
    timer = realClock.setTimer(tick, 1000);
  }, 1000);
  return { cancel: () => timer.cancel() };
}

/** A new process in the old one's place, on its port: every open connection reset, its workers and queue free. */
async function restart(role: Role, zero: number): Promise<void> {
  stop(role);
  role.child = spawnRole(role.module, { ...role.args, port: role.port });
  await expect(role, 'listening');
  send(role, { type: 'zero', at: zero });
}

/** The run's figures: the users' calls and the servers' arrivals into a `Recorder`, judged. */
function judged(scenario: ServiceScenario, reports: ReadonlyMap<string, ProcessReport>, servers: readonly Role[]): RealRun {
  const recorder = new Recorder(scenario.durationS);
  const calls = reports.get('users')?.calls ?? [];
  const horizonMs = recorder.seconds * 1000;
  for (let i = 0; i < calls.length; i += 3) if (calls[i]! >= 0 && calls[i]! < horizonMs) recorder.started(calls[i]!);
  for (let i = 0; i < calls.length; i += 3) if (calls[i]! >= 0 && calls[i]! < horizonMs) recorder.ended(calls[i]!, Math.max(calls[i]!, calls[i + 1]!), calls[i + 2] === 1 ? 'good' : 'bad');
  for (const server of servers) {
    (reports.get(server.name)?.arrivals ?? []).forEach((n, s) => {
      for (let k = 0; k < n; k++) recorder.originQuery(s * 1000);
    });
  }
  const series = recorder.series();
  const run: VariantRun = { summary: recorder.summary(scenario, series), series, characteristics: padded({}, recorder.seconds), skippedFaults: [] };
  return { ...judge(scenario, run), host: [] };
}
