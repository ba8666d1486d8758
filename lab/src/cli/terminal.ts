import { millis, percent, times } from '../lab/format.js';
import { columnsOf, type LabRun, VARIANTS } from '../lab/judge/results.js';
import { type CellOutcome, cellAt, outcome, outcomeCounts, peerOf, scenarioCell, summaryOf, type SweepResult, type SweepVariant, vulnerableCells } from '../lab/sweep/sweep.js';
import { axisAt, axisSpan, axisTick, axisWord } from '../lab/sweep/sweep-axis.js';
import { type WorseCell, worseSentence, worseThanNaive } from '../lab/sweep/worse.js';

/**
 * What the `damper lab` command shows in a terminal: a progress bar while the
 * simulation runs and a summary table at the end. Kept apart from argument
 * parsing so each stays small.
 */

export interface ProgressBar {
  update(fraction: number, label: string): void;
  done(): void;
}

/**
 * A one-line bar redrawn in place on a TTY. On a pipe or in CI it prints a
 * line at each new label instead, so logs stay readable.
 */
export function progressBar(stream: NodeJS.WriteStream, width = 30): ProgressBar {
  let lastLabel = '';
  let lastDrawn = -1;
  return {
    update(fraction, label) {
      const pct = Math.floor(Math.min(1, Math.max(0, fraction)) * 100);
      if (!stream.isTTY) {
        if (label !== lastLabel) stream.write(`  running ${label}\n`);
        lastLabel = label;
        return;
      }
      if (pct === lastDrawn && label === lastLabel) return;
      lastDrawn = pct;
      lastLabel = label;
      const filled = Math.round((pct / 100) * width);
      stream.write(`\r  [${'█'.repeat(filled)}${'░'.repeat(width - filled)}] ${String(pct).padStart(3)}%  ${label.padEnd(32)}`);
    },
    done() {
      if (stream.isTTY && lastDrawn >= 0) stream.write('\r\x1b[2K');
    },
  };
}

/** The end-of-run table: one row per scenario and variant (and peer stack, `--stack`, between the two), then each scenario's verdict. */
export function formatSummary(run: LabRun, speed: (scenario: string, variant: string, requests: number) => number): string {
  const header = ['scenario', 'variant', 'during: served', 'of best', 'after: recovery', 'origin peak', 'amplif.', 'goodput', 'errors', 'p99 ms', 'sim req/s'];
  const rows: string[][] = [];
  for (const s of run.scenarios) {
    for (const { name, run: judged } of columnsOf(s)) {
      const m = judged.summary;
      rows.push([
        s.name,
        name,
        percent(m.trigger.goodputRatio),
        percent(m.trigger.efficiency),
        m.recoverySeconds === null ? 'never' : m.operatorForced ? `${m.recoverySeconds} s, forced` : `${m.recoverySeconds} s`,
        `${m.peakOriginQps.toFixed(0)}/s`,
        times(m.amplification),
        percent(m.goodputRatio),
        percent(m.errorRate),
        millis(m.p99Ms),
        `${Math.round(speed(s.name, name, m.simulatedRequests) / 1000)}k`,
      ]);
    }
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]): string => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const verdicts = run.scenarios.map((s) => `${s.name}: ${s.verdict}`);
  for (const s of run.scenarios) for (const o of s.stacks ?? []) if ('problem' in o) verdicts.push(`${s.name}: ${o.name} did not run: ${o.problem}`);
  const legend = 'during: goodput ÷ offered over the trigger, and ÷ the best possible with the capacity left; after: seconds from the trigger\'s end to recovery ("forced": only after an operator action)';
  return [`damper lab, seed ${run.seed}`, '', line(header), line(widths.map((w) => '─'.repeat(w))), ...rows.map(line), '', legend, '', ...verdicts].join('\n');
}

const SYMBOLS: Record<CellOutcome, string> = { quick: '·', slow: 'o', stuck: '█' };

/**
 * One variant's grid in characters (the up axis up, the across axis across;
 * `·` recovered quickly, `o` slowly, `█` stuck, the cell nearest the
 * scenario's own setting in brackets), under a line with how many cells
 * were stuck.
 */
export function formatGrid(result: SweepResult, v: SweepVariant): string[] {
  const across = result.across.values;
  const up = result.up.values;
  const home = scenarioCell(result);
  const yWidth = Math.max(...up.map((u) => axisTick(result.up, u).length));
  const col = Math.max(5, ...across.map((a) => axisTick(result.across, a).length + 2));
  const c = outcomeCounts(result, v);
  const lines = [`${v}: ${c.stuck} of ${result.cells.length} cells stuck, ${c.slow} recovered slowly, ${c.quick} quickly`];
  for (let u = up.length - 1; u >= 0; u--) {
    const row = across.map((_, a) => {
      const s = SYMBOLS[outcome(summaryOf(cellAt(result, a, u), v), result.quickS)];
      const cell = home !== null && home.across === a && home.up === u ? `[${s}]` : s;
      return cell.padStart(Math.ceil((col + cell.length) / 2)).padEnd(col);
    });
    lines.push(`  ${axisTick(result.up, up[u]!).padStart(yWidth)} │${row.join('')}`);
  }
  lines.push(`  ${' '.repeat(yWidth)} └${'─'.repeat(col * across.length)}`);
  lines.push(`  ${' '.repeat(yWidth)}  ${across.map((a) => axisTick(result.across, a).padStart(Math.ceil((col + axisTick(result.across, a).length) / 2)).padEnd(col)).join('')}`);
  return lines;
}

