import { type VariantSummary } from '../judge/results.js';
import { spreadOf, verdictClass } from '../judge/fidelity.js';
import { type JudgedRun } from '../judge/results.js';
import { millis, percent, times } from '../format.js';
import { type StacksRun } from './stacks-run.js';
import { realRunNotes } from '../real/fidelity-run.js';

/**
 * The side-by-side table (issue 31, item 2), as Markdown: the terminal
 * prints it, docs/benchmarks.md and the README quote it. One row per stack,
 * the figures the lab judges every variant by: what was served during the
 * trigger and its quotient by the best any policy could have served with
 * the capacity left, the recovery after it, the origin's amplification,
 * errors and p99 over the run. Real runs give their median and
 * [lowest–highest].
 */

interface Column {
  readonly title: string;
  readonly read: (s: VariantSummary) => number | null;
  readonly write: (v: number | null) => string;
}

const COLUMNS: readonly Column[] = [
  { title: 'served during the trigger', read: (s) => s.trigger.goodputRatio, write: (v) => percent(v!) },
  { title: '÷ best possible', read: (s) => s.trigger.efficiency, write: (v) => percent(v!) },
  { title: 'recovery', read: (s) => s.recoverySeconds, write: (v) => (v === null ? 'never' : `${v} s`) },
  { title: 'origin amplification', read: (s) => s.amplification, write: (v) => times(v!) },
  { title: 'errors', read: (s) => s.errorRate, write: (v) => percent(v!) },
  { title: 'p99', read: (s) => s.p99Ms, write: (v) => `${millis(v!)} ms` },
];

/** One figure over runs: the value, or with several the (upper) median and [lowest–highest]. */
function cell(column: Column, runs: readonly JudgedRun[]): string {
  const values = runs.map((r) => column.read(r.summary));
  if (values.length === 1) return column.write(values[0]!);
  const s = spreadOf(values);
  return s.min === s.max ? `${column.write(s.median)} ×${values.length}` : `${column.write(s.median)} [${column.write(s.min)}–${column.write(s.max)}]`;
}

/** The verdicts of runs: one, or each kind with its count (`recovered ×3`). */
function verdicts(run: StacksRun, runs: readonly JudgedRun[]): string {
  const counts = new Map<string, number>();
  for (const r of runs) {
    const v = verdictClass(run.scenario, r);
    counts.set(v, (counts.get(v) ?? 0) + 1);
  }
  if (runs.length === 1) return [...counts.keys()][0]!;
  return [...counts].map(([v, n]) => `${v} ×${n}`).join(', ');
}

function table(run: StacksRun, runsOf: (row: StacksRun['rows'][number]) => readonly JudgedRun[]): string[] {
  const head = ['stack', 'verdict', ...COLUMNS.map((c) => c.title)];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const row of run.rows) {
    const runs = runsOf(row);
    lines.push(`| ${[row.name, verdicts(run, runs), ...COLUMNS.map((c) => cell(c, runs))].join(' | ')} |`);
  }
  return lines;
}

/** The simulation's table: one run per stack at the seed. */
export function simulatedTable(run: StacksRun): string[] {
  return table(run, (row) => [row.simulated]);
}

/** The real runs' table (median [lowest–highest] of each stack's runs); empty without real runs. */
export function realTable(run: StacksRun): string[] {
  if (run.rows.every((r) => r.real.length === 0)) return [];
  return table(run, (row) => row.real);
}

/** The settings each peer took, with where its library documents them: one line per setting, the innermost tier's. */
export function settingLines(run: StacksRun): string[] {
  return run.rows.flatMap((row) => {
    const innermost = row.settings.at(-1);
    if (innermost === undefined) return [];
    const which = innermost.tier < 0 ? 'the servers’ cache' : 'each client tier; the innermost’s shown';
    return [`${row.name} (${which}):`, ...innermost.settings.map((s) => `  ${s.name}: ${s.value} (${s.source})`)];
  });
}

/** What the host meter says of each stack's real runs (fidelity-run.ts, `realRunNotes`): the machine, not the stack, may have limited them. */
export function hostLines(run: StacksRun): string[] {
  return run.rows.flatMap((row) => realRunNotes(run.scenario, run.cores, row.real).map((line) => `${row.name}, ${line}`));
}
