/**
 * Measurement 3: a failing key. The origin rejects every call; one request is
 * issued every 5 ms for 1 s (200 in all, each started on schedule without
 * waiting for the previous one, errors caught). What counts is how many times
 * the origin was called (target for damper: ≤ 5).
 *
 * Two variants:
 * - `cold` (the required one): the key has never had a value. Every library
 *   runs with its most protective documented settings (`protective: true`);
 *   damper runs on its defaults, `new Cache({ ttl: 60_000 })`.
 * - `stale` (supplementary): the key was loaded once, its 1 s ttl has passed,
 *   and then the origin starts failing. This is the case the peers' stale /
 *   grace / fallback options are made for, so it is the fairer test of them.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { type Peer, peers, type Subject, type Value } from './peers.js';
import { describe } from './report.js';

export const FAIL_REQUESTS = 200;
export const FAIL_INTERVAL_MS = 5;
const COLD_TTL_MS = 60_000;
const STALE_TTL_MS = 1_000;
/** Past every ttl, including async-cache-dedupe's whole-second clock (cached for up to 1 s). */
const EXPIRE_WAIT_MS = 2_100;

export type FailingVariant = 'cold' | 'stale';

export interface FailingRow {
  readonly name: string;
  /** Origin calls while it was failing (the warm-up load of `stale` is not counted). */
  readonly loaderCalls: number;
  /** Requests answered with the (stale) value. */
  readonly values: number;
  /** Requests answered with `undefined` (lru-cache's answer on a rejected fetch with nothing stale). */
  readonly empty: number;
  /** Requests that rejected. */
  readonly errors: number;
  readonly firstError: string | undefined;
  /** From the first request to the last settled. */
  readonly spanMs: number;
}

export interface FailingResult {
  readonly variant: FailingVariant;
  readonly requests: number;
  readonly intervalMs: number;
  readonly ttlMs: number;
  readonly target: number;
  readonly rows: readonly FailingRow[];
}

/** An origin that succeeds until `fail()` is called, then rejects every call. */
class Origin {
  calls = 0;
  failures = 0;
  private failing = false;

  readonly load = async (key: string): Promise<Value> => {
    this.calls++;
    if (this.failing) {
      this.failures++;
      throw new Error(`origin down (${key})`);
    }
    return { key, n: this.calls };
  };

  fail(): void {
    this.failing = true;
  }
}

export async function failingKey(variant: FailingVariant, log: (line: string) => void): Promise<FailingResult> {
  const ttlMs = variant === 'cold' ? COLD_TTL_MS : STALE_TTL_MS;
  const key = `failing:${variant}`;
  const setups: { peer: Peer; origin: Origin; subject: Subject }[] = [];
  for (const peer of peers) {
    const origin = new Origin();
    const subject = peer.create(origin.load, { ttlMs, protective: true });
    if (variant === 'cold') origin.fail();
    else if ((await subject.get(key))?.key !== key) throw new Error(`${peer.name}: warm-up load failed`);
    setups.push({ peer, origin, subject });
  }
  // One wait for all: entries only get older, and every stale window is 300 s.
  if (variant === 'stale') await sleep(EXPIRE_WAIT_MS);

  const rows: FailingRow[] = [];
  for (const { peer, origin, subject } of setups) {
    origin.fail();
    const row = await drive(peer.name, subject, key, origin);
    await subject.close();
    rows.push(row);
    log(`  ${variant.padEnd(5)} ${peer.name.padEnd(26)} ${String(row.loaderCalls).padStart(4)} loader calls; ${row.values} values, ${row.empty} empty, ${row.errors} errors in ${row.spanMs.toFixed(0)} ms`);
  }
  return { variant, requests: FAIL_REQUESTS, intervalMs: FAIL_INTERVAL_MS, ttlMs, target: 5, rows };
}

async function drive(name: string, subject: Subject, key: string, origin: Origin): Promise<FailingRow> {
  const before = origin.failures;
  let values = 0;
  let empty = 0;
  let errors = 0;
  let firstError: string | undefined;
  const pending: Promise<void>[] = [];
  const started = performance.now();
  for (let i = 0; i < FAIL_REQUESTS; i++) {
    // Absolute schedule: timer lateness does not accumulate over the second.
    const wait = started + i * FAIL_INTERVAL_MS - performance.now();
    if (wait > 0) await sleep(wait);
    pending.push(
      subject.get(key).then(
        (v) => {
          if (v?.key === key) values++;
          else empty++;
        },
        (error: unknown) => {
          errors++;
          firstError ??= describe(error);
        },
      ),
    );
  }
  await Promise.all(pending);
  const spanMs = performance.now() - started;
  return { name, loaderCalls: origin.failures - before, values, empty, errors, firstError, spanMs };
}
