import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { type AdmissionStats, type HttpDependencyStats } from '../src/http/index.js';
import { BACKEND_CAPACITY, type Command, DAMPER_SETUPS, type DamperSetupName, type Reply, type ServiceConfig, type Stack, WORLD } from './support/storm-world.js';

// A retry storm, for real (issue 17, item 4): a client, two tiers of node:http
// services and a back end that slows with concurrency, each service in a
// process of its own, on loopback. The back end is slowed for 30 s; the naive
// stack (undici's retry interceptor, 3 retries per tier) stays down after it,
// the damper stack (damperInterceptor and damperAdmission) recovers. The world
// is in support/storm-world.ts, the figures in docs/http-retry-storm.md.
//
// STORM_DAMPER=<a name in DAMPER_SETUPS> runs the damper stack with fewer of
// damper's guards: `weakened` (a retry budget of ratio 1, no admission) is
// the check that the damper test can fail.

const children: ChildProcess[] = [];

after(() => {
  // Also when a test failed or timed out: nothing is left running.
  for (const c of children) c.kill('SIGKILL');
});

interface Service {
  readonly child: ChildProcess;
  readonly origin: string;
  send(command: Command): void;
  report(): Promise<Extract<Reply, { type: 'report' }>>;
}

async function service(script: string, config: ServiceConfig, args: readonly string[] = []): Promise<Service> {
  const path = fileURLToPath(new URL(`./support/${script}.js`, import.meta.url));
  const child = fork(path, [JSON.stringify(config), ...args], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: Reply) => (m.type === 'listening' ? resolve(m.port) : reject(new Error(`${script}: ${m.type} before listening`))));
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
  const send = (command: Command): void => void child.send(command);
  const report = (): Promise<Extract<Reply, { type: 'report' }>> =>
    new Promise((resolve) => {
      child.once('message', (m: Reply) => m.type === 'report' && resolve(m));
      send({ type: 'report' });
    });
  return { child, origin: `http://127.0.0.1:${port}`, send, report };
}

interface StackServices {
  readonly backend: Service;
  readonly tier2: Service;
  readonly tier1: Service;
}

async function startStack(config: ServiceConfig): Promise<StackServices> {
  const backend = await service('storm-backend', config);
  const tier2 = await service('storm-tier', config, ['tier2', backend.origin]);
  const tier1 = await service('storm-tier', config, ['tier1', tier2.origin]);
  return { backend, tier2, tier1 };
}

function stopStack(s: StackServices): void {
  for (const x of [s.tier1, s.tier2, s.backend]) x.child.kill('SIGKILL');
}

/** One client request, by the second it was sent in. */
interface Sent {
  readonly second: number;
  good: boolean;
  settled?: boolean;
}

/** Everything measured in one run of one stack, per second from time zero. */
interface Run {
  readonly stack: Stack;
  readonly sent: number[];
  readonly good: number[];
  readonly series: Record<'backend' | 'tier2' | 'tier1', Record<string, number[]>>;
  readonly extra: Record<'backend' | 'tier2' | 'tier1', unknown>;
  /** Requests answered 200 in time, per pre-warm second (uncounted; time zero came after the last). */
  readonly prewarm: number[];
}

const sleepUntil = (at: number): Promise<void> => new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));

const SECONDS = WORLD.phases.warmup + WORLD.phases.trigger + WORLD.phases.after;
const TRIGGER_START = WORLD.phases.warmup;
const TRIGGER_END = WORLD.phases.warmup + WORLD.phases.trigger;

/** Pre-warm seconds in a row with every request answered 200 in time that make the stack warm. */
const WARM_STREAK = 2;
/** A stack still not warm after this many pre-warm seconds fails the run: it is broken, not cold. */
const MAX_PREWARM = 20;

/**
 * Drives one stack: the open-loop client at a fixed rate for every phase, the
 * trigger told to the back end at its start and end; then every request's
 * outcome (each ends by the client's timeout) and every service's counts.
 *
 * Time zero comes once the stack is warm, not after a fixed pre-warm: at
 * least `prewarm` seconds and {@link WARM_STREAK} seconds in a row fully
 * answered, then one more (the services are told time zero a second ahead).
 * On a host running at half speed, three fixed seconds were not enough: the pre-warm's last requests reached tier 1 in a burst, its throttle
 * remembered the cold start's refusals, and the damper stack lost 40 % of the
 * warm-up's first second (the warm-up judged 92 %, against 95 %).
 */
