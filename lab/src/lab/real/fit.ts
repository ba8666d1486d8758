import { DamperError } from 'damper';
import { meanMs } from '../engine/delay.js';
import { type ScenarioProblem, triggerEndS } from '../scenario.js';
import { scenarioJsonSchema } from '../schema/index.js';
import { type NumericField, numericFields, outOfRange } from '../schema/numeric-fields.js';
import { type FieldStep, formatFieldPath, parseFieldPath } from '../sweep/field-path.js';
import { readRate } from '../world/key-sets.js';
import { rampAt } from '../world/service-faults.js';
import { type Scenario } from '../world/worlds.js';
import { exponentForHitRatio } from '../world/zipf.js';
import { type FitRounding, type Fitting } from './real-run.js';

/**
 * Fitting a scenario to this machine (issue 30, item 2): a production
 * scenario does not fit two cores and three minutes, so `damper lab real`
 * runs it scaled, and its simulation runs the same scaled scenario, so the
 * two are compared like for like. Two factors, each keeping the dynamics:
 *
 * - `scale` s: every rate, capacity and concurrency bound × s (workers,
 *   queues, pools, keys, users…): each server is as busy as before, each
 *   queue waits as long, each key is read as often. The topology (counts of
 *   servers, tiers, cache nodes) does not change.
 * - `timeScale` k: every duration ÷ k, every rate and capacity × k: the same
 *   run, played k times faster. Concurrency bounds stay (Little's law: k×
 *   the rate for 1/k of the time holds as many at once).
 *
 * Every numeric field of a scenario file is classified in {@link FIELD_KINDS}
 * (a test fails on a field that is not), and whether it is whole and its
 * range come from the file's JSON Schema. A fitting that would make a whole
 * number fractional, leave a field's range, or go past the limits where
 * loopback stops reproducing the model ({@link MIN_SERVICE_MS},
 * {@link MIN_TIMEOUT_MS}, {@link MAX_REQUESTS_PER_S}) is refused with a
 * {@link FittingError}: nothing is rounded away silently.
 *
 * Not fitted, because not in the scenario: the damper variant's own
 * durations, from a configuration module or the library's defaults (breaker
 * windows, retry-budget windows, a shed's Retry-After). Time-scaling makes
 * them relatively longer; the simulation runs them alike, so simulated and
 * real stay like for like.
 */

/** No fitting: the scenario as written. */
export const DEFAULT_FITTING: Fitting = { scale: 1, timeScale: 1 };

/**
 * The shortest service time (a `service` or `missService` delay's constant,
 * mean or median) a time-scale may leave, ms. A real server's work is a
 * timer, and each request crosses loopback: measured on this 2-core machine
 * (busy with other work, load 8–10), `setTimeout(n)` fires 0.15–0.26 ms late
 * at the median (p90 0.2–1.4 ms), and a keep-alive node:http round trip on
 * loopback takes 0.2–0.6 ms at the median. About half a millisecond per
 * request is then 10 % of 5 ms, and more than the whole of 1 ms: below the
 * floor a server's real capacity (workers ÷ service time) is no longer the
 * modelled one. A scenario's own shorter service time is left as written (a
 * fitting does not make it worse), but none is shortened below the floor.
 *
 * The floor guards a capacity, so it holds only where the service time
 * bounds one: a pool's whose workers the run can fill ({@link poolsThatNeverBind}:
 * facebook-2010's web tier of 100,000 workers at 1 ms bounds nothing, and its
 * half-millisecond of overhead per request only adds latency), and the
 * database's (`workers × 1000 ÷ capacityQps`: its queries are its capacity).
 * On a pool of cores it holds a request's time in service when the pool
 * binds, not its work ({@link floorShares}).
 */
export const MIN_SERVICE_MS = 5;

/**
 * The shortest timeout, or latency bound (`objective.p99Ms`), a time-scale
 * may leave, ms: the client timeouts, attempt timeouts, hedge delays, timer
 * ticks, probe and load timeouts, the naive breaker's open time. A timeout
 * races the answer's real time, which carries every hop's overhead and the
 * timer's own lateness: measured at p99, 1.3–10 ms for `setTimeout` and 5–11
 * ms for a loopback round trip on this machine under load. At 100 ms that tail
 * is at most a tenth of the timeout. As with {@link MIN_SERVICE_MS}, a
 * scenario's own shorter timeout is left as written.
 */
export const MIN_TIMEOUT_MS = 100;

/**
 * The most requests a second a fitted scenario may make over loopback HTTP
 * at its worst ({@link peakRequestsPerS}: at its peak load, every attempt
 * retried and hedged at every tier, as naive's retry storm does). Measured
 * on this 2-core machine (busy with other work): 9,000–13,000 requests/s
 * between two Node processes doing nothing else, keep-alive, 16 to 64 in
 * flight: both cores full. A real run also runs the servers' work, the cache
 * and the database, and samples the host every second; 5,000 leaves it
 * about half the machine. Unlike the floors, this bound is the machine's,
 * whatever the scenario asked for: a scenario past it needs a smaller scale.
 */
