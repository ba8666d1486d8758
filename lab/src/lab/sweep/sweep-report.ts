import { num, percent, times } from '../format.js';
import { esc } from '../report/html.js';
import { jsonIsland, pageHead, siblingLink } from '../report/report.js';
import { type CellOutcome, type CellSummary, cellAt, outcome, outcomeCounts, peerOf, scenarioPoint, summaryOf, type SweepCell, type SweepResult, type SweepVariant, type SWEEP_VARIANTS } from './sweep.js';
import { isCachePeer } from '../stacks/stack.js';
import { axisAt, axisSpan, axisTick, axisWord, type SweepAxis } from './sweep-axis.js';
import { worseSentence, worseThanNaive } from './worse.js';

/**
 * The sweep's `sweep.html`: one self-contained page with a heatmap per
 * variant the sweep ran (its two axes across and up), each cell coloured by how
 * that run ended: recovered quickly (greens, by recovery time), recovered
 * slowly (yellow to orange, by recovery time) or stuck (never recovered),
 * the scenario's own setting ringed where it lies between the cells'
 * centres; then the same numbers as tables.
 *
 * The heatmaps are plain SVG written here, so the page has no script to run
 * and loads nothing; nothing reads the clock or the locale, so the same
 * result renders the same bytes.
 */

const VARIANT_NOTES: Record<(typeof SWEEP_VARIANTS)[number], string> = {
  naive: 'the outage’s behaviour, bugs included',
  damper: 'the same traffic through damper',
  'damper-lab': 'damper with the lab’s own settings, beside the configuration',
};

/** What a heatmap's caption says of its variant: a peer stack's is naive's system with the peer in place of the part it replaces. */
function variantNote(v: SweepVariant): string {
  const peer = peerOf(v);
  if (peer === undefined) return VARIANT_NOTES[v as (typeof SWEEP_VARIANTS)[number]];
  return `naive’s system with ${peer.stack} in place of its ${isCachePeer(peer.stack) ? 'servers’ cache' : 'client tiers'}`;
}

/** Heatmap geometry, px. */
const PLOT = 400;
const MARGIN = { left: 92, right: 12, top: 12, bottom: 64 } as const;

/** The three outcomes' colours; recovered cells are shaded within their range by recovery time. */
export const OUTCOME_COLOURS = {
  quick: ['#1a7f37', '#8fd19e'],
  slow: ['#f5d547', '#d9480f'],
  stuck: '#5c0f1e',
} as const;

/** The fill of a cell: quick cells from dark to light green over 0…quickS, slow ones from yellow to orange over quickS…watchedS (log), stuck ones one dark red. */
export function cellColour(cell: CellSummary, quickS: number, watchedS: number): string {
  const r = cell.recoverySeconds;
  if (r === null) return OUTCOME_COLOURS.stuck;
  if (r <= quickS) return mix(OUTCOME_COLOURS.quick[0], OUTCOME_COLOURS.quick[1], quickS > 0 ? r / quickS : 0);
  const span = Math.log(Math.max(watchedS, quickS + 1) / Math.max(quickS, 1));
  return mix(OUTCOME_COLOURS.slow[0], OUTCOME_COLOURS.slow[1], span > 0 ? Math.log(r / Math.max(quickS, 1)) / span : 1);
}

function mix(from: string, to: string, t: number): string {
  const f = Math.min(1, Math.max(0, t));
  const channel = (hex: string, i: number): number => parseInt(hex.slice(1 + 2 * i, 3 + 2 * i), 16);
  return `#${[0, 1, 2].map((i) => Math.round(channel(from, i) + (channel(to, i) - channel(from, i)) * f).toString(16).padStart(2, '0')).join('')}`;
}

const OUTCOME_WORDS: Record<CellOutcome, string> = { quick: 'recovered quickly', slow: 'recovered slowly', stuck: 'stuck' };

