import { millis, percent, times } from '../lab/format.js';
import { type LabRun, VARIANTS, type VariantName } from '../lab/results.js';
import { type CellOutcome, outcome, outcomeCounts, scenarioCell, type SweepResult, vulnerableCells } from '../lab/sweep.js';

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

/** The end-of-run table: one row per scenario and variant, then each scenario's verdict. */
export function formatSummary(run: LabRun, speed: (scenario: string, variant: VariantName, requests: number) => number): string {
  const header = ['scenario', 'variant', 'during: served', 'of best', 'after: recovery', 'origin peak', 'amplif.', 'goodput', 'errors', 'p99 ms', 'sim req/s'];
  const rows: string[][] = [];
  for (const s of run.scenarios) {
    for (const v of VARIANTS) {
      const m = s.variants[v].summary;
      rows.push([
        s.name,
        v,
        percent(m.trigger.goodputRatio),
        percent(m.trigger.efficiency),
        m.recoverySeconds === null ? 'never' : m.operatorForced ? `${m.recoverySeconds} s, forced` : `${m.recoverySeconds} s`,
        `${m.peakOriginQps.toFixed(0)}/s`,
        times(m.amplification),
        percent(m.goodputRatio),
        percent(m.errorRate),
        millis(m.p99Ms),
        `${Math.round(speed(s.name, v, m.simulatedRequests) / 1000)}k`,
      ]);
    }
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]): string => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const verdicts = run.scenarios.map((s) => `${s.name}: ${s.verdict}`);
  const legend = 'during: goodput ÷ offered over the trigger, and ÷ the best possible with the capacity left; after: seconds from the trigger\'s end to recovery ("forced": only after an operator action)';
  return [`damper lab, seed ${run.seed}`, '', line(header), line(widths.map((w) => '─'.repeat(w))), ...rows.map(line), '', legend, '', ...verdicts].join('\n');
}

const SYMBOLS: Record<CellOutcome, string> = { quick: '·', slow: 'o', stuck: '█' };

/**
 * The end of `damper lab sweep`: per variant, the grid in characters (trigger
 * size up, load across; `·` recovered quickly, `o` slowly, `█` stuck, the
 * scenario's own cell in brackets) and how many cells were stuck.
 */
export function formatSweepSummary(result: SweepResult): string {
  const loads = result.load.values;
  const triggers = result.trigger.values;
  const home = scenarioCell(result);
  const label = (v: number): string => String(Number(v.toPrecision(4)));
  const yWidth = Math.max(...triggers.map((t) => label(t).length));
  const col = Math.max(5, ...loads.map((l) => label(l).length + 2));
  const lines = [
    `damper lab sweep ${result.scenario}, seed ${result.seed}: ${loads.length} × ${triggers.length} cells; load ${label(loads[0]!)}×..${label(loads[loads.length - 1]!)}× across, ${result.trigger.label} ${label(triggers[0]!)}..${label(triggers[triggers.length - 1]!)} up`,
    `· recovered within ${result.quickS} s of the trigger's end   o recovered later   █ stuck (never recovered)   ${home === null ? `(the scenario's own setting, ${label(result.load.scenarioValue)}× at ${label(result.trigger.scenarioValue)}, is outside this grid)` : "[ ] the scenario's own setting"}${result.operators ? '' : '; operator actions removed'}`,
  ];
  for (const v of VARIANTS) {
    const c = outcomeCounts(result, v);
    lines.push('', `${v}: ${c.stuck} of ${result.cells.length} cells stuck, ${c.slow} recovered slowly, ${c.quick} quickly`);
    for (let t = triggers.length - 1; t >= 0; t--) {
      const row = loads.map((_, l) => {
        const s = SYMBOLS[outcome(result.cells[t * loads.length + l]!.variants[v], result.quickS)];
        const cell = home !== null && home.load === l && home.trigger === t ? `[${s}]` : s;
        return cell.padStart(Math.ceil((col + cell.length) / 2)).padEnd(col);
      });
      lines.push(`  ${label(triggers[t]!).padStart(yWidth)} │${row.join('')}`);
    }
    lines.push(`  ${' '.repeat(yWidth)} └${'─'.repeat(col * loads.length)}`);
    lines.push(`  ${' '.repeat(yWidth)}  ${loads.map((l) => `${label(l)}×`.padStart(Math.ceil((col + label(l).length + 1) / 2)).padEnd(col)).join('')}`);
  }
  const naive = vulnerableCells(result, 'naive').length;
  const damper = vulnerableCells(result, 'damper').length;
  const n = result.cells.length;
  const verdict = damper < naive ? `damper's is smaller by ${naive - damper} cells` : damper === naive ? 'the same size' : `damper's is larger by ${damper - naive} cells`;
  lines.push('', `vulnerable region (stuck cells): naive ${naive}/${n} (${Math.round((100 * naive) / n)} %), damper ${damper}/${n} (${Math.round((100 * damper) / n)} %): ${verdict}`);
  return lines.join('\n');
}
