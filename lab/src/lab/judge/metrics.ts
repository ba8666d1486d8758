import assert from 'node:assert/strict';
import { type MeasuredSummary, type Series } from './results.js';
import { triggerStartS } from '../scenario.js';
import { type ScenarioCommon } from '../schema/common.js';
import { VerdictWatch } from './verdict-watch.js';

/**
 * Per-second counters and latency histograms of one simulated run, and the
 * summary the lab's contract asks for (docs/design.md, "The lab's
 * contract"). Latencies go into log-scaled buckets (exact below 64 ms, then
 * 32 per doubling, about 3 % wide), so a run of millions of requests keeps a
 * fixed, small memory.
 */

const EXACT = 64;
const PER_DOUBLING = 32;
const BUCKETS = EXACT + (20 - 6) * PER_DOUBLING; // up to 2^20 ms (17 minutes)

function bucketOf(ms: number): number {
  if (ms < EXACT) return Math.max(0, Math.floor(ms));
  const e = Math.floor(Math.log2(ms));
  if (e >= 20) return BUCKETS - 1;
  return EXACT + (e - 6) * PER_DOUBLING + Math.floor((ms / 2 ** e - 1) * PER_DOUBLING);
}

/** The upper edge of a bucket: what a percentile reports. */
function bucketTop(b: number): number {
  if (b < EXACT) return b;
  const e = 6 + Math.floor((b - EXACT) / PER_DOUBLING);
  const sub = (b - EXACT) % PER_DOUBLING;
  return Math.round(2 ** e * (1 + (sub + 1) / PER_DOUBLING));
}

function percentile(hist: Uint32Array, offset: number, count: number, q: number): number {
  let rank = Math.ceil(q * count);
  for (let b = 0; b < BUCKETS; b++) {
    rank -= hist[offset + b]!;
    if (rank <= 0) return bucketTop(b);
  }
  return bucketTop(BUCKETS - 1);
}

/** Sliding-window width for the peak origin rate, s: a peak is a sustained rate, not one Poisson spike. */
export const PEAK_WINDOW_S = 10;

/** How a request ended, for the {@link Recorder}. */
export type RequestOutcome = 'hit' | 'stale' | 'good' | 'bad';

/**
 * Each request counts in the second it was sent, as a load generator counts
 * it (wrk2, k6): its answer, its latency and whether it was a hit go to that
 * second however late they come. Counted in the second it ended instead, a
 * second's goodput was compared with another second's offered load, and a
 * low-rate scenario read unhealthy on noise: a Poisson burst still in flight
 * at a second's end made that second short of answers and the next one
 * over-full (issue 28, item 6). A second's figures are final once no request
 * sent in it (or before) is in flight: see {@link settledBefore}.
 */
export class Recorder {
  readonly seconds: number;
  private readonly offered: Uint32Array;
  private readonly good: Uint32Array;
  private readonly bad: Uint32Array;
  private readonly hits: Uint32Array;
  private readonly stale: Uint32Array;
  private readonly origin: Uint32Array;
  private readonly latency: Uint32Array;
  private readonly total = new Uint32Array(BUCKETS);
  /** Requests sent in each second that have not ended yet. */
  private readonly inFlight: Uint32Array;
  /** Good answers by the second they arrived: what an operator's dashboard shows while the incident goes on. */
  private readonly goodArrived: Uint32Array;
  /** Requests that ended in each second, however: with `offered`, what was in flight at each second's end. */
  private readonly endedIn: Uint32Array;
  /** No request sent before this second is in flight (see {@link settledBefore}). */
  private settled = 0;
  invalidServed = 0;
  requests = 0;

  constructor(durationS: number) {
    this.seconds = Math.ceil(durationS);
    const n = this.seconds;
    this.offered = new Uint32Array(n);
    this.good = new Uint32Array(n);
    this.bad = new Uint32Array(n);
    this.hits = new Uint32Array(n);
    this.stale = new Uint32Array(n);
    this.origin = new Uint32Array(n);
    this.inFlight = new Uint32Array(n);
    this.goodArrived = new Uint32Array(n);
    this.endedIn = new Uint32Array(n);
    this.latency = new Uint32Array(n * BUCKETS);
  }

  private second(t: number): number {
    return Math.min(this.seconds - 1, Math.floor(t / 1000));
  }

  /** A request was sent at `t`, before the horizon (after it, the clients send nothing). */
  started(t: number): void {
    assert(t < this.seconds * 1000, 'no request is sent after the horizon');
    const s = this.second(t);
    this.requests++;
    this.offered[s]!++;
    this.inFlight[s]!++;
  }

  /**
   * The request sent at `start` ended at `end`: `hit` (answered with a fresh
   * valid value without waiting for the origin), `stale` (answered at once
   * with a value past its ttl while it is refreshed: not a hit, as an
   * operator's dashboard counts), `good` (a valid value, after the origin),
   * or `bad` (an error, a timeout, an invalid value, a refusal). It counts in
   * the second it was sent.
   */
  ended(start: number, end: number, outcome: RequestOutcome): void {
    const s = this.second(start);
    assert(this.inFlight[s]! > 0, 'a request ends once, after it was sent');
    this.inFlight[s]!--;
    const e = this.second(end);
    this.endedIn[e]!++;
    if (outcome === 'bad') this.bad[s]!++;
    else {
      this.good[s]!++;
      this.goodArrived[e]!++;
      if (outcome === 'hit') this.hits[s]!++;
      else if (outcome === 'stale') this.stale[s]!++;
    }
    const b = bucketOf(end - start);
    this.latency[s * BUCKETS + b]!++;
    this.total[b]!++;
  }

