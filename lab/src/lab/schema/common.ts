import { z } from 'zod';

/**
 * The parts of a scenario file every world shares, as zod schemas: the
 * identity strings, the clients, the fault span, the network, and the pieces
 * several worlds reuse (an origin, a cache's windows, hot keys). A world's
 * schema (schema/<world>.ts) adds its sections and fault kinds with
 * {@link scenario}. Objects are strict: a field a schema does not know is a
 * problem, most often a typo. The descriptions are what an editor shows.
 * The parsed sections' types (`Population`, `ScenarioCommon`…) are the ones
 * these schemas infer, so a field is written once, here; scenario.ts and the
 * worlds import them from this file, which imports nothing of the lab's.
 */

const MAX_MS = 600_000;

/** A problem found by a rule across fields, at `path` below the object the rule checks. */
export type Report = (path: readonly (string | number)[], message: string) => void;

/**
 * `schema` with a rule across its fields. The rule runs only on a value whose
 * fields are each valid (unknown fields and other rules' problems aside):
 * `endS` is compared to `durationS` once both are numbers in range, so one
 * mistake is reported once.
 */
export function refined<Sc extends z.ZodType>(schema: Sc, check: (value: z.output<Sc>, report: Report) => void): Sc {
  return schema.superRefine((value, ctx) => check(value, (path, message) => ctx.addIssue({ code: 'custom', path: [...path], message })), {
    when: (payload) => payload.issues.every((issue) => issue.code === 'unrecognized_keys' || issue.code === 'custom'),
  });
}

export const text = (description: string) => z.string().min(1).meta({ description });

/** A whole number of milliseconds, at most 10 minutes. */
const ms = (min: number, description: string) => z.int().min(min).max(MAX_MS).meta({ description });

/**
 * A union tagged by its field `tag` (`kind`, `world`); an unknown or missing
 * tag is one problem that lists the known ones, not one per option.
 */
export function tagged<const O extends readonly [z.core.$ZodTypeDiscriminable, ...z.core.$ZodTypeDiscriminable[]]>(tag: string, noun: string, options: O) {
  return z.discriminatedUnion(tag, options, {
    error: (issue) => {
      if (issue.code !== 'invalid_union') return undefined;
      const value = (issue.input as Record<string, unknown> | undefined)?.[tag];
      const known = `(known: ${((issue as { options?: unknown[] }).options ?? []).join(', ')})`;
      return value === undefined ? `missing ${known}` : `unknown ${noun} ${JSON.stringify(value)} ${known}`;
    },
  });
}

/** An exponential backoff's two bounds, shared by `exponential` and `full-jitter`. */
function exponential<const K extends string>(kind: K, description: string) {
  const bounds = z.strictObject({
    kind: z.literal(kind),
    baseMs: ms(1, 'Wait before the first retry, ms; doubled for each further retry.'),
    maxMs: ms(0, 'The longest wait, ms (at least baseMs).'),
  });
  return refined(bounds.meta({ description }), (b, report) => {
    if (b.maxMs < b.baseMs) report(['maxMs'], `must be ≥ baseMs (${b.baseMs}), got ${b.maxMs}`);
  });
}

export const backoff = tagged('kind', 'backoff kind', [
  z.strictObject({ kind: z.literal('none') }).meta({ description: 'Retry at once (the default).' }),
  z.strictObject({ kind: z.literal('fixed'), delayMs: ms(0, 'Wait before every retry, ms.') }).meta({ description: 'The same wait before every retry.' }),
  exponential('exponential', 'Wait min(maxMs, baseMs × 2^(n−1)) ms before retry n.'),
  exponential('full-jitter', 'Wait a uniform draw from [0, min(maxMs, baseMs × 2^(n−1))] ms before retry n, so that clients that failed together do not retry together.'),
]).meta({ description: 'How long to wait before each retry: none (at once, the default), fixed, exponential or full-jitter.' });

/** How a client waits before its retry n (1, 2, …), parsed: the type {@link backoff} infers (each kind described there). */
export type Backoff = z.output<typeof backoff>;