function cellText(c: CellSummary): string {
  return c.recoverySeconds === null ? 'stuck' : `${num(c.recoverySeconds, 0)} s`;
}

function cellTitle(result: SweepResult, cell: SweepCell, v: SweepVariant): string {
  const s = summaryOf(cell, v);
  const o = outcome(s, result.quickS);
  const how = o === 'stuck' ? `stuck: not healthy again in the ${num(cell.watchedS, 0)} s watched after the trigger` : `${OUTCOME_WORDS[o]}: healthy ${num(s.recoverySeconds ?? 0, 0)} s after the trigger ended`;
  return `${v} at ${axisAt(result.across, cell.across)}, ${axisAt(result.up, cell.up)}: ${how}; origin peak ${times(s.amplification)} baseline; goodput ${percent(s.goodputRatio)} up to the verdict`;
}

/** An axis's title under or beside a heatmap; the load axis says what 1× is. */
function axisCaption(result: SweepResult, axis: SweepAxis): string {
  return axis.kind === 'load' ? `offered load (× client rates; ${axisTick(axis, 1)} = ${num(result.baseRate, 0)} req/s)` : axis.label;
}

/** "load = 1×, trigger held (s) = 60": the scenario's own setting. */
function ownSetting(result: SweepResult): string {
  return `${axisAt(result.across, result.across.scenarioValue)}, ${axisAt(result.up, result.up.scenarioValue)}`;
}

function renderHeatmap(result: SweepResult, v: SweepVariant): string {
  const loads = result.across.values;
  const triggers = result.up.values;
  const w = PLOT / loads.length;
  const h = PLOT / triggers.length;
  const width = MARGIN.left + PLOT + MARGIN.right;
  const height = MARGIN.top + PLOT + MARGIN.bottom;
  const x = (l: number): number => MARGIN.left + l * w;
  // The up axis grows upwards.
  const y = (t: number): number => MARGIN.top + (triggers.length - 1 - t) * h;
  const fontSize = Math.max(10, Math.min(14, Math.floor(w / 5)));
  const parts: string[] = [];
  for (const [t] of triggers.entries()) {
    for (const [l] of loads.entries()) {
      const cell = cellAt(result, l, t);
      const s = summaryOf(cell, v);
      const o = outcome(s, result.quickS);
      const fill = cellColour(s, result.quickS, cell.watchedS);
      parts.push(
        `<g class="cell ${o}" data-across="${cell.across}" data-up="${cell.up}" data-outcome="${o}"><title>${esc(cellTitle(result, cell, v))}</title>` +
          `<rect x="${fmt(x(l))}" y="${fmt(y(t))}" width="${fmt(w)}" height="${fmt(h)}" fill="${fill}" stroke="#ffffff" stroke-width="1"/>` +
          `<text x="${fmt(x(l) + w / 2)}" y="${fmt(y(t) + h / 2)}" fill="${o === 'stuck' || (o === 'quick' && (s.recoverySeconds ?? 0) < result.quickS / 2) ? '#ffffff' : '#1f2328'}" font-size="${fontSize}" text-anchor="middle" dominant-baseline="central">${esc(cellText(s))}</text></g>`,
      );
    }
  }
  const home = scenarioPoint(result);
  if (home !== null) {
    // Where the setting lies, between the cells' centres (a cell is drawn around its value): the nearest cell would say 1× of a 0.9× scenario.
    const cx = fmt(x(home.across) + w / 2);
    const cy = fmt(y(home.up) + h / 2);
    const r = fmt(Math.max(6, Math.min(14, Math.min(w, h) / 6)));
    parts.push(
      // A black ring over a white one: visible on the dark and the light fills alike.
      `<g class="scenario-point"><title>the scenario’s own setting: ${esc(ownSetting(result))}</title>` +
        `<circle cx="${cx}" cy="${cy}" r="${r}" fill="none" stroke="#ffffff" stroke-width="5"/>` +
        `<circle class="scenario-point" cx="${cx}" cy="${cy}" r="${r}" fill="none" stroke="#000000" stroke-width="2.5"/>` +
        `<circle cx="${cx}" cy="${cy}" r="2" fill="#000000" stroke="#ffffff" stroke-width="1"/></g>`,
    );
  }
  const ticks: string[] = [];
  for (const [l, value] of loads.entries()) {
    const cx = x(l) + w / 2;
    ticks.push(`<line x1="${fmt(cx)}" y1="${MARGIN.top + PLOT}" x2="${fmt(cx)}" y2="${MARGIN.top + PLOT + 5}" stroke="#59636e"/>`);
    ticks.push(`<text class="tick x" x="${fmt(cx)}" y="${MARGIN.top + PLOT + 18}" text-anchor="middle">${axisTick(result.across, value)}</text>`);
  }
  for (const [t, value] of triggers.entries()) {
    const cy = y(t) + h / 2;
    ticks.push(`<line x1="${MARGIN.left - 5}" y1="${fmt(cy)}" x2="${MARGIN.left}" y2="${fmt(cy)}" stroke="#59636e"/>`);
    ticks.push(`<text class="tick y" x="${MARGIN.left - 8}" y="${fmt(cy)}" text-anchor="end" dominant-baseline="central">${axisTick(result.up, value)}</text>`);
  }
  const xTitle = axisCaption(result, result.across);
  const axes = [
    `<text class="axis-title x" x="${MARGIN.left + PLOT / 2}" y="${MARGIN.top + PLOT + 44}" text-anchor="middle">${esc(xTitle)}</text>`,
    `<text class="axis-title y" transform="translate(18 ${MARGIN.top + PLOT / 2}) rotate(-90)" text-anchor="middle">${esc(axisCaption(result, result.up))}</text>`,
    `<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${PLOT}" height="${PLOT}" fill="none" stroke="#59636e"/>`,
  ];
  const counts = outcomeCounts(result, v);
  const label = `${v} heatmap: ${counts.stuck} of ${result.cells.length} cells stuck, ${counts.slow} recovered slowly, ${counts.quick} quickly`;
  return `<figure class="heatmap" data-variant="${esc(v)}" style="width: ${width}px">
<figcaption><span class="variant">${esc(v)}</span> <span class="note">${esc(variantNote(v))}</span></figcaption>
<svg xmlns="http://www.w3.org/2000/svg" class="heatmap" data-variant="${esc(v)}" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${esc(label)}">
${parts.join('\n')}
${ticks.join('\n')}
${axes.join('\n')}
</svg>
<p class="region">${regionSentence(result, v)}</p>
</figure>`;
}

