/**
 * Measurement 2: cold stampede. 10,000 callers ask for one key that is not
 * cached, all in the same tick; the origin answers after 10 ms of real time.
 * What counts is how many times the origin was called (target: 1).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { type Peer, peers, type Value } from './peers.js';
import { describe } from './report.js';

export const STAMPEDE_CALLERS = 10_000;
export const STAMPEDE_DELAY_MS = 10;
const TTL_MS = 60_000;

export interface StampedeRow {
  readonly name: string;
  readonly loaderCalls: number;
  /** Callers that got the value. */
  readonly resolved: number;
  /** Callers that got an error (the first error's message is kept). */
  readonly rejected: number;
  /** Callers that got something other than the loaded value (should be 0). */
  readonly wrongValue: number;
  readonly firstError: string | undefined;
  /** From the first call to the last caller settled. */
  readonly elapsedMs: number;
}

export interface StampedeResult {
  readonly callers: number;
  readonly loaderDelayMs: number;
  readonly target: number;
  readonly rows: readonly StampedeRow[];
}

export async function stampede(log: (line: string) => void): Promise<StampedeResult> {
  const rows: StampedeRow[] = [];
  for (const peer of peers) {
    const row = await one(peer);
    rows.push(row);
    log(`  ${peer.name.padEnd(26)} ${String(row.loaderCalls).padStart(6)} loader calls, ${row.resolved} resolved, ${row.rejected} rejected, ${row.elapsedMs.toFixed(0)} ms`);
  }
  return { callers: STAMPEDE_CALLERS, loaderDelayMs: STAMPEDE_DELAY_MS, target: 1, rows };
}

async function one(peer: Peer): Promise<StampedeRow> {
  let calls = 0;
  const load = async (key: string): Promise<Value> => {
    calls++;
    await sleep(STAMPEDE_DELAY_MS);
    return { key, n: calls };
  };
  const subject = peer.create(load, { ttlMs: TTL_MS, protective: false });
  const key = 'cold:1';
  const started = performance.now();
  const pending: Promise<Value | undefined>[] = [];
  for (let i = 0; i < STAMPEDE_CALLERS; i++) pending.push(subject.get(key));
  const settled = await Promise.allSettled(pending);
  const elapsedMs = performance.now() - started;
  await subject.close();
  let resolved = 0;
  let rejected = 0;
  let firstError: string | undefined;
  for (const s of settled) {
    if (s.status === 'rejected') {
      rejected++;
      firstError ??= describe(s.reason);
    } else if (s.value?.key === key) {
      resolved++;
    }
  }
  return { name: peer.name, loaderCalls: calls, resolved, rejected, wrongValue: settled.length - resolved - rejected, firstError, elapsedMs };
}
