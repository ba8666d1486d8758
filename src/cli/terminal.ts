import { type LabRun, VARIANTS, type VariantName } from '../lab/results.js';

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
  const header = ['scenario', 'variant', 'recovered', 'recovery s', 'origin peak', 'amplif.', 'goodput', 'errors', 'p99 ms', 'sim req/s'];
  const rows: string[][] = [];
  for (const s of run.scenarios) {
    for (const v of VARIANTS) {
      const m = s.variants[v].summary;
      rows.push([
        s.name,
        v,
        m.recovered ? 'yes' : 'no',
        m.recoverySeconds === null ? '—' : String(m.recoverySeconds),
        `${m.peakOriginQps.toFixed(0)}/s`,
        `${m.amplification.toFixed(1)}×`,
        `${(m.goodputRatio * 100).toFixed(1)}%`,
        `${(m.errorRate * 100).toFixed(1)}%`,
        String(m.p99Ms),
        `${Math.round(speed(s.name, v, m.simulatedRequests) / 1000)}k`,
      ]);
    }
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]): string => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const verdicts = run.scenarios.map((s) => `${s.name}: ${s.verdict}`);
  return [`damper lab, seed ${run.seed}`, '', line(header), line(widths.map((w) => '─'.repeat(w))), ...rows.map(line), '', ...verdicts].join('\n');
}
