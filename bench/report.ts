/**
 * Turning measurements into what a reader sees: the machine description,
 * Markdown tables for the terminal (pasteable into docs/benchmarks.md), and
 * error messages.
 */
import os from 'node:os';
import type { FailingResult } from './failing-key.js';
import type { HitResult } from './hit-path.js';
import type { StampedeResult } from './stampede.js';

export interface Machine {
  readonly nproc: number;
  readonly cpuModel: string;
  readonly totalMemGiB: number;
  readonly node: string;
  readonly v8: string;
  readonly platform: string;
  readonly arch: string;
}

export function machine(): Machine {
  return {
    nproc: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
    totalMemGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    v8: process.versions.v8,
    platform: `${os.type()} ${os.release()}`,
    arch: os.arch(),
  };
}

export function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

/** A Markdown table with right-aligned numeric columns. */
export function table(header: readonly string[], rows: readonly (readonly string[])[], numeric: readonly boolean[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const cell = (text: string, i: number): string => (numeric[i] === true ? text.padStart(widths[i] ?? 0) : text.padEnd(widths[i] ?? 0));
  const line = (cells: readonly string[]): string => `| ${cells.map(cell).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (numeric[i] === true ? `${'-'.repeat(w + 1)}:` : `${'-'.repeat(w + 2)}`)).join('|')}|`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

const ratio = (x: number): string => `${x.toFixed(2)}×`;

export function hitTable(hit: HitResult): string {
  return table(
    ['library', 'ns/op (median)', 'ns/op (best round)', '× lru-cache fetch', '× floor'],
    hit.rows.map((r) => [r.name, r.nsPerOp.toFixed(0), r.minNs.toFixed(0), ratio(r.ratioToLruFetch), ratio(r.ratioToFloor)]),
    [false, true, true, true, true],
  );
}

export function stampedeTable(s: StampedeResult): string {
  return table(
    ['library', 'loader calls', `× target (${s.target})`, 'resolved', 'rejected', 'ms to settle all'],
    s.rows.map((r) => [r.name, String(r.loaderCalls), ratio(r.loaderCalls / s.target), String(r.resolved), String(r.rejected), r.elapsedMs.toFixed(0)]),
    [false, true, true, true, true, true],
  );
}

export function failingTable(f: FailingResult): string {
  return table(
    ['library', 'loader calls', `× target (${f.target})`, 'served a value', 'undefined', 'errors', 'span ms'],
    f.rows.map((r) => [r.name, String(r.loaderCalls), ratio(r.loaderCalls / f.target), String(r.values), String(r.empty), String(r.errors), r.spanMs.toFixed(0)]),
    [false, true, true, true, true, true, true],
  );
}