async function drive(stack: Stack, s: StackServices): Promise<Run> {
  const client = new Agent();
  // The client carries its deadline in the damper stack: the tiers below keep to it.
  const headers: Record<string, string> = stack === 'damper' ? { 'x-damper-deadline-ms': String(WORLD.client.timeoutMs) } : {};
  const rate = WORLD.client.ratePerSecond;
  const pending: Promise<void>[] = [];
  /** Sends one request; `sent.good` once it is answered 200 in time, `sent.settled` once it ends either way. */
  const send = (sent: Sent): void => {
    const started = Date.now();
    pending.push(
      request(`${s.tier1.origin}/`, { dispatcher: client, headers, signal: AbortSignal.timeout(WORLD.client.timeoutMs) })
        .then(
          async (r) => {
            await r.body.text();
            sent.good = r.statusCode === 200 && Date.now() - started <= WORLD.client.timeoutMs;
          },
          () => {},
        )
        .finally(() => (sent.settled = true)),
    );
  };
  // The pre-warm: sent the same way, counted nowhere (the services count from time zero).
  const warmStart = Date.now() + 300;
  const prewarm: Sent[][] = [];
  /** Whether pre-warm seconds [from, to) were all sent, all ended and all answered 200 in time. */
  const answered = (from: number, to: number): boolean => prewarm.slice(from, to).every((x) => x.length === rate && x.every((r) => r.settled === true && r.good));
  let zero: number | undefined;
  for (let j = 0; zero === undefined || warmStart + (j * 1000) / rate < zero; j++) {
    // Open loop: each request leaves at its own instant, whatever the earlier ones are doing.
    await sleepUntil(warmStart + (j * 1000) / rate);
    const second = Math.floor(j / rate);
    const sent: Sent = { second, good: false };
    (prewarm[second] ??= []).push(sent);
    send(sent);
    if (zero !== undefined || (j + 1) % rate !== 0) continue;
    // A second has been sent: the seconds before it have had a second at least to be answered.
    assert.ok(second + 1 < MAX_PREWARM, `the ${stack} stack was not warm after ${MAX_PREWARM} s of pre-warm at ${rate} requests/s: ${JSON.stringify(prewarm.map((x) => x.filter((r) => r.good).length))} answered per second`);
    // Time zero one second ahead, so every service is told before the first counted request.
    if (second + 1 >= WORLD.phases.prewarm && second >= WARM_STREAK && answered(second - WARM_STREAK, second)) zero = warmStart + (second + 2) * 1000;
  }
  for (const x of [s.tier1, s.tier2, s.backend]) x.send({ type: 'start', at: zero });
  const trigger = sleepUntil(zero + TRIGGER_START * 1000).then(() => s.backend.send({ type: 'slowdown', factor: WORLD.backend.slowdown }));
  const end = sleepUntil(zero + TRIGGER_END * 1000).then(() => s.backend.send({ type: 'slowdown', factor: 1 }));
  const requests: Sent[] = [];
  for (let i = 0; i < SECONDS * rate; i++) {
    await sleepUntil(zero + (i * 1000) / rate);
    const sent: Sent = { second: Math.floor(i / rate), good: false };
    requests.push(sent);
    send(sent);
  }
  await Promise.all([...pending, trigger, end]);
  await client.close();
  const [backend, tier2, tier1] = await Promise.all([s.backend.report(), s.tier2.report(), s.tier1.report()]);
  const sentPer = new Array<number>(SECONDS).fill(0);
  const goodPer = new Array<number>(SECONDS).fill(0);
  for (const r of requests) {
    sentPer[r.second]!++;
    if (r.good) goodPer[r.second]!++;
  }
  return {
    stack,
    sent: sentPer,
    good: goodPer,
    series: { backend: backend.series, tier2: tier2.series, tier1: tier1.series },
    extra: { backend: backend.extra, tier2: tier2.extra, tier1: tier1.extra },
    prewarm: prewarm.map((x) => x.filter((r) => r.good).length),
  };
}

const at = (series: Record<string, number[]>, name: string, s: number): number => series[name]?.[s] ?? 0;

/** Requests 200 within the client's timeout ÷ requests sent, over seconds [from, to). */
function goodput(run: Run, from: number, to: number): number {
  let good = 0;
  let sent = 0;
  for (let s = from; s < to; s++) {
    good += run.good[s] ?? 0;
    sent += run.sent[s] ?? 0;
  }
  return sent === 0 ? 0 : good / sent;
}

/** Health, per second: at least this share of the second's requests answered 200 in time. */
const HEALTHY = 0.9;

/**
 * How far tier 1's arrivals in a second may stray from the requests
 * scheduled in it before that second says more of the host than of the
 * stack. CI, 2026-12-05, on a host at 84 % of its usual speed: damper's
 * requests, 40 a second, reached tier 1 as 29 in second 47 and 51 in 48,
 * the burst's second read 78 % good, and a stack healthy from second 35 was
 * judged recovered 14 s after the trigger.
 */
const SCHEDULE_SLACK = 0.2;