/**
 * A retry delay as files give it: `backoff`, or the older `retryDelayMs`,
 * which is a fixed backoff; not both. Parsed: both fields, `retryDelayMs` the
 * fixed delay or 0, for the worlds that read it.
 */
const retryDelay = {
  shape: {
    retryDelayMs: ms(0, 'Wait before each retry, ms: the same as backoff { "kind": "fixed", "delayMs": … } (give one of them, not both).').exactOptional(),
    backoff: backoff.exactOptional(),
  },
  rule(o: { retryDelayMs?: number; backoff?: Backoff }, report: Report): void {
    if (o.retryDelayMs !== undefined && o.backoff !== undefined) report(['retryDelayMs'], `give backoff or retryDelayMs, not both (retryDelayMs: ${o.retryDelayMs} is backoff { "kind": "fixed", "delayMs": ${o.retryDelayMs} })`);
  },
  parsed<T extends { retryDelayMs?: number; backoff?: Backoff }>({ retryDelayMs, backoff, ...rest }: T) {
    const b: Backoff = backoff ?? (retryDelayMs === undefined ? { kind: 'none' } : { kind: 'fixed', delayMs: retryDelayMs });
    return { ...rest, retryDelayMs: b.kind === 'fixed' ? b.delayMs : 0, backoff: b };
  },
};

export const nonNegative = (description: string) => z.number().min(0).meta({ description });

export const delay = tagged('kind', 'delay kind', [
  z.strictObject({ kind: z.literal('constant'), ms: nonNegative('The delay, ms.') }).meta({ description: 'Always the same delay.' }),
  z.strictObject({ kind: z.literal('exponential'), meanMs: nonNegative('The mean delay, ms.') }).meta({ description: 'Exponentially distributed: most hops quick, a few slow.' }),
  z
    .strictObject({
      kind: z.literal('lognormal'),
      medianMs: nonNegative('The median delay, ms.'),
      sigma: z.number().gt(0).max(5).meta({ description: 'The spread: the standard deviation of the delay’s logarithm (0.5: the slowest 1 % of hops take about 3× the median).' }),
    })
    .meta({ description: 'Lognormal: a median and a long tail, as measured network latencies have.' }),
]);

/** A delay drawn at random for each use (`servers.service`, a closed loop's `thinkTime`, `network.hopDelay`…), parsed: the type {@link delay} infers (each kind described there). */
export type Delay = z.output<typeof delay>;

const NO_NETWORK_DELAY = { hopDelay: { kind: 'constant', ms: 0 } } as const;

const network = z
  .strictObject({ hopDelay: delay.meta({ description: 'Added to each hop, one part of the world calling another (client to server, server to database…), drawn per hop.' }) })
  .default(NO_NETWORK_DELAY)
  .meta({ description: 'The network between the world’s parts; by default it adds no delay.' });

/** The network between a world's parts, parsed (`network`): the type its schema infers. */
export type Network = z.output<typeof network>;

const THINK_NONE: Delay = { kind: 'constant', ms: 1 };