export const MAX_REQUESTS_PER_S = 5_000;

/**
 * The most a fitting may move a whole number to keep it whole, as a share of
 * it. A pool of 1.2 workers is no pool and a hold of 7.5 s is not the
 * scenario's, so a whole number a fitting splits is refused, unless the
 * nearest whole number is within 1 % of it: then it is rounded, and the
 * rounding said ({@link fitRoundings}). discord-2019's counts are the case:
 * at scale 1/3 its database's 3 workers become 1, but its 845 entries per
 * server 281.67 (282 holds the same 94 % of the fitted keys) and its servers'
 * 100,000 workers, which never bind, 33,333.3; without the rounding, no scale
 * but 1 kept every count whole, and scale 1 sends more calls than this host
 * carries. The simulation runs the same rounded scenario, so the comparison
 * stays like for like.
 */
export const MAX_ROUNDING = 0.01;

/**
 * How a field of a scenario moves when it is fitted:
 *
 * - `duration`: ÷ timeScale (a time, s or ms);
 * - `service`: a duration, and a service time: {@link MIN_SERVICE_MS};
 * - `timeout`: a duration, and a timeout or latency bound: {@link MIN_TIMEOUT_MS};
 * - `rate`: × scale × timeScale (per second: rates and throughput capacities);
 * - `amount`: × scale (what the load holds at once or spreads over: workers,
 *   queue and pool bounds, cores, closed-loop users, keys, cache entries);
 * - `perAmount`: ÷ scale (an effect per request held);
 * - `fixed`: unchanged (topology, shares, ratios, retry counts, indices);
 * - `axis`: a `check` axis's value, in its axis's unit (load and
 *   trigger-size: fixed, trigger: a duration, a field: that field's kind).
 */
export type FieldKind = 'duration' | 'service' | 'timeout' | 'rate' | 'amount' | 'perAmount' | 'fixed' | 'axis';

/** The powers of scale and timeScale that a kind is multiplied by. */
const POWERS: Readonly<Record<Exclude<FieldKind, 'axis'>, readonly [scale: number, timeScale: number]>> = {
  duration: [0, -1],
  service: [0, -1],
  timeout: [0, -1],
  rate: [1, 1],
  amount: [1, 0],
  perAmount: [-1, 0],
  fixed: [0, 0],
};

const FLOORS: Readonly<Partial<Record<FieldKind, { readonly ms: number; readonly name: string; readonly why: string }>>> = {
  service: { ms: MIN_SERVICE_MS, name: 'MIN_SERVICE_MS', why: 'loopback HTTP and Node’s timers add about half a millisecond to every request' },
  timeout: { ms: MIN_TIMEOUT_MS, name: 'MIN_TIMEOUT_MS', why: 'a timer’s lateness and the hops’ overhead reach 10 ms at p99 on loopback' },
};

/** A delay's numbers: its constant, mean or median (of `kind`), and a lognormal's spread, which is a ratio. */
function delayFields(at: string, kind: 'duration' | 'service'): Record<string, FieldKind> {
  return { [`${at}.ms`]: kind, [`${at}.meanMs`]: kind, [`${at}.medianMs`]: kind, [`${at}.sigma`]: 'fixed' };
}

/** A retry backoff's waits: durations with no floor (a wait's lateness delays a retry, it costs no capacity). */
function backoffFields(at: string): Record<string, FieldKind> {
  return { [`${at}.delayMs`]: 'duration', [`${at}.baseMs`]: 'duration', [`${at}.maxMs`]: 'duration' };
}

/** A pool of servers: its size per server scales, its count does not. */
function poolFields(at: string): Record<string, FieldKind> {
  return {
    [`${at}.count`]: 'fixed',
    [`${at}.workers`]: 'amount',
    [`${at}.maxQueue`]: 'amount',
    // Processor sharing: the same load per core.
    [`${at}.cores`]: 'amount',
    ...delayFields(`${at}.service`, 'service'),
    // Per request held: × scale as many held, so ÷ scale each, the slowdown kept.
    [`${at}.slowdownPerInFlight`]: 'perAmount',
    [`${at}.admissionLimit`]: 'amount',
  };
}

/**
 * Every numeric field of a service scenario file, by its pattern (as
 * problems name fields, list indices as `[]`: see schema/numeric-fields.ts),
 * and how fitting moves it. The one table: a field missing here fails
 * test/real-fit.test.ts, so a field added to the schema cannot go unscaled.
 */
