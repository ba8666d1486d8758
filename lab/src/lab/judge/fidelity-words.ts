import { exact, millis, num, percent, times } from '../format.js';
import { type Fidelity } from '../real/real-run.js';
import {
  AMPLIFICATION_BAR_SHARE,
  BASELINE_FLOOR_QPS,
  compareFidelity,
  type Figure,
  type FigureComparison,
  RECOVERY_BAR_S,
  RECOVERY_BAR_SHARE,
  recoveryBarS,
  TRIGGER_GOODPUT_BAR,
  type VerdictClass,
} from './fidelity.js';

/**
 * The fidelity comparison (fidelity.ts) in words, for the fidelity page and
 * the terminal alike: what each figure is called, how its values and its bar
 * are written, and the table as aligned text.
 */

/** What each figure is called on the page and in the terminal. */
export const FIGURE_TITLES: Readonly<Record<Figure, string>> = {
  verdict: 'verdict',
  triggerGoodput: 'goodput during the trigger',
  recoverySeconds: 'recovery',
  amplification: 'origin amplification',
  peakOriginQps: 'origin peak',
  errorRate: 'error rate',
  p99Ms: 'p99 latency',
};

/** A longer note on each figure, for the page's table. */
export const FIGURE_NOTES: Readonly<Record<Figure, string>> = {
  verdict: 'stayed healthy, recovered, recovered only after the operators acted, or stuck',
  triggerGoodput: 'served ÷ offered, from the trigger’s start to its end',
  recoverySeconds: 'from the trigger’s end to the first of the objective’s healthy seconds in a row',
  amplification: 'peak ÷ baseline origin queries/s',
  peakOriginQps: `peak origin queries/s: compared instead of amplification, a baseline being under ${num(BASELINE_FLOOR_QPS, 0)} q/s`,
  errorRate: 'failed ÷ ended, whole run; for information',
  p99Ms: 'whole run; for information',
};

/** A figure's value as people read it: `41.2%`, `12 s`, `never`, `3.4×`, `17 q/s`, `250 ms`, or a verdict. */
export function figureValue(figure: Figure, value: number | null | VerdictClass): string {
  if (typeof value === 'string') return value;
  if (value === null) return figure === 'recoverySeconds' ? 'never' : '–';
  switch (figure) {
    case 'triggerGoodput':
    case 'errorRate':
      return percent(value);
    case 'recoverySeconds':
      return `${num(value, 0)} s`;
    case 'amplification':
      return times(value);
    case 'peakOriginQps':
      return `${num(value, Math.abs(value) >= 100 ? 0 : 1)} q/s`;
    case 'p99Ms':
      return `${millis(value)} ms`;
    case 'verdict':
      return String(value);
  }
}

/** The bar a figure is held to, around its simulated value: `±10 points`, `±3 s`, `never, as simulated`; `not judged` for the figures shown only. */
export function barWords(c: FigureComparison): string {
  if (c.role === 'shown') return 'not judged';
  switch (c.figure) {
    case 'verdict':
      return 'the same in every run';
    case 'triggerGoodput':
      return `±${num(TRIGGER_GOODPUT_BAR * 100, 0)} points`;
    case 'recoverySeconds':
      return c.simulated === null ? 'never, as simulated' : `±${num(recoveryBarS(c.simulated), 0)} s (max(${num(RECOVERY_BAR_S, 0)} s, ${num(RECOVERY_BAR_SHARE * 100, 0)}%))`;
    default:
      return `±${num(AMPLIFICATION_BAR_SHARE * 100, 0)}%${c.figure === 'peakOriginQps' ? ` (at least ${num(BASELINE_FLOOR_QPS, 0)} q/s)` : ''}`;
  }
}

/** The real runs in one phrase: `stuck ×3`, `recovered ×2, stuck ×1`; `41.2% [38.1%–42.0%]` (median, then lowest–highest). */
export function realWords(c: FigureComparison): string {
  if (c.figure === 'verdict') {
    const counts = new Map<VerdictClass, number>();
    for (const v of c.real) counts.set(v, (counts.get(v) ?? 0) + 1);
    return [...counts].map(([v, n]) => `${v} ×${n}`).join(', ');
  }
  const f = (x: number | null): string => figureValue(c.figure, x);
  return c.real.length === 1 ? f(c.spread.median) : `${f(c.spread.median)} [${f(c.spread.min)}–${f(c.spread.max)}]`;
}

/** `✓ 3/3`, `✗ 2/3`; empty for a figure shown only. */
export function agreementWords(c: FigureComparison): string {
  if (c.agrees === null || c.agreeing === null) return '';
  return `${c.agrees ? '✓' : '✗'} ${c.agreeing}/${c.real.length}`;
}

/**
 * The comparison for the terminal: a heading, then one aligned line per
 * variant and figure (simulated; real median [lowest–highest]; the bar; how
 * many runs agree), then one line saying whether it all agrees.
 */
export function fidelityLines(f: Fidelity): string[] {
  const compared = compareFidelity(f);
  const runs = Math.max(0, ...compared.map((c) => c.row.runs));
  const header = ['variant', 'figure', 'simulated', 'real: median [min–max]', 'bar', 'agree'];
  const rows = compared.flatMap(({ variant, row }) => row.figures.map((c) => [variant, FIGURE_TITLES[c.figure], figureValue(c.figure, c.simulated), realWords(c), barWords(c), agreementWords(c)]));
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]): string => cells.map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ').trimEnd();
  const disagreeing = compared.filter((c) => !c.row.agrees).map((c) => c.variant);
  return [
    `damper lab real ${f.scenario.name}, seed ${f.seed}: the simulation against ${runs} real run${runs === 1 ? '' : 's'} per variant (${fittingWords(f)})`,
    '',
    line(header),
    line(widths.map((w) => '─'.repeat(w))),
    ...rows.map(line),
    '',
    disagreeing.length === 0 ? 'The simulation and the real runs agree on every judged figure.' : `They disagree for ${disagreeing.join(' and ')}: one of the two is wrong, the model or the real setup.`,
  ];
}

/** How the scenario was fitted to the machine, in words: `fitted to this machine: scale 0.5, durations ÷ 4`. */
export function fittingWords(f: Fidelity): string {
  const rounded = (f.fitting.rounded ?? []).map((r) => `${r.field} ${exact(r.fitted)} → ${r.rounded}`);
  return `fitted to this machine: scale ${exact(f.fitting.scale)}, durations ÷ ${exact(f.fitting.timeScale)}${rounded.length === 0 ? '' : `; rounded to whole numbers: ${rounded.join(', ')}`}`;
}