/** The clients, written once whatever the world (a world gives meaning to a population's own `keys`). */
const population = refined(
  z
    .strictObject({
      name: text('The population, as results and the report name it.'),
      rate: z.number().min(0).max(1_000_000).meta({ description: 'Mean requests per second (Poisson arrivals unless arrivals says fixed).' }).exactOptional(),
      arrivals: z
        .enum(['poisson', 'fixed'])
        .exactOptional()
        .meta({ description: 'poisson (the default): independent users, bursts and lulls around the rate; fixed: one request every 1000 ÷ rate ms, as a load generator’s constant arrival rate (wrk2, k6) sends them.' }),
      timeoutMs: z.int().min(1).max(MAX_MS).meta({ description: 'The client gives up after this long, ms.' }),
      retries: z.int().min(0).max(10).default(0).meta({ description: 'Further attempts after a failure or timeout.' }),
      ...retryDelay.shape,
      priority: z.enum(['critical', 'normal', 'low', 'background']).default('normal').meta({ description: 'What the system sheds first under overload: background, then low, then normal.' }),
      users: z.int().min(1).max(1_000_000).exactOptional().meta({ description: 'Closed loop: this many users, each sending a call, waiting for its end (its retries included), thinking, and sending the next (give rate or users).' }),
      thinkTime: delay.exactOptional().meta({ description: 'Closed loop: what a user waits between the end of one call and the next, drawn per call, whole ms, at least 1 (default 1 ms).' }),
      keys: z
        .strictObject({
          count: z.int().min(1).max(10_000_000).meta({ description: 'Keys of this population’s own, named <name>:0 (the most read) … <name>:<count − 1>.' }),
          exponent: z.number().min(0).max(5).default(1).meta({ description: 'Zipf’s exponent over them (0: uniform; default 1).' }),
        })
        .exactOptional()
        .meta({ description: 'Keys this population reads and no other does (Discord’s push-notification settings beside its user objects), instead of the scenario’s keys (needs database).' }),
      tiers: z
        .array(
          z
            .strictObject({
              retries: z.int().min(0).max(10).exactOptional().meta({ description: 'Retries the tier makes at the tier below for this population’s calls.' }),
              backoff: backoff.exactOptional().meta({ description: 'naive: the wait before each of them.' }),
            })
            .meta({ description: 'This population’s own retries and backoff at one client tier.' }),
        )
        .exactOptional()
        .meta({
          description:
            'With client tiers: this population’s own retries and backoff at each tier, outermost first, one entry per tier (a mobile app that retries 3 times beside a web page that retries none, through the same API); a field left out falls back to tiers.each, then to the population’s retries and backoff. damper’s tier makes the most attempts any population’s settings give.',
        }),
    })
    .meta({ description: 'A client population: open loop at `rate` (arrivals do not slow down when the system does), or closed loop with `users` and `thinkTime`.' }),
  (p, report) => {
    retryDelay.rule(p, report);
    if (p.rate === undefined && p.users === undefined) report(['rate'], 'missing (or give users, for a closed-loop population)');
    if (p.rate !== undefined && p.users !== undefined) report(['users'], 'give rate (open loop) or users (closed loop), not both');
    if (p.thinkTime !== undefined && p.users === undefined) report(['thinkTime'], 'only for a closed-loop population (users)');
    if (p.arrivals !== undefined && p.users !== undefined) report(['arrivals'], 'only for an open-loop population (rate): closed-loop users send when their last call ends');
  },
).transform(({ rate, users, thinkTime, ...p }) => ({
  ...retryDelay.parsed(p),
  rate: rate ?? 0,
  ...(users === undefined ? {} : { closed: { users, thinkTime: thinkTime ?? THINK_NONE } }),
}));

/**
 * A client population, parsed: the type {@link population} infers. A closed
 * one has `closed` (its `users` and their `thinkTime`) and `rate` 0; `backoff`
 * is always there, and `retryDelayMs` is its delay when it is fixed, else 0.
 */
export type Population = z.output<typeof population>;

/** A fault's span on the timeline and its label: the first fields of every fault kind. */
export const span = {
  startS: nonNegative('When the fault begins, s into the run.'),
  endS: nonNegative('When it ends, s into the run: after startS, at most durationS.'),
  label: text('What happens, as the report labels it.'),
};

/**
 * What every fault has, parsed, whatever its kind (a kind adds its own
 * fields): `kind`, its {@link span}, and `trigger`, whether it is part of the
 * incident's cause (recovery counts from the end of the last trigger) or an
 * operator's action. A world's fault schema must give it ({@link scenario}).
 */
export type FaultSpanDoc = z.output<z.ZodObject<{ kind: z.ZodString; trigger: z.ZodBoolean } & typeof span>>;

export const when = z.enum(['always', 'unhealthy']).default('always').meta({
  description: 'always, or unhealthy: only if, at startS, goodput over the last objective.holdS seconds is below the objective (an operator reacts to what the dashboards show).',
});