export const FIELD_KINDS: Readonly<Record<string, FieldKind>> = {
  durationS: 'duration',
  'baseline.fromS': 'duration',
  'baseline.toS': 'duration',
  // The latency bound is judged on real answers, which carry the hops' overhead.
  'objective.p99Ms': 'timeout',
  'objective.goodputRatio': 'fixed',
  'objective.holdS': 'duration',

  'clients[].rate': 'rate',
  'clients[].timeoutMs': 'timeout',
  'clients[].retries': 'fixed',
  'clients[].retryDelayMs': 'duration',
  ...backoffFields('clients[].backoff'),
  // Closed loop: more users is more load; each user's own rate follows the time-scale by itself (its think time and its answers are k× shorter).
  'clients[].users': 'amount',
  // A think time of the 1 ms default means "none": a floor would refuse every closed loop.
  ...delayFields('clients[].thinkTime', 'duration'),
  // A population's own keys, × scale with its rate: each key is read as often, so its hit ratio is kept.
  'clients[].keys.count': 'amount',
  'clients[].keys.exponent': 'fixed',
  'clients[].tiers[].retries': 'fixed',
  ...backoffFields('clients[].tiers[].backoff'),

  'faults[].startS': 'duration',
  'faults[].endS': 'duration',
  'faults[].rampS': 'duration',
  // A share kept, a multiplier, a load factor: ratios whatever the kind.
  'faults[].factor': 'fixed',
  'faults[].profile[][0]': 'duration',
  'faults[].profile[][1]': 'fixed',
  'faults[].server': 'fixed',
  'faults[].servers[]': 'fixed',
  'faults[].nodes[]': 'fixed',

  'check.axes[].from': 'axis',
  'check.axes[].to': 'axis',
  'check.axes[].margin': 'axis',
  'check.steps': 'fixed',

  'tiers.count': 'fixed',
  'tiers.attemptTimeoutMs': 'timeout',
  'tiers.each[].retries': 'fixed',
  ...backoffFields('tiers.each[].backoff'),
  'tiers.each[].attemptTimeoutMs': 'timeout',
  // The tick decides when an attempt's timeout fires: it is one.
  'tiers.each[].timerTickMs': 'timeout',
  'tiers.each[].hedgeAfterMs': 'timeout',
  ...poolFields('tiers.each[].servers'),

  'balancer.intervalS': 'duration',
  'balancer.timeoutMs': 'timeout',
  // Probes in a row: a count of events, not of load.
  'balancer.fall': 'fixed',
  'balancer.rise': 'fixed',

  ...poolFields('servers'),
  ...delayFields('servers.missService', 'service'),
  // A pool per server, and × scale as many queries per server.
  'servers.databaseConnections': 'amount',

  'database.capacityQps': 'rate',
  // With capacityQps × scale, each query keeps its time (workers ÷ capacityQps).
  'database.workers': 'amount',
  'database.maxQueue': 'amount',

  'cache.ttlS': 'duration',
  'cache.staleForS': 'duration',
  'cache.loadTimeoutMs': 'timeout',
  'cache.warm.rate': 'rate',
  'cache.warm.concurrency': 'amount',
  'cache.nodes.count': 'fixed',
  'cache.nodes.capacityOps': 'rate',
  // A round trip adds latency, not a cost on a pool: no floor (the timeouts it races have theirs).
  ...delayFields('cache.nodes.latency', 'duration'),
  'cache.nodes.maxQueue': 'amount',
  'cache.nodes.vnodes': 'fixed',
  'cache.nodes.connections': 'amount',
  // × scale with the keys: each server's memory holds the same share of them.
  'cache.processEntries': 'amount',
  'cache.originRateQps': 'rate',
  'cache.naive.commandTimeoutMs': 'timeout',
  // Failures in a row: how likely a run of them is depends on the failure ratio, not on the rate.
  'cache.naive.breaker.failures': 'fixed',
  'cache.naive.breaker.openMs': 'timeout',
  'cache.naive.queryRetries': 'fixed',

  // × scale with the rate: each key is read as often (Zipf's shape over the ranks is kept for exponents up to 1; a hitRatio is found again: see fitScenario).
  'keys.count': 'amount',
  'keys.exponent': 'fixed',
  'keys.hitRatio': 'fixed',
  'keys.hot[].share': 'fixed',

  ...delayFields('network.hopDelay', 'duration'),
};

/** A fitting refused: one line per problem, `<scenario>: <field>: <why>`, each naming the value, what it would become and what would fit instead. */
export class FittingError extends DamperError {
  readonly problems: readonly ScenarioProblem[];

  constructor(scenario: string, problems: readonly ScenarioProblem[]) {
    if (problems.length === 0) throw new Error('damper: a FittingError needs a problem');
    super('FITTING', problems.map((p) => [scenario, p.field, p.problem].filter((part) => part !== '').join(': ')).join('\n'));
    this.problems = problems;
  }
}