  /**
   * The first second, before `overS`, with a request still in flight (or
   * `overS` when none is): every second before it is final, its figures
   * cannot change any more. Seconds at or after `overS` are not over yet.
   */
  settledBefore(overS: number): number {
    const to = Math.min(overS, this.seconds);
    while (this.settled < to && this.inFlight[this.settled] === 0) this.settled++;
    return Math.min(this.settled, to);
  }

  /**
   * Good answers that arrived in the `windowS` whole seconds before `t`, over
   * the requests sent in them; 1 when nothing was sent. An operator's reading
   * while the incident goes on, not the verdict's (which waits for each
   * second's requests to end).
   */
  recentGoodputRatio(t: number, windowS: number): number {
    const to = this.second(t);
    let good = 0;
    let offered = 0;
    for (let s = Math.max(0, to - windowS); s < to; s++) {
      good += this.goodArrived[s]!;
      offered += this.offered[s]!;
    }
    return offered === 0 ? 1 : good / offered;
  }

  /** A query reached the origin at `t`; after the horizon (while the last requests end) it is not charted. */
  originQuery(t: number): void {
    if (t < this.seconds * 1000) this.origin[this.second(t)]!++;
  }

  /** The p99 of the requests sent in second `s` (and ended); null when none ended. */
  private p99Of(s: number): number | null {
    const ended = this.good[s]! + this.bad[s]!;
    return ended === 0 ? null : percentile(this.latency, s * BUCKETS, ended, 0.99);
  }

  series(): Series {
    const n = this.seconds;
    const p99Ms: (number | null)[] = [];
    const hitRatio: (number | null)[] = [];
    const staleRatio: (number | null)[] = [];
    const inFlight: number[] = [];
    for (let s = 0, open = 0; s < n; s++) {
      open += this.offered[s]! - this.endedIn[s]!;
      inFlight.push(open);
      const ended = this.good[s]! + this.bad[s]!;
      p99Ms.push(this.p99Of(s));
      hitRatio.push(ended === 0 ? null : round(this.hits[s]! / ended));
      staleRatio.push(ended === 0 ? null : round(this.stale[s]! / ended));
    }
    return { offered: [...this.offered], goodput: [...this.good], errors: [...this.bad], originQps: [...this.origin], p99Ms, hitRatio, staleRatio, inFlight };
  }

  /**
   * Whether second `s` met the objective: the rule of {@link healthySecond},
   * read from the counters rather than a series, so a run can ask it while
   * it goes on (see {@link VerdictWatch}).
   */
  healthy(objective: ScenarioCommon['objective'], s: number): boolean {
    return meetsObjective(objective, this.offered[s]!, this.good[s]!, this.p99Of(s));
  }

  /** The run's summary; `simulatedS`: how far it ran, when it ended at its verdict before the horizon. */
  summary(scenario: ScenarioCommon, series: Series, simulatedS = this.seconds): MeasuredSummary {
    const triggerStart = triggerStartS(scenario);
    const { baseline } = scenario;
    // Recovery: the first second from the trigger's end that starts `holdS` healthy seconds in a row (read over the whole run).
    const watch = new VerdictWatch(this, scenario);
    watch.decided(this.seconds);
    const { recoverySeconds } = watch;
    const mean = (from: number, to: number): number => {
      let sum = 0;
      for (let s = from; s < to; s++) sum += series.originQps[s]!;
      return sum / Math.max(1, to - from);
    };
    const baselineOriginQps = mean(Math.floor(baseline.fromS), Math.floor(baseline.toS));
    let peakOriginQps = 0;
    for (let s = Math.floor(triggerStart); s + PEAK_WINDOW_S <= this.seconds; s++) peakOriginQps = Math.max(peakOriginQps, mean(s, s + PEAK_WINDOW_S));
    const sum = (a: readonly number[]): number => a.reduce((x, y) => x + y, 0);
    const good = sum(series.goodput);
    const bad = sum(series.errors);
    return {
      recovered: recoverySeconds !== null,
      recoverySeconds,
      baselineOriginQps: round(baselineOriginQps),
      peakOriginQps: round(peakOriginQps),
      amplification: round(peakOriginQps / Math.max(baselineOriginQps, 1e-9)),
      errorRate: round(bad / Math.max(1, good + bad)),
      goodputRatio: round(good / Math.max(1, sum(series.offered))),
      p99Ms: percentile(this.total, 0, good + bad, 0.99),
      invalidServed: this.invalidServed,
      simulatedRequests: this.requests,
      simulatedS,
    };
  }
}

/**
 * A second is healthy when something was offered, goodput reached the
 * objective's share of it, and the p99 of the requests sent in it was
 * within the objective.
 */
export function healthySecond(objective: ScenarioCommon['objective'], series: Series, s: number): boolean {
  return meetsObjective(objective, series.offered[s]!, series.goodput[s]!, series.p99Ms[s] ?? null);
}

/** The rule of {@link healthySecond} on one second's figures: from a series, or from a {@link Recorder} while its run goes on. */
function meetsObjective(objective: ScenarioCommon['objective'], offered: number, goodput: number, p99Ms: number | null): boolean {
  return offered > 0 && goodput >= objective.goodputRatio * offered && p99Ms !== null && p99Ms <= objective.p99Ms;
}

/** Four decimals: enough for any chart, and stable across platforms' float printing. */
export function round(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}