/** What the brackets mark: the scenario's own setting when it is a grid point, else the cell nearest it; or that it lies outside. */
function homeLegend(result: SweepResult): string {
  const own = `${axisAt(result.across, result.across.scenarioValue)}, ${axisAt(result.up, result.up.scenarioValue)}`;
  const home = scenarioCell(result);
  if (home === null) return `(the scenario's own setting, ${own}, is outside this grid)`;
  const onGrid = result.across.values[home.across] === result.across.scenarioValue && result.up.values[home.up] === result.up.scenarioValue;
  return onGrid ? "[ ] the scenario's own setting" : `[ ] the cell nearest the scenario's own setting (${own})`;
}

/** The grid's heading and legend: its size, its axes, the symbols. */
export function formatGridHeading(result: SweepResult, command: string): string[] {
  return [
    `damper ${command} ${result.scenario}, seed ${result.seed}: ${result.across.values.length} × ${result.up.values.length} cells; across: ${axisSpan(result.across, '..')}; up: ${axisSpan(result.up, '..')}`,
    `· recovered within ${result.quickS} s of the trigger's end   o recovered later   █ stuck (never recovered)   ${homeLegend(result)}${result.operators ? '' : '; operator actions removed'}`,
  ];
}

/** The end of `damper lab sweep`: per variant, its grid in characters; then the two regions' sizes compared. */
export function formatSweepSummary(result: SweepResult): string {
  const lines = formatGridHeading(result, 'lab sweep');
  for (const v of result.variants) lines.push('', ...formatGrid(result, v));
  const n = result.cells.length;
  const [naive, damper] = VARIANTS.map((v) => (result.variants.includes(v) ? vulnerableCells(result, v).length : undefined));
  if (naive !== undefined && damper !== undefined) {
    const verdict = damper < naive ? `damper's is smaller by ${naive - damper} cells` : damper === naive ? 'the same size' : `damper's is larger by ${damper - naive} cells`;
    const region = (v: SweepVariant, stuck: number): string => `${v} ${stuck}/${n} (${Math.round((100 * stuck) / n)} %)`;
    // A peer stack's region (--stack) between naive's and damper's, as in lab stacks' table.
    const peers = result.variants.filter((v) => peerOf(v) !== undefined).map((v) => region(v, vulnerableCells(result, v).length));
    lines.push('', `vulnerable region (stuck cells): ${[region('naive', naive), ...peers, region('damper', damper)].join(', ')}: ${verdict}${peers.length === 0 ? '' : ' than naive\'s'}`);
  }
  const worse = worseLine(result, worseThanNaive(result));
  if (worse !== undefined) lines.push(worse);
  return lines.join('\n');
}

/**
 * The one line that says the damper variant does worse than naive
 * (worse.ts: stuck where naive recovers, or recovered more than
 * LATER_BY_S seconds after it), naming the cells; undefined when it does not.
 */
export function worseLine(result: SweepResult, worse: readonly WorseCell[]): string | undefined {
  return worse.length === 0 ? undefined : `WORSE THAN NAIVE: ${worseSentence(result, worse)}`;
}

/**
 * Per cell, every variant's recovery after the trigger and goodput up to
 * its verdict, side by side; the cells where damper does worse than naive
 * marked.
 */
export function formatCellTable(result: SweepResult, worse: readonly WorseCell[]): string[] {
  const figures = (v: SweepVariant, cell: SweepResult['cells'][number]): string => {
    const s = summaryOf(cell, v);
    return `${s.recoverySeconds === null ? 'stuck' : `${s.recoverySeconds} s`}, ${percent(s.goodputRatio)}`;
  };
  const header = [`${axisWord(result.across)} × ${axisWord(result.up)}`, ...result.variants];
  const rows = result.cells.map((c) => [`${axisTick(result.across, c.across)} × ${axisTick(result.up, c.up)}`, ...result.variants.map((v) => figures(v, c))]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]): string => `  ${cells.map((c, i) => c.padEnd(widths[i]!)).join('   ')}`.trimEnd();
  const marked = new Set(worse.map((w) => w.cell));
  return [
    'each cell: recovery after the trigger, goodput up to the verdict',
    line(header),
    ...result.cells.map((c, i) => `${line(rows[i]!)}${marked.has(c) ? '   ← worse than naive' : ''}`),
  ];
}