/** A simulated database (`Database` in world/database.ts): the `origin` section of several worlds. */
export const origin = z
  .strictObject({
    capacityQps: z.number().min(1).meta({ description: 'Queries per second the database completes when busy.' }),
    workers: z.int().min(1).max(10_000).meta({ description: 'Queries served at once; each takes workers/capacityQps s.' }),
    maxQueue: z.int().min(0).meta({ description: 'Queries waiting beyond which the database refuses at once.' }),
  })
  .meta({ description: 'The database: `workers` queries at a time, each taking workers/capacityQps s; beyond `maxQueue` waiting, refused at once.' });

/** A balancer's health checks (the service world's `balancer`), read by each variant in its own way. */
export const healthChecks = z.strictObject({
  intervalS: z.number().min(0.001).max(3600).meta({ description: 'Time between two probes of a server, s.' }),
  timeoutMs: z.int().min(2).max(600_000).meta({ description: 'naive: a probe answered after this is a failure (health by response time); damper: a probe’s timeout (no answer at all), ms.' }),
  fall: z.int().min(1).max(100).meta({ description: 'Consecutive failed probes that take a server out.' }),
  rise: z.int().min(1).max(100).meta({ description: 'Consecutive passing probes that put it back.' }),
});

/** A balancer's health checks, parsed (`balancer`): the type the schema infers. */
export type HealthShape = z.output<typeof healthChecks>;

export const hotKey = z.strictObject({
  key: text('The key.'),
  share: z.number().min(0).max(1).meta({ description: 'Its share of all requests, 0 to 1.' }),
});

const checkAxis = refined(
  z
    .strictObject({
      axis: z
        .string()
        .regex(/^(load|trigger|trigger-size|[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*|\[\d+\])*)$/, 'must be load, trigger, trigger-size or the path of a numeric field of this file (clients[0].rate, faults[0].factor)')
        .meta({ description: 'load (× the client rates), trigger (how long the main trigger lasts), trigger-size (how hard it hits), or the path of a numeric field of this file, spelt as its problems name fields (clients[0].timeoutMs, faults[0].factor; servers.workers in a service scenario).' }),
      from: z.number().meta({ description: 'The grid’s first value on this axis.' }),
      to: z.number().meta({ description: 'Its last value (above from).' }),
      margin: z
        .number()
        .default(0)
        .meta({ description: 'The headroom wanted, in the axis’s unit, from the scenario’s own value (negative: downwards, e.g. fewer workers): no damper cell from the own value to the own value + margin may be stuck. Default 0: the own value only.' }),
    })
    .meta({ description: 'One axis of the check’s grid and the margin wanted along it.' }),
  (a, report) => {
    if (!(a.to > a.from)) report(['to'], `must be above from (${a.from}), got ${a.to}`);
  },
);

/** `damper lab check`'s grid and margins (check-plan.ts): two axes of the sweep's kinds (a scenario's `check`). */
const checkSection = z
  .strictObject({
    axes: z
      .array(checkAxis)
      .length(2, 'needs two axes: across and up')
      .meta({ description: 'The two axes: across, then up.' }),
    steps: z.int().min(2).max(12).default(5).meta({ description: 'Values per axis, both ends included (fewer on a whole-number field).' }),
  })
  .meta({ description: 'What damper lab check sweeps (naive beside damper) and the margin it demands; absent, a default grid around the scenario’s own point (docs/lab.md, "Check").' });