function fmt(v: number): string {
  return String(Number(v.toFixed(2)));
}

/** "stuck in 4 of 9 cells (44 %)": the vulnerable region's size, in words. */
function regionSentence(result: SweepResult, v: SweepVariant): string {
  const c = outcomeCounts(result, v);
  const n = result.cells.length;
  return `Vulnerable region: <strong>${c.stuck} of ${n} cells</strong> (${percent(c.stuck / n)}) stuck; ${c.slow} recovered slowly, ${c.quick} quickly.`;
}

function renderLegend(result: SweepResult): string {
  const gradient = (from: string, to: string): string => `<span class="ramp" style="background: linear-gradient(90deg, ${from}, ${to})"></span>`;
  return `<ul class="legend">
<li>${gradient(OUTCOME_COLOURS.quick[0], OUTCOME_COLOURS.quick[1])}<strong>recovered quickly</strong>: healthy again within ${num(result.quickS, 0)} s of the trigger’s end (darker: sooner); the number is the recovery time</li>
<li>${gradient(OUTCOME_COLOURS.slow[0], OUTCOME_COLOURS.slow[1])}<strong>recovered slowly</strong>: later than that (redder: later, on a log scale up to the end of the run)</li>
<li><span class="swatch" style="background: ${OUTCOME_COLOURS.stuck}"></span><strong>stuck</strong>: never healthy again before the run ended, long after the trigger was gone: the loop sustains itself. These cells are the variant’s vulnerable region.</li>
<li><span class="swatch home"></span><strong>ring</strong>: the scenario’s own setting (${esc(ownSetting(result))})${scenarioPoint(result) === null ? ' — outside this grid' : ', drawn where it lies between the cells’ values (each cell is centred on its own)'}</li>
</ul>`;
}

