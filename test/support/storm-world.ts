// The world of the retry-storm test (test/http-storm.test.ts), defined once
// for both stacks before either was run: the services, their capacities and
// timeouts, the load and the trigger. Read by the test and by each service's
// process (storm-backend.ts, storm-tier.ts). Not a test.

/** Which stack a service belongs to: the same code, two ways of calling and admitting. */
export type Stack = 'naive' | 'damper';

/**
 * How the damper stack is set up: which of damper's guards it uses. `full`,
 * the default, is what a user would set up; the others take guards away, to
 * see what each does and to check that the test can fail. Chosen by the
 * environment variable STORM_DAMPER (a name in {@link DAMPER_SETUPS}).
 */
export interface DamperSetup {
  /** damperAdmission on every service (and so the incoming deadline carried on). */
  readonly admission: boolean;
  /** The retry budget's ratio; undefined for RetryBudget's default (0.2). */
  readonly budgetRatio: number | undefined;
  /** The per-upstream AdaptiveThrottle and CircuitBreaker, on their defaults. */
  readonly throttleAndBreaker: boolean;
}

export const DAMPER_SETUPS = {
  full: { admission: true, budgetRatio: undefined, throttleAndBreaker: true },
  /** The outgoing interceptor alone. */
  'no-admission': { admission: false, budgetRatio: undefined, throttleAndBreaker: true },
  /** The retry budget alone: no admission, no throttle, no breaker. */
  'budget-only': { admission: false, budgetRatio: undefined, throttleAndBreaker: false },
  /** The brief's check that the test can fail: a budget of ratio 1 and no admission. */
  weakened: { admission: false, budgetRatio: 1, throttleAndBreaker: true },
  /** The same without throttle and breaker: only a budget of ratio 1 (each tier may double what it sends). */
  'weakened-budget-only': { admission: false, budgetRatio: 1, throttleAndBreaker: false },
} as const satisfies Record<string, DamperSetup>;

export type DamperSetupName = keyof typeof DAMPER_SETUPS;

/** What a service process is told in its argv (as JSON). */
export interface ServiceConfig {
  readonly stack: Stack;
  /** Read by the damper stack only. */
  readonly setup: DamperSetup;
}

export const WORLD = {
  /** The back end: a fixed number of work slots, each request holding one for its service time; a FIFO queue behind them. */
  backend: {
    slots: 5,
    serviceMs: 50,
    /** The trigger multiplies the service time by this: capacity 100/s falls to 20/s, half the offered load. */
    slowdown: 5,
  },
  /** The client: an open-loop generator (a fixed interval between requests), no retries of its own. */
  client: {
    ratePerSecond: 40,
    /** A request answered 200 within this counts as goodput; the client gives up on it then. */
    timeoutMs: 2_000,
  },
  /**
   * Each tier's timeout on one attempt to the service below it, as a typical
   * configuration has it: the back end answers in 50 ms, so 500 ms is ten
   * times that, and tier 1 waits twice what tier 2 waits.
   */
  attemptTimeoutMs: { tier1: 1_000, tier2: 500 },
  /** "3 retries per tier": undici's maxRetries, damper's maxAttempts − 1. */
  retries: 3,
  /**
   * Phases, seconds: unmeasured traffic at the same rate so that every
   * process is warm (its code compiled, its connections open) when time zero
   * comes, as a service in production is when its back end slows (at least
   * `prewarm` seconds, and until two seconds in a row are fully answered:
   * test/http-storm.test.ts); then healthy, the back end slowed, after.
   */
  // Warm-up 5 s and after 15 s (10 s and 20 s before issue 25): the warm-up
  // checks a healthy world, the after-window holds the damper stack's
  // recovery bound (10 s) and the last 10 s both stacks are judged by.
  phases: { prewarm: 3, warmup: 5, trigger: 30, after: 15 },
} as const;

/** Back-end capacity, requests/s: what normal load is a share of. */
export const BACKEND_CAPACITY = (WORLD.backend.slots * 1000) / WORLD.backend.serviceMs;

/**
 * Counts of named events per whole second since `start` (epoch ms, the same
 * in every process of one machine), and the highest value of named gauges in
 * each second.
 */
export class PerSecond {
  private start = Date.now();
  private readonly counts = new Map<string, number[]>();

  /** Counting restarts from `at` (epoch ms): the test's time zero. */
  restart(at: number): void {
    this.start = at;
    this.counts.clear();
  }

  add(name: string, n = 1): void {
    const s = this.second();
    if (s < 0) return;
    const row = this.row(name);
    row[s] = (row[s] ?? 0) + n;
  }

  /** Keeps the highest `value` of `name` seen in this second. */
  max(name: string, value: number): void {
    const s = this.second();
    if (s < 0) return;
    const row = this.row(name);
    row[s] = Math.max(row[s] ?? 0, value);
  }

  /** Every series, dense from second 0 (missing seconds are 0). */
  report(): Record<string, number[]> {
    const out: Record<string, number[]> = {};
    for (const [name, row] of this.counts) out[name] = Array.from(row, (x) => x ?? 0);
    return out;
  }

  private second(): number {
    return Math.floor((Date.now() - this.start) / 1000);
  }

  private row(name: string): number[] {
    let row = this.counts.get(name);
    if (row === undefined) {
      row = [];
      this.counts.set(name, row);
    }
    return row;
  }
}

/** Messages from the test to a service process. */
export type Command = { readonly type: 'start'; readonly at: number } | { readonly type: 'slowdown'; readonly factor: number } | { readonly type: 'report' };

/** Replies of a service process: its port once listening, and its per-second counts when asked. */
export type Reply = { readonly type: 'listening'; readonly port: number } | { readonly type: 'report'; readonly series: Record<string, number[]>; readonly extra: unknown };