/** One number of the scenario: where, what it is, and what fitting made of it. */
interface Site {
  /** As problems name it (a closed loop's `clients[0].users`, not the parsed `clients[0].closed.users`). */
  readonly field: string;
  readonly kind: FieldKind;
  readonly schema: NumericField;
  readonly value: number;
  readonly fitted: number;
}

let schemaFields: ReadonlyMap<string, NumericField> | undefined;

/** The file's numeric fields, from its JSON Schema, read once. */
function fieldsOfSchema(): ReadonlyMap<string, NumericField> {
  schemaFields ??= numericFields(scenarioJsonSchema('service'));
  return schemaFields;
}

/**
 * `scenario` (parsed) fitted to the machine: every field moved as
 * {@link FIELD_KINDS} says, then, with `durationS`, its horizon cut (after
 * the time-scale) to that many seconds: faults past it dropped, ends clipped
 * to it. A new scenario: the input is not changed. Scale 1 and time-scale 1
 * without `durationS` give a scenario deep-equal to the input. Anything the
 * fitting cannot keep faithful is a {@link FittingError} listing every
 * problem.
 */
export function fitScenario(scenario: Scenario, fitting: Fitting & { readonly durationS?: number }): Scenario {
  const problems: ScenarioProblem[] = factorProblems(fitting);
  if (problems.length > 0) throw new FittingError(scenario.name, problems);
  const sites: Site[] = [];
  let fitted = fitNumbers(scenario, fitting, sites);
  problems.push(...siteProblems(sites, fitting, floorShares(fitted)), ...databaseServiceProblems(scenario, fitted, fitting));
  if (fitting.durationS !== undefined) {
    const need = triggerEndS(fitted) + fitted.objective.holdS;
    if (fitting.durationS < need) problems.push({ field: 'durationS', problem: `${fitting.durationS} s ends before the last trigger’s end (${round(triggerEndS(fitted))} s, fitted) and objective.holdS (${round(fitted.objective.holdS)} s) after it: give at least ${round(need)} s` });
    else fitted = cutAt(fitted, fitting.durationS);
  }
  fitted = withHitRatioKept(fitted, problems);
  problems.push(...capacityDropProblems(scenario, fitted, fitting.scale), ...keyProblems(fitted), ...rateProblems(fitted, fitting));
  if (problems.length > 0) throw new FittingError(scenario.name, problems);
  return fitted;
}

function factorProblems(fitting: Fitting & { readonly durationS?: number }): ScenarioProblem[] {
  const problems: ScenarioProblem[] = [];
  for (const name of ['scale', 'timeScale'] as const) {
    const v = fitting[name];
    if (!(Number.isFinite(v) && v > 0)) problems.push({ field: name, problem: `must be a number above 0, got ${v}` });
  }
  const d = fitting.durationS;
  const range = d === undefined ? undefined : Number.isFinite(d) ? outOfRange(fieldsOfSchema().get('durationS')!, d) : 'not a number';
  if (range !== undefined) problems.push({ field: 'durationS', problem: `${d} s is ${range}` });
  return problems;
}

/** Every number of `scenario` moved by its kind; each one's site pushed to `sites`. */
function fitNumbers(scenario: Scenario, fitting: Fitting, sites: Site[]): Scenario {
  const walk = (value: unknown, steps: readonly FieldStep[], parent: unknown): unknown => {
    if (typeof value === 'number') return fitNumber(value, steps, parent, fitting, sites);
    if (Array.isArray(value)) return value.map((item, i) => walk(item, [...steps, i], value));
    if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([name, item]) => [name, walk(item, [...steps, name], value)]));
    return value;
  };
  return walk(scenario, [], undefined) as Scenario;
}

function fitNumber(value: number, parsedSteps: readonly FieldStep[], parent: unknown, fitting: Fitting, sites: Site[]): number {
  const steps = fileSteps(parsedSteps);
  const field = formatFieldPath(steps);
  const pattern = patternOf(steps);
  const kind = kindAt(pattern, field);
  const schema = fieldsOfSchema().get(pattern);
  if (schema === undefined) throw new Error(`damper: fit.ts: ${field} is in FIELD_KINDS but not in the scenario's JSON Schema`);
  const fitted = moved(value, kind === 'axis' ? axisKind((parent as { axis: string }).axis) : kind, fitting);
  sites.push({ field, kind, schema, value, fitted });
  return schema.integer && roundable(fitted) ? Math.round(fitted) : fitted;
}

/**
 * The parsed scenario's path as the file names it: a closed loop's `users`
 * and `thinkTime` are parsed into `closed` (schema/common.ts).
 */
function fileSteps(steps: readonly FieldStep[]): readonly FieldStep[] {
  return steps[0] === 'clients' && steps[2] === 'closed' ? [...steps.slice(0, 2), ...steps.slice(3)] : steps;
}