function renderTable(result: SweepResult, v: SweepVariant): string {
  const loads = result.across.values;
  const head = `<tr><th scope="col">${esc(axisWord(result.up))} ↓ · ${esc(axisWord(result.across))} →</th>${loads.map((l) => `<th scope="col">${axisTick(result.across, l)}</th>`).join('')}</tr>`;
  const rows: string[] = [];
  for (let t = result.up.values.length - 1; t >= 0; t--) {
    const cells = loads.map((_, l) => {
      const s = summaryOf(cellAt(result, l, t), v);
      const o = outcome(s, result.quickS);
      return `<td class="${o}">${esc(cellText(s))}<span class="detail">${times(s.amplification)} · ${percent(s.goodputRatio)}</span></td>`;
    });
    rows.push(`<tr><th scope="row">${axisTick(result.up, result.up.values[t]!)}</th>${cells.join('')}</tr>`);
  }
  return `<table class="grid" data-variant="${esc(v)}">
<caption><span class="variant">${esc(v)}</span>: recovery time after the trigger ended; below, origin peak ÷ baseline · goodput up to the verdict (a cell’s run ends once its verdict is decided)</caption>
<thead>${head}</thead>
<tbody>
${rows.join('\n')}
</tbody>
</table>`;
}

function renderCounts(result: SweepResult): string {
  const head = `<tr><th scope="col">cells</th>${result.variants.map((v) => `<th scope="col">${esc(v)}</th>`).join('')}</tr>`;
  const rows = (['quick', 'slow', 'stuck'] as const).map((o) => `<tr><th scope="row">${OUTCOME_WORDS[o]}</th>${result.variants.map((v) => `<td>${outcomeCounts(result, v)[o]}</td>`).join('')}</tr>`);
  return `<table class="counts">\n<thead>${head}</thead>\n<tbody>\n${rows.join('\n')}\n</tbody>\n</table>`;
}

/** The cells where damper does worse than naive (worse.ts), in a sentence; nothing when there are none. */
function renderWorse(result: SweepResult): string {
  const worse = worseThanNaive(result);
  return worse.length === 0 ? '' : `<p class="worse"><strong>Worse than naive:</strong> ${esc(worseSentence(result, worse))}.</p>\n`;
}

/** "both variants, …", or the three with the lab's own settings beside a configuration. */
function variantsRun(variants: readonly SweepVariant[]): string {
  if (variants.length === 1) return `the ${esc(variants[0]!)} variant`;
  if (variants.length === 2) return 'both variants, on the same seed and traffic';
  return `each of the variants ${esc(variants.join(', '))}, on the same seed and traffic`;
}

/** Renders the whole sweep page; the same result gives the same bytes. */
export function renderSweepReport(result: SweepResult): string {
  const n = result.across.values.length;
  const m = result.up.values.length;
  return `${pageHead(`damper lab sweep — ${result.scenario}, seed ${result.seed}`)}
<style>
${PAGE_CSS}
</style>
</head>
<body>
<header class="page">
<h1>damper lab sweep <span class="name">${esc(result.scenario)}</span></h1>
<p class="title">${esc(result.title)}</p>
<p class="meta">seed ${result.seed} · ${n} × ${m} = ${result.cells.length} cells; across: ${esc(axisSpan(result.across))}; up: ${esc(axisSpan(result.up))}. Each cell is one run of the scenario under ${variantsRun(result.variants)}. ${
    result.operators
      ? 'The scenario’s operator actions are kept.'
      : 'The scenario’s operator actions are removed: the question is whether the system recovers by itself.'
  }</p>
${siblingLink('report.html', 'the replay of the scenario’s own point over time, both variants, chart by chart', ['damper lab'])}
</header>
<main>
<section class="maps">
${result.variants.map((v) => renderHeatmap(result, v)).join('\n')}
</section>
${renderLegend(result)}
${renderWorse(result)}<section class="tables">
<h2>The numbers</h2>
${renderCounts(result)}
${result.variants.map((v) => renderTable(result, v)).join('\n')}
</section>
</main>
<footer class="page">Made by <code>damper lab sweep</code> or <code>damper lab check</code>; the page is plain HTML and SVG and loads nothing from the network. Hover a cell for its figures. The same data is in <code>sweep.json</code> and below.</footer>
<script type="application/json" id="sweep-data">${jsonIsland(result)}</script>
</body>
</html>
`;
}