/** Whether second `s`'s requests reached tier 1 on their schedule, give or take {@link SCHEDULE_SLACK}. */
function onSchedule(run: Run, s: number): boolean {
  const sent = run.sent[s] ?? 0;
  return Math.abs(at(run.series.tier1, 'arrivals', s) - sent) <= SCHEDULE_SLACK * sent;
}

/**
 * Seconds from the trigger's end until the stack is healthy and stays so:
 * the first second from which every later second has goodput ≥ HEALTHY,
 * the seconds whose requests the host delivered off their schedule not
 * judged. Null if it never is.
 */
function recoverySeconds(run: Run): number | null {
  let from: number | null = null;
  for (let s = SECONDS - 1; s >= TRIGGER_END; s--) {
    if (!onSchedule(run, s)) continue;
    if (goodput(run, s, s + 1) < HEALTHY) break;
    from = s;
  }
  return from === null ? null : from - TRIGGER_END;
}

/** Back-end arrivals ÷ client requests, the highest second during and after the trigger (one second's burst of retries shows in it). */
function peakAmplification(run: Run): number {
  let peak = 0;
  for (let s = TRIGGER_START; s < SECONDS; s++) peak = Math.max(peak, at(run.series.backend, 'arrivals', s) / (run.sent[s] || 1));
  return peak;
}

/** Back-end arrivals ÷ client requests over seconds [from, to). */
function amplification(run: Run, from: number, to: number): number {
  let arrivals = 0;
  let sent = 0;
  for (let s = from; s < to; s++) {
    arrivals += at(run.series.backend, 'arrivals', s);
    sent += run.sent[s] ?? 0;
  }
  return arrivals / (sent || 1);
}

interface Figures {
  readonly warmup: number;
  readonly trigger: number;
  readonly after: number;
  readonly last10: number;
  readonly peakAmplification: number;
  /** Over the after-window: what sustains the overload once the trigger is gone. */
  readonly afterAmplification: number;
  readonly recoverySeconds: number | null;
  readonly wasted: number;
  readonly backendDone: number;
}

function figures(run: Run): Figures {
  return {
    warmup: goodput(run, 0, TRIGGER_START),
    trigger: goodput(run, TRIGGER_START, TRIGGER_END),
    after: goodput(run, TRIGGER_END, SECONDS),
    last10: goodput(run, SECONDS - 10, SECONDS),
    peakAmplification: peakAmplification(run),
    afterAmplification: amplification(run, TRIGGER_END, SECONDS),
    recoverySeconds: recoverySeconds(run),
    wasted: sum(run.series.backend, 'wasted'),
    backendDone: sum(run.series.backend, 'done'),
  };
}

/** The per-second table and the figures, to be copied into docs/http-retry-storm.md. */
function print(run: Run, f: Figures): void {
  const pct = (x: number): string => `${(100 * x).toFixed(0)}%`;
  const lines = [`${run.stack}: pre-warm ${run.prewarm.length} s, answered per second ${JSON.stringify(run.prewarm)}`, `${run.stack}: s phase sent good tier1 tier2 backend served amp wasted queue t1throttle% t1open t2throttle% t2open`];
  for (let s = 0; s < SECONDS; s++) {
    const phase = s < TRIGGER_START ? 'warm' : s < TRIGGER_END ? 'SLOW' : 'after';
    const b = run.series.backend;
    const amp = at(b, 'arrivals', s) / (run.sent[s] || 1);
    lines.push(
      [s, phase, run.sent[s], pct(goodput(run, s, s + 1)), at(run.series.tier1, 'arrivals', s), at(run.series.tier2, 'arrivals', s), at(b, 'arrivals', s), at(b, 'served', s), amp.toFixed(1), at(b, 'wasted', s), at(b, 'queued', s), ...(['tier1', 'tier2'] as const).flatMap((t) => [at(run.series[t], 'throttle%', s), at(run.series[t], 'open', s)])].join(' '),
    );
  }
  const recovery = f.recoverySeconds === null ? 'never' : `${f.recoverySeconds} s`;
  lines.push(
    `${run.stack}: goodput warm-up ${pct(f.warmup)}, trigger ${pct(f.trigger)}, after ${pct(f.after)}, last 10 s ${pct(f.last10)}; amplification peak ${f.peakAmplification.toFixed(1)}×, after ${f.afterAmplification.toFixed(1)}×; recovery ${recovery}; back-end work for callers gone ${f.wasted} of ${f.backendDone}`,
  );
  lines.push(`${run.stack}: ${guards(run)}`);
  if (process.env.STORM_DEBUG) lines.push(JSON.stringify(run.extra));
  console.log(lines.join('\n'));
}

