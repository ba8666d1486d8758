import { columnsOf, type ScenarioRun } from '../judge/results.js';

/**
 * A run's per-second series as CSV (`damper lab --series`), so a run can be
 * analysed outside the lab: a spreadsheet, pandas, gnuplot. One row per
 * simulated second, each request in the second it was sent; an empty cell
 * where there is no value (no request sent, so no p99). Derived from the run alone: the same seed writes the same bytes.
 */

const COLUMNS = ['second', 'offered', 'goodput', 'best_goodput', 'errors', 'origin_qps', 'origin_capacity_qps', 'p99_ms', 'in_flight'] as const;

/** The CSV of one variant (or peer stack that ran, `--stack`) of one scenario. */
export function seriesCsv(run: ScenarioRun, variant: string): string {
  const column = columnsOf(run).find((c) => c.name === variant);
  if (column === undefined) throw new Error(`damper: ${run.name} has no run named ${variant}`);
  const s = column.run.series;
  const rows: string[] = [COLUMNS.join(',')];
  for (let t = 0; t < s.offered.length; t++) {
    const p99 = s.p99Ms[t];
    rows.push([t, s.offered[t], s.goodput[t], s.bestGoodput[t], s.errors[t], s.originQps[t], run.originCapacity[t], p99 ?? '', s.inFlight[t]].join(','));
  }
  return `${rows.join('\n')}\n`;
}

/** The file a variant's series goes to, inside the output folder; a peer's knobs after dots, not colons, which some file systems refuse (`retry-storm.cockatiel.bulkhead=8.csv`). */
export function seriesFile(run: ScenarioRun, variant: string): string {
  return `series/${run.name}.${variant.replaceAll(':', '.')}.csv`;
}