/** The fields every scenario has; `world` and the world's own sections go between `faults` and `network`. */
function common<F extends z.ZodType<FaultSpanDoc>>(fault: F) {
  return {
    $schema: z.string().exactOptional().meta({ description: 'The JSON Schema an editor checks this file against (`damper lab schema > scenario.schema.json`); damper ignores it.' }),
    name: text('The scenario’s name: results and the report are keyed by it.'),
    title: text('A one-line title, shown in the report.'),
    description: text('What happened, shown in the report.'),
    source: text('Where the numbers come from.'),
    scaling: text('How the real numbers were scaled to what one core simulates in seconds.'),
    durationS: z.number().min(1).max(86_400).meta({ description: 'Simulated seconds.' }),
    baseline: refined(
      z.strictObject({ fromS: nonNegative('From, s.'), toS: nonNegative('To, s (after fromS).') }).meta({ description: 'Window before the trigger whose mean origin rate is the baseline, s.' }),
      (b, report) => {
        if (b.toS <= b.fromS) report(['toS'], `must be after fromS (${b.fromS}), got ${b.toS}`);
      },
    ),
    objective: z
      .strictObject({
        p99Ms: z.number().min(1).meta({ description: 'The 99th percentile of response time must stay at or below this, ms.' }),
        goodputRatio: z.number().min(0).max(1).meta({ description: 'Goodput (answers within the client’s timeout) must stay at or above this share of offered requests.' }),
        holdS: z.int().min(1).meta({ description: 'Seconds in a row both must hold to count as healthy.' }),
      })
      .meta({ description: 'What "healthy" means: goodput ≥ goodputRatio × offered and p99 ≤ p99Ms, every second for holdS.' }),
    clients: z.array(population).min(1, 'needs at least one population').meta({ description: 'The client populations: open loop (rate) or closed loop (users, thinkTime).' }),
    faults: z.array(fault).meta({ description: 'The timeline; at least one fault must be a trigger (recovery counts from the end of the last trigger).' }),
    damper: z
      .strictObject({
        config: text('An ES module (path relative to this file) whose default export ({ clock, scenario }) => ({ client?, admission?, cache?, balancer? }) builds the damper variant’s guards and options; see docs/lab.md, "Your damper configuration".'),
      })
      .exactOptional()
      .meta({ description: 'The damper variant’s settings: by default the lab’s own.' }),
    check: checkSection.exactOptional(),
  };
}

/**
 * The fields every scenario has, whatever its world, parsed (the file's
 * `$schema` aside, as {@link parsed} leaves it): the type {@link common}'s
 * fields and `network` infer. A world (see src/lab/world/worlds.ts) adds its
 * own: what the system is made of, and which faults it knows. The path in
 * `damper.config`, relative to the file in a file, is absolute once loaded
 * (scenario-source.ts).
 */
export type ScenarioCommon = Omit<z.output<z.ZodObject<ReturnType<typeof common<z.ZodType<FaultSpanDoc>>> & { network: typeof network }>>, '$schema'>;

/** What every scenario's timeline rule reads. */
type Timeline = Pick<ScenarioCommon, 'durationS' | 'faults'>;

/** Checks every scenario's timeline: spans inside the run, after their start, and a trigger among them. */
function timeline(s: Timeline, report: Report): void {
  s.faults.forEach((f, i) => {
    if (f.endS <= f.startS) report(['faults', i, 'endS'], `must be after startS (${f.startS}), got ${f.endS}`);
    for (const field of ['startS', 'endS'] as const) if (f[field] > s.durationS) report(['faults', i, field], `must be ≤ durationS (${s.durationS}), got ${f[field]}`);
  });
  if (!s.faults.some((f) => f.trigger)) report(['faults'], 'needs a trigger');
}

/**
 * A world's scenario file: the common fields, `world`, the world's own
 * sections (`shape`) and its fault kinds (`fault`, a {@link tagged} union of
 * {@link fault}s). A world adds its rules across fields with {@link refined}
 * and ends with {@link parsed}.
 */
export function scenario<const W extends string, S extends z.ZodRawShape, F extends z.ZodType<FaultSpanDoc>>(world: W, description: string, shape: S, fault: F) {
  const fields = z.strictObject({ ...common(fault), world: z.literal(world).meta({ description: 'The simulated system.' }), ...shape, network });
  // The type of a generic world's fields is opaque to the compiler; every scenario has these two.
  return refined(fields.meta({ title: `damper scenario (${world} world)`, description }), (s, report) => timeline(s as unknown as Timeline, report));
}

/** The parsed scenario: the file without `$schema`. */
export function parsed<T extends { $schema?: string }>({ $schema: _, ...rest }: T): Omit<T, '$schema'> {
  return rest;
}
