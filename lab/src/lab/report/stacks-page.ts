import { type Series } from '../judge/results.js';
import { triggerEndS, triggerStartS } from '../scenario.js';
import { type StacksRun } from '../stacks/stacks-run.js';
import { hostLines, realTable, settingLines, simulatedTable } from '../stacks/stacks-table.js';
import { esc } from './report.js';

/**
 * `stacks.html`: the side-by-side page of `damper lab stacks` (issue 31).
 * Each stack's per-second goodput on one chart (the simulation's, and the
 * first real run's when there were real runs), the trigger shaded, then the
 * tables and every peer setting with its source. Self-contained: the
 * charts are inline SVG, no script.
 */

/** Colours by row, in order: naive red, the peers in between, damper (last) blue. */
const PALETTE = ['#c0392b', '#8e44ad', '#d68910', '#16a085', '#7f8c8d', '#2e86c1'];

const WIDTH = 900;
const HEIGHT = 260;
const PAD = { left: 48, right: 12, top: 12, bottom: 28 };

/** Served calls per second as a share of the calls the users sent that second. */
function servedShare(series: Series): (number | null)[] {
  return series.offered.map((sent, i) => (sent === 0 ? null : series.goodput[i]! / sent));
}

function chart(run: StacksRun, title: string, seriesOf: (row: StacksRun['rows'][number]) => Series | undefined): string {
  const seconds = Math.ceil(run.scenario.durationS);
  const x = (s: number): number => PAD.left + (s / seconds) * (WIDTH - PAD.left - PAD.right);
  const y = (v: number): number => PAD.top + (1 - v) * (HEIGHT - PAD.top - PAD.bottom);
  const from = x(triggerStartS(run.scenario));
  const to = x(triggerEndS(run.scenario));
  const lines = run.rows.map((row, i) => {
    const series = seriesOf(row);
    if (series === undefined) return '';
    const points = servedShare(series).flatMap((v, s) => (v === null ? [] : [`${x(s + 0.5).toFixed(1)},${y(v).toFixed(1)}`]));
    return `<polyline fill="none" stroke="${PALETTE[i % PALETTE.length]}" stroke-width="1.5" points="${points.join(' ')}"><title>${esc(row.name)}</title></polyline>`;
  });
  const ticks = [0, 0.5, 1].map((v) => `<text x="${PAD.left - 6}" y="${y(v) + 4}" text-anchor="end">${v * 100}%</text><line x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`);
  const step = seconds > 300 ? 120 : seconds > 60 ? 30 : 10;
  const xTicks = Array.from({ length: Math.floor(seconds / step) + 1 }, (_, k) => `<text x="${x(k * step)}" y="${HEIGHT - 8}" text-anchor="middle">${k * step} s</text>`);
  const legend = run.rows.map((row, i) => `<span style="color:${PALETTE[i % PALETTE.length]}">■ ${esc(row.name)}</span>`).join(' ');
  return `<h2>${esc(title)}</h2>
<p class="legend">${legend}</p>
<svg viewBox="0 0 ${WIDTH} ${HEIGHT}" width="${WIDTH}" height="${HEIGHT}" role="img" aria-label="${esc(title)}" font-size="11" font-family="sans-serif">
<rect x="${from}" y="${PAD.top}" width="${Math.max(1, to - from)}" height="${HEIGHT - PAD.top - PAD.bottom}" fill="#f6d8d8"><title>trigger</title></rect>
${ticks.join('\n')}
${xTicks.join('\n')}
${lines.join('\n')}
</svg>`;
}

/** A Markdown table (stacks-table.ts) as HTML. */
function htmlTable(lines: readonly string[]): string {
  const cells = (line: string): string[] => line.slice(1, -1).split('|').map((c) => c.trim());
  const [head, , ...body] = lines;
  if (head === undefined) return '';
  return `<table>
<tr>${cells(head).map((c) => `<th>${esc(c)}</th>`).join('')}</tr>
${body.map((l) => `<tr>${cells(l).map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('\n')}
</table>`;
}

export function renderStacks(run: StacksRun): string {
  const s = run.scenario;
  const real = realTable(run);
  const fitted = run.fitting === undefined ? '' : `<p>Fitted to this machine: scale ${run.fitting.scale}, durations ÷ ${run.fitting.timeScale}; ${run.rows[0]?.real.length ?? 0} real runs per stack, taking turns, on ${run.cores} cores.</p>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>${esc(s.name)}: stacks side by side</title>
<link rel="icon" href="data:,">
<style>body{font-family:sans-serif;max-width:960px;margin:1em auto;color:#222}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}.legend span{margin-right:1em}pre{white-space:pre-wrap;font-size:12px}</style>
</head><body>
<h1>${esc(s.name)}: the same outage under each stack</h1>
<p>${esc(s.title)}</p>
<p>Seed ${run.seed}. A peer stack replaces the client tiers only; the rest of the system is naive's. The share of each second's calls served in time; the trigger shaded.</p>
${fitted}
${chart(run, 'Simulated: calls served per second', (row) => row.simulated.series)}
${real.length === 0 ? '' : chart(run, 'Real (each stack’s first run): calls served per second', (row) => row.real[0]?.series)}
<h2>Simulated</h2>
${htmlTable(simulatedTable(run))}
${real.length === 0 ? '' : `<h2>Real: median [lowest–highest]</h2>\n${htmlTable(real)}`}
${hostLines(run).length === 0 ? '' : `<h2>The host itself</h2>\n<pre>${esc(hostLines(run).join('\n'))}</pre>`}
<h2>Each peer's settings, and where its library documents them</h2>
<pre>${esc(settingLines(run).join('\n'))}</pre>
</body></html>
`;
}