/** `clients[0].keys.count` → `clients[].keys.count`; a tuple's position is kept (`faults[].profile[][0]`) when the table says so. */
function patternOf(steps: readonly FieldStep[]): string {
  const general = steps.map((s) => (typeof s === 'number' ? '[]' : s));
  const pattern = formatFieldPath(general).replaceAll('.[]', '[]');
  const last = steps.at(-1);
  if (Object.hasOwn(FIELD_KINDS, pattern) || typeof last !== 'number') return pattern;
  return `${pattern.slice(0, -2)}[${last}]`;
}

function kindAt(pattern: string, field: string): FieldKind {
  if (!Object.hasOwn(FIELD_KINDS, pattern)) throw new Error(`damper: fit.ts: no kind for ${field} (${pattern}): classify it in FIELD_KINDS`);
  return FIELD_KINDS[pattern]!;
}

/** A check axis's unit: load and trigger-size are factors, trigger is seconds, a field path is that field's. */
function axisKind(axis: string): Exclude<FieldKind, 'axis'> {
  if (axis === 'load' || axis === 'trigger-size') return 'fixed';
  if (axis === 'trigger') return 'duration';
  const kind = FIELD_KINDS[patternOf(parseFieldPath(axis, 'check'))];
  return kind === undefined || kind === 'axis' ? 'fixed' : kind;
}

/** `value` moved as `kind` says; a power of 0 leaves it untouched, so the identity fitting changes no bit. */
function moved(value: number, kind: Exclude<FieldKind, 'axis'>, { scale, timeScale }: Fitting): number {
  const [byScale, byTime] = POWERS[kind];
  let v = value;
  // Multiply or divide rather than × s^-1: 2000 ÷ 2.5 is 800 exactly, 2000 × 0.4 need not be.
  if (byScale > 0) v *= scale;
  if (byScale < 0) v /= scale;
  if (byTime > 0) v *= timeScale;
  if (byTime < 0) v /= timeScale;
  return v;
}

/** Whole but for floating-point noise (1000 × 0.3 is 300.00000000000006). */
function isWhole(x: number): boolean {
  return Math.abs(x - Math.round(x)) <= 1e-9 * Math.max(1, Math.abs(x));
}

/** Whole, or a whole number a fitting may round it to ({@link MAX_ROUNDING}). */
function roundable(x: number): boolean {
  return isWhole(x) || (Math.round(x) !== 0 && Math.abs(x - Math.round(x)) <= MAX_ROUNDING * Math.abs(x));
}

/**
 * The whole numbers {@link fitScenario} rounds for `fitting`
 * ({@link MAX_ROUNDING}), in the file's order; none for a fitting that
 * keeps every whole number whole. A real run says them beside its figures.
 */
export function fitRoundings(scenario: Scenario, fitting: Fitting): readonly FitRounding[] {
  const sites: Site[] = [];
  fitNumbers(scenario, fitting, sites);
  return sites.filter((s) => s.schema.integer && !isWhole(s.fitted) && roundable(s.fitted)).map((s) => ({ field: s.field, value: s.value, fitted: s.fitted, rounded: Math.round(s.fitted) }));
}

/** What the sites' values became that the schema or the floors refuse; `shares`: the share of the service floor under each pool's service times ({@link floorShares}). */
function siteProblems(sites: readonly Site[], fitting: Fitting, shares: ReadonlyMap<string, number>): ScenarioProblem[] {
  const problems: ScenarioProblem[] = [];
  for (const site of sites) {
    if (site.kind === 'axis' || site.fitted === site.value) continue;
    const how = howMoved(site, fitting);
    if (site.schema.integer && !roundable(site.fitted)) problems.push({ field: site.field, problem: `${site.value} ${how} is ${round(site.fitted)}, not a whole number: ${wholeHint(site, sites, fitting)}` });
    const held = site.schema.integer && roundable(site.fitted) ? Math.round(site.fitted) : site.fitted;
    const range = outOfRange(site.schema, held);
    if (range !== undefined) problems.push({ field: site.field, problem: `${site.value} ${how} is ${round(site.fitted)}, ${range}` });
    const floor = FLOORS[site.kind];
    const share = site.kind === 'service' ? ([...shares].find(([pool]) => site.field.startsWith(`${pool}.`))?.[1] ?? 1) : 1;
    const least = floor === undefined ? 0 : floor.ms * share;
    // The scenario's own value below the floor stands (time-scale 1 or less); a shorter one is the fitting's doing.
    if (floor !== undefined && site.fitted < least && site.fitted < site.value) {
      const what = share === 1 ? `${floor.name} (${floor.ms} ms),` : `${round(least)} ms, ${floor.name} (${floor.ms} ms) × ${round(share)}, the share of the cores a request holds when the pool binds,`;
      problems.push({ field: site.field, problem: `${site.value} ms ${how} is ${round(site.fitted)} ms, below ${what} where ${floor.why}: time-scale at most ${round(Math.max(1, site.value / least))}` });
    }
  }
  return problems;
}

