import { triggerEndS, triggerStartS } from '../scenario.js';
import { type StacksRun } from '../stacks/stacks-run.js';
import { hostLines, realTable, settingLines, simulatedTable } from '../stacks/stacks-table.js';
import { esc } from './html.js';
import { servedChart } from './served-chart.js';

/**
 * `stacks.html`: the side-by-side page of `damper lab stacks` (issue 31).
 * Each stack's per-second goodput on one chart (the simulation's, and the
 * first real run's when there were real runs), the trigger shaded, then the
 * tables and every peer setting with its source. Self-contained: the
 * charts are inline SVG, no script.
 */

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
  const timeline = { durationS: s.durationS, triggerStartS: triggerStartS(s), triggerEndS: triggerEndS(s) };
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
${servedChart(timeline, 'Simulated: calls served per second', run.rows.map((row) => ({ name: row.name, series: row.simulated.series })))}
${real.length === 0 ? '' : servedChart(timeline, 'Real (each stack’s first run): calls served per second', run.rows.map((row) => ({ name: row.name, series: row.real[0]?.series })))}
<h2>Simulated</h2>
${htmlTable(simulatedTable(run))}
${real.length === 0 ? '' : `<h2>Real: median [lowest–highest]</h2>\n${htmlTable(real)}`}
${hostLines(run).length === 0 ? '' : `<h2>The host itself</h2>\n<pre>${esc(hostLines(run).join('\n'))}</pre>`}
<h2>Each peer's settings, and where its library documents them</h2>
<pre>${esc(settingLines(run).join('\n'))}</pre>
</body></html>
`;
}