/** What a service process reports beside its counts (storm-tier.ts, storm-backend.ts): its guards, in the damper stack. */
interface ServiceExtra {
  readonly incoming?: { readonly admission: AdmissionStats };
  readonly outgoing?: HttpDependencyStats;
  readonly admission?: AdmissionStats;
}

/** What each service's guards did over the run, and the work each finished for callers who had gone. */
function guards(run: Run): string {
  const parts: string[] = [];
  for (const name of ['tier1', 'tier2', 'backend'] as const) {
    const extra = run.extra[name] as ServiceExtra;
    const said = [`answered ${sum(run.series[name], 'wasted')} after their caller had gone`];
    const admission = extra.incoming?.admission ?? extra.admission;
    if (admission !== undefined) said.push(`admitted ${admission.admitted}, shed ${admission.shed}, expired ${admission.expired}, gone ${admission.gone}`);
    const out = extra.outgoing;
    const upstream = out?.upstreams[0];
    if (out !== undefined) said.push(`retries ${out.retry.retries} of ${out.retry.calls} calls, ${out.retry.budgetRefusals} refused by the budget, breaker trips ${upstream?.breaker?.trips ?? 0}, throttled ${upstream?.throttle?.rejected ?? 0}`);
    parts.push(`${name} ${said.join('; ')}`);
  }
  return parts.join(' | ');
}

const sum = (series: Record<string, number[]>, name: string): number => (series[name] ?? []).reduce((a, b) => a + b, 0);

async function runStack(stack: Stack, setupName: DamperSetupName = 'full'): Promise<Figures> {
  const services = await startStack({ stack, setup: DAMPER_SETUPS[setupName] });
  try {
    const run = await drive(stack, services);
    if (stack === 'damper' && setupName !== 'full') console.log(`damper set up as ${setupName}: ${JSON.stringify(DAMPER_SETUPS[setupName])}`);
    const f = figures(run);
    print(run, f);
    return f;
  } finally {
    stopStack(services);
  }
}

const RUN_TIMEOUT = (MAX_PREWARM + 1 + SECONDS + 20) * 1000;

describe('a slowdown at the bottom of a call graph: retries that grow with failure keep it down after the trigger', () => {
  test('naive stack (undici retry interceptor, 3 retries per tier, no admission): stays down after the back end is fast again', { timeout: RUN_TIMEOUT }, async () => {
    const f = await runStack('naive');
    // The world is right: at 40 % of the back end's capacity, everything is answered.
    assert.ok(f.warmup >= 0.95, `warm-up goodput ${f.warmup.toFixed(2)}: the world is not healthy before the trigger`);
    // Metastable: the trigger is gone for the last 10 s, yet retries at two tiers
    // (up to 16 attempts per request) keep arrivals far above the back end's
    // capacity and its queue full of work for callers who left.
    assert.ok(f.last10 < 0.5, `naive goodput over the last 10 s ${f.last10.toFixed(2)}: it recovered`);
    // What sustains it: once the trigger is gone, retries still send the back
    // end more than its full capacity (2.5× the client's requests).
    const sustaining = BACKEND_CAPACITY / WORLD.client.ratePerSecond;
    assert.ok(f.afterAmplification > sustaining, `amplification after the trigger ${f.afterAmplification.toFixed(1)}×, not above the ${sustaining}× that exceeds the back end's capacity`);
  });

  test('damper stack (damperInterceptor under a retry budget, damperAdmission, deadlines carried): healthy within 10 s of the trigger\'s end', { timeout: RUN_TIMEOUT }, async () => {
    const setup = process.env.STORM_DAMPER ?? 'full';
    assert.ok(setup in DAMPER_SETUPS, `STORM_DAMPER must be one of ${Object.keys(DAMPER_SETUPS).join(', ')}`);
    const f = await runStack('damper', setup as DamperSetupName);
    assert.ok(f.warmup >= 0.95, `warm-up goodput ${f.warmup.toFixed(2)}: the world is not healthy before the trigger`);
    // Once the back end is fast again, nothing sustains the overload: retries
    // are at most a fifth more than the requests (plus a floor), work whose
    // caller has gone is never started, and what cannot be served is shed at
    // once. What may linger is a guard's memory: a breaker's open interval
    // (5 s ± 20 %, then a probe) and a limiter's queue timeout (1 s); 10 s is
    // that, with room. (A throttle remembers refusals for its 30 s window:
    // docs/http-retry-storm.md says when that shows, and why not here.)
    assert.ok(f.recoverySeconds !== null && f.recoverySeconds <= 10, `damper recovery ${f.recoverySeconds ?? 'never'} s after the trigger's end`);
    assert.ok(f.last10 >= HEALTHY, `damper goodput over the last 10 s ${f.last10.toFixed(2)}`);
  });
});