const PAGE_CSS = `
:root { --text: #1f2328; --muted: #59636e; --rule: #d8dee4; --panel: #f6f8fa; }
* { box-sizing: border-box; }
html { background: #fff; }
body {
  margin: 0 auto; max-width: 1280px; padding: 24px 32px 48px;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", "Liberation Sans", sans-serif;
  color: var(--text); background: #fff;
}
h1 { font-size: 26px; margin: 0 0 4px; }
h1 .name { font: 15px ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; color: var(--muted); font-weight: normal; margin-left: 8px; }
h2 { font-size: 20px; margin: 28px 0 8px; }
.title { margin: 0 0 4px; font-weight: 600; }
.meta { color: var(--muted); margin: 0 0 16px; max-width: 100ch; }
.maps { display: flex; flex-wrap: wrap; gap: 16px 40px; }
figure.heatmap { margin: 0; flex: 0 0 auto; }
figure.heatmap figcaption { font-size: 17px; font-weight: 600; border-bottom: 2px solid var(--rule); margin-bottom: 6px; }
figure.heatmap figcaption .note { font-size: 13px; font-weight: normal; color: var(--muted); margin-left: 6px; }
svg.heatmap { display: block; font-family: inherit; }
svg.heatmap .tick { font-size: 12px; fill: var(--muted); font-variant-numeric: tabular-nums; }
svg.heatmap .axis-title { font-size: 13px; fill: var(--text); }
svg.heatmap .cell text { font-variant-numeric: tabular-nums; pointer-events: none; }
.region { margin: 6px 0 0; }
p.worse { margin: 14px 0 0; padding: 8px 14px; border-left: 4px solid #8e1b1b; background: #fbeaea; max-width: 100ch; }
ul.legend { list-style: none; padding: 10px 14px; margin: 18px 0 0; background: var(--panel); font-size: 14px; max-width: 100ch; }
ul.legend li { margin: 4px 0; }
.ramp, .swatch { display: inline-block; width: 44px; height: 14px; vertical-align: -2px; margin-right: 8px; border: 1px solid rgba(0, 0, 0, 0.2); }
.swatch { width: 14px; }
.swatch.home { background: #fff; border: 2.5px solid #000; border-radius: 50%; }
p.sibling { color: var(--muted); margin: 0 0 16px; }
table { border-collapse: collapse; font-size: 14px; font-variant-numeric: tabular-nums; margin: 12px 0 20px; }
caption { text-align: left; color: var(--muted); padding-bottom: 4px; }
caption .variant { color: var(--text); font-weight: 600; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--rule); text-align: right; }
thead th { border-bottom: 2px solid var(--rule); font-weight: 600; }
tbody th { color: var(--muted); font-weight: normal; }
td.stuck { color: #8e1b1b; font-weight: 600; }
td.slow { color: #9a3412; }
td .detail { display: block; font-size: 12px; color: var(--muted); font-weight: normal; }
footer.page { margin-top: 40px; padding-top: 12px; border-top: 1px solid var(--rule); color: var(--muted); font-size: 13px; }
`;