function howMoved(site: Site, { scale, timeScale }: Fitting): string {
  const [byScale, byTime] = POWERS[site.kind as Exclude<FieldKind, 'axis'>];
  const parts = [byScale > 0 ? `× scale ${scale}` : byScale < 0 ? `÷ scale ${scale}` : '', byTime > 0 ? `× time-scale ${timeScale}` : byTime < 0 ? `÷ time-scale ${timeScale}` : ''];
  return parts.filter((p) => p !== '').join(' ');
}

/** The nearest factors that keep every whole number of the site's sort whole (or roundable, {@link MAX_ROUNDING}): counts for a scale, whole durations for a time-scale. */
function wholeHint(site: Site, sites: readonly Site[], fitting: Fitting): string {
  const byScale = site.kind === 'amount';
  const whole = sites.filter((s) => s.schema.integer && s.value !== 0 && s.kind !== 'axis' && (byScale ? s.kind === 'amount' : POWERS[s.kind as Exclude<FieldKind, 'axis'>][1] < 0));
  const g = whole.reduce((d, s) => gcd(d, s.value), 0);
  const target = byScale ? fitting.scale : fitting.timeScale;
  // Scales j/g keep every count whole, and j/v for a count v keeps v whole (the others may round);
  // time-scales d/q with d dividing g keep every whole duration whole.
  const candidates = byScale ? [g, ...whole.map((s) => s.value)].flatMap((v) => [Math.floor(target * v), Math.ceil(target * v)].filter((j) => j > 0).map((j) => j / v)) : divisors(g).flatMap((d) => Array.from({ length: 10 }, (_, q) => d / (q + 1)));
  // A scale may leave large counts to round; the time-scales offered keep every whole duration exactly whole.
  const keeps = (f: number): boolean => whole.every((s) => (byScale ? roundable(s.value * f) : isWhole(s.value / f)));
  const fine = [...new Set(candidates.map((c) => Math.round(c * 1000) / 1000))].filter((c) => c > 0 && keeps(c));
  const below = Math.max(...fine.filter((c) => c < target));
  const above = Math.min(...fine.filter((c) => c > target));
  const nearest = [below, above].filter(Number.isFinite);
  const what = byScale ? 'scales that keep every count whole' : 'time-scales that keep every whole duration whole';
  return nearest.length === 0 ? `no ${what.replace('scales', 'scale')} is near` : `the nearest ${what}: ${nearest.join(' or ')}`;
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

function divisors(n: number): number[] {
  const found: number[] = [];
  for (let d = 1; d * d <= n; d++) if (n % d === 0) found.push(d, n / d);
  return found;
}

function round(x: number): number {
  return Number(x.toPrecision(6));
}

/**
 * The scenario run to `horizon` s: faults that start at or after it are
 * dropped (they never happen within the run), ends past it clipped to it,
 * and a load ramp cut where its fault now ends.
 */
function cutAt(scenario: Scenario, horizon: number): Scenario {
  const faults = scenario.faults
    .filter((f) => f.startS < horizon)
    .map((f) => {
      if (f.endS <= horizon) return f;
      const clipped = { ...f, endS: horizon };
      if (clipped.kind === 'cut-traffic') return { ...clipped, rampS: Math.min(clipped.rampS, horizon) };
      if (clipped.kind !== 'load-ramp') return clipped;
      const spanS = horizon - clipped.startS;
      const kept = clipped.profile.filter(([t]) => t <= spanS);
      return { ...clipped, profile: kept.at(-1)![0] === spanS ? kept : [...kept, [spanS, rampAt(clipped.profile, spanS)] as [number, number]] };
    });
  return { ...scenario, durationS: horizon, faults };
}

/**
 * A `keys.hitRatio` is what the file asked for: its exponent (found when the
 * file was read, for the scenario's own keys, rates and ttl) is found again
 * for the fitted ones. Zipf's shape is not the same over × scale as many
 * keys; the hit ratio, which the dynamics depend on, is.
 */
function withHitRatioKept(scenario: Scenario, problems: ScenarioProblem[]): Scenario {
  const { keys, cache } = scenario;
  if (keys?.hitRatio === undefined || cache === undefined) return scenario;
  const rate = scenario.clients.reduce((sum, c) => (c.keys === undefined ? sum + readRate(c) : sum), 0);
  const found = exponentForHitRatio(keys.count, rate, cache.ttlS, keys.hitRatio, keys.hot);
  if (!found.reached) problems.push({ field: 'keys.hitRatio', problem: `${keys.hitRatio} is out of reach once fitted: ${keys.count} keys read ${round(rate)} times a second and kept ${round(cache.ttlS)} s hit ${round(found.range[0])} to ${round(found.range[1])}` });
  return { ...scenario, keys: { ...keys, exponent: found.exponent } };
}

/**
 * A capacity drop keeps `factor` of a server's workers, rounded and at least
 * one (world/service-best.ts): at a scale the rounding can keep another
 * share than the scenario's (2 of 4 workers, but 1 of 1), and the trigger
 * would not be the same.
 */
function capacityDropProblems(scenario: Scenario, fitted: Scenario, scale: number): ScenarioProblem[] {
  const kept = (workers: number, factor: number): number => Math.max(1, Math.round(workers * factor));
  const problems: ScenarioProblem[] = [];
  scenario.faults.forEach((f, i) => {
    if (f.kind !== 'capacity-drop' || !Number.isInteger(fitted.servers.workers)) return;
    const own = kept(scenario.servers.workers, f.factor);
    const now = kept(fitted.servers.workers, f.factor);
    if (!isWhole(own * scale) || Math.round(own * scale) !== now) {
      problems.push({ field: `faults[${i}].factor`, problem: `keeps ${own} of ${scenario.servers.workers} workers; at scale ${scale} it would keep ${now} of ${fitted.servers.workers}, not ${round(own * scale)}: the trigger would not be the same` });
    }
  });
  return problems;
}

/** An invalid-value fault names a key by its rank: with fewer keys, it must still be one. */
function keyProblems(fitted: Scenario): ScenarioProblem[] {
  const problems: ScenarioProblem[] = [];
  fitted.faults.forEach((f, i) => {
    if (f.kind !== 'invalid-value') return;
    const rank = /^(.*):(\d+)$/.exec(f.key);
    if (rank === null || fitted.keys?.hot?.some((h) => h.key === f.key) === true) return;
    const count = rank[1] === 'key' ? fitted.keys?.count : fitted.clients.find((c) => c.name === rank[1])?.keys?.count;
    if (count !== undefined && Number(rank[2]) >= count) problems.push({ field: `faults[${i}].key`, problem: `"${f.key}" is not one of the fitted keys (${rank[1]}:0 … ${rank[1]}:${count - 1}): name a more popular one, or give a larger scale` });
  });
  return problems;
}

/**
 * How many times the most requests a pool can ever hold at once its workers
 * must be to bound nothing: arrivals come in bursts (Poisson), and a retry
 * storm's peak is an estimate.
 */
const NEVER_BINDS_MARGIN = 2;

/**
 * The pools of servers (`servers`, `tiers.each[i].servers`) whose workers
 * never all fill in `fitted`: more than {@link NEVER_BINDS_MARGIN} × the
 * most requests the run can hold at once, its peak requests a second
 * ({@link peakRequestsPerS}) each held at most as long as any can be (the
 * longest timeout a caller or a server waits, the database's full queue
 * drained, and the pool's own service). Such a pool's service time is
 * latency, not capacity, so no service floor applies to it. A pool of cores
 * always binds: its service time is work that shares them ({@link floorShares}).
 */
export function poolsThatNeverBind(fitted: Scenario): string[] {
  if (fitted.world !== 'service') return [];
  const db = fitted.database;
  const drainMs = db === undefined ? 0 : ((db.workers + db.maxQueue) * 1000) / db.capacityQps;
  const waitMs = Math.max(...fitted.clients.map((c) => c.timeoutMs), fitted.cache?.loadTimeoutMs ?? 0);
  const peak = peakRequestsPerS(fitted);
  return servicePools(fitted).filter(([, pool]) => pool.cores === undefined && pool.workers > (NEVER_BINDS_MARGIN * peak * (waitMs + drainMs + meanMs(pool.service))) / 1000).map(([at]) => at);
}

type ServicePool = Pick<Extract<Scenario, { world: 'service' }>['servers'], 'workers' | 'cores' | 'service'>;

/** A service scenario's pools of servers, by their path in the file: `servers`, and each tier's own (`tiers.each[i].servers`). */
function servicePools(fitted: Extract<Scenario, { world: 'service' }>): [string, ServicePool][] {
  const pools: [string, ServicePool][] = [['servers', fitted.servers]];
  fitted.tiers?.each?.forEach((t, i) => t.servers !== undefined && pools.push([`tiers.each[${i}].servers`, t.servers]));
  return pools;
}

/**
 * The share of {@link MIN_SERVICE_MS} that holds under each pool's service
 * times in `fitted`, by the pool's path: 0 for a pool that never binds
 * ({@link poolsThatNeverBind}); for a pool of cores, its cores ÷ its
 * workers (at most 1); 1 for the rest. A pool of cores shares them among the
 * requests it serves, and counts their work by the real time elapsed
 * (`world/cpu.ts`): a timer that fires late holds only the finishing
 * request's share of the cores, cores ÷ the requests running, and the rest
 * go on being served. Such a pool binds once its workers fill, every one
 * running a request, so the capacity a late timer costs is its lateness over
 * a request's time in service then, its work × workers ÷ cores: that time is
 * what the floor holds. missourian-2010's web servers (2 ms pages fitted, 75
 * workers on 5 cores: 30 ms in service) agreed on every judged figure in
 * three real runs per variant where the bare work was below the floor
 * (docs/lab.md, "Measured"). Near the point where the pool starts to bind,
 * with barely more requests than cores, a late timer costs up to the whole
 * floor's share again: a scenario whose figures hang on that point is the
 * noisier for it.
 */
function floorShares(fitted: Scenario): Map<string, number> {
  const shares = new Map<string, number>();
  if (fitted.world !== 'service') return shares;
  const never = poolsThatNeverBind(fitted);
  for (const [at, pool] of servicePools(fitted)) shares.set(at, never.includes(at) ? 0 : pool.cores === undefined ? 1 : Math.min(1, pool.cores / pool.workers));
  return shares;
}

/** The database's service time (`workers × 1000 ÷ capacityQps`, its queries' time in PostgreSQL) shortened below {@link MIN_SERVICE_MS}. */
function databaseServiceProblems(scenario: Scenario, fitted: Scenario, { timeScale }: Fitting): ScenarioProblem[] {
  if (scenario.world !== 'service' || fitted.world !== 'service' || scenario.database === undefined || fitted.database === undefined) return [];
  const serviceMs = (d: { workers: number; capacityQps: number }): number => (d.workers * 1000) / d.capacityQps;
  const own = serviceMs(scenario.database);
  const now = serviceMs(fitted.database);
  if (now >= MIN_SERVICE_MS || now >= own) return [];
  return [{ field: 'database.capacityQps', problem: `makes each query ${round(own)} ms of the database’s time, ${round(now)} ms ÷ time-scale ${timeScale}, below MIN_SERVICE_MS (${MIN_SERVICE_MS} ms), where ${FLOORS.service!.why}: time-scale at most ${round(Math.max(1, own / MIN_SERVICE_MS))}` }];
}

function rateProblems(fitted: Scenario, { scale, timeScale }: Fitting): ScenarioProblem[] {
  const peak = peakRequestsPerS(fitted);
  if (peak <= MAX_REQUESTS_PER_S) return [];
  // Every request rate is × scale × time-scale: the largest scale that fits at this time-scale.
  const most = (scale * MAX_REQUESTS_PER_S) / peak;
  return [{ field: 'clients', problem: `would send up to ${Math.round(peak)} requests/s over loopback HTTP at its peak (every attempt retried and hedged at every tier), above MAX_REQUESTS_PER_S (${MAX_REQUESTS_PER_S}) that this machine serves beside the rest of a run: at time-scale ${timeScale}, give scale at most ${round(most)}` }];
}

/**
 * The most requests a second `scenario` makes over HTTP between its
 * processes, at its worst: each population's calls at the peak load its
 * faults give (load-spike, load-ramp), × the requests one call makes when
 * every attempt fails and is retried, and hedged where a tier hedges, at
 * every tier (naive's retry storm): a call through tiers of 4 and 4 attempts
 * makes 4 requests to the inner tier and 16 to the servers, 20 in all. A
 * closed loop's user makes at most one call per think time and service
 * time. The cache's and the database's own calls are not counted: they are
 * modelled capacities (capacityOps, capacityQps), bounded by their fields.
 */
export function peakRequestsPerS(scenario: Scenario): number {
  const load = Math.max(
    1,
    ...scenario.faults.map((f) => (f.kind === 'load-spike' ? f.factor : f.kind === 'load-ramp' ? Math.max(...f.profile.map(([, factor]) => factor)) : 1)),
  );
  const serviceMs = meanMs(scenario.servers.service);
  return scenario.clients.reduce((sum, c) => {
    const calls = c.closed === undefined ? c.rate : (c.closed.users * 1000) / Math.max(1, meanMs(c.closed.thinkTime) + serviceMs);
    return sum + calls * load * requestsPerCall(scenario, c);
  }, 0);
}

/** The requests one call of population `c` makes when every attempt fails: through each tier, its attempts × the tier below's. */
function requestsPerCall(scenario: Scenario, c: Scenario['clients'][number]): number {
  const { tiers } = scenario;
  if (tiers === undefined) return 1 + c.retries;
  let attempts = 1;
  let total = 0;
  for (let i = 0; i < tiers.count; i++) {
    const each = tiers.each?.[i];
    // A tier's retries: the population's own there, else the tier's, else the population's (schema/common.ts).
    const retries = c.tiers?.[i]?.retries ?? each?.retries ?? c.retries;
    attempts *= (1 + retries) * (each?.hedgeAfterMs === undefined ? 1 : 2);
    total += attempts;
  }
  return total;
}
