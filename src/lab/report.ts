import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { VARIANTS, type FaultSpan, type LabRun, type ScenarioRun, type Series, type VariantName, type VariantSummary } from './results.js';

/**
 * The lab's `report.html`: one self-contained page (no network at all) with
 * each scenario's verdict, a summary table and, per metric, the naive and the
 * damper variant side by side on the same y range, fault spans shaded.
 *
 * uPlot and its stylesheet are read from `node_modules` at render time and
 * inlined; the series travel as a JSON data island and are handed to uPlot as
 * they are (x = index = simulated second). Nothing here reads the clock or
 * the locale, so the same run renders the same bytes.
 */

/** One chart row of a scenario: what it plots and how the page labels it. */
export interface ReportMetric {
  readonly key: 'offered' | 'goodput' | 'originQps' | 'errorRate' | 'p99Ms' | 'hitRatio';
  readonly title: string;
  readonly help: string;
  /** Shown on the y axis; `%` means the values are ratios in [0, 1]. */
  readonly unit: 'req/s' | 'q/s' | '%' | 'ms';
}

/** The charts drawn for every scenario, top to bottom; each once per variant. */
export const REPORT_METRICS: readonly ReportMetric[] = [
  { key: 'offered', title: 'Offered load', help: 'requests clients started per second, first attempts and retries', unit: 'req/s' },
  { key: 'goodput', title: 'Goodput', help: 'requests answered with a valid value within the client’s timeout, per second', unit: 'req/s' },
  { key: 'originQps', title: 'Origin queries', help: 'queries that reached the database per second; dashed line: its capacity', unit: 'q/s' },
  { key: 'errorRate', title: 'Error rate', help: 'errors ÷ (goodput + errors), per second', unit: '%' },
  { key: 'p99Ms', title: 'p99 latency', help: '99th percentile of the requests that ended in that second; dashed line: the objective', unit: 'ms' },
  { key: 'hitRatio', title: 'Cache hit ratio', help: 'share of requests answered without waiting for the origin', unit: '%' },
];

const VARIANT_NOTES: Record<VariantName, string> = {
  naive: 'the outage’s behaviour, bugs included',
  damper: 'the same traffic through damper',
};

/** What the page's script reads: the series exactly as the run produced them, plus what the charts draw over them. */
interface ChartData {
  readonly seed: number;
  readonly metrics: readonly ReportMetric[];
  readonly scenarios: readonly {
    readonly name: string;
    readonly durationS: number;
    readonly originCapacityQps: number;
    readonly objectiveP99Ms: number;
    readonly triggerEndS: number;
    readonly faults: readonly FaultSpan[];
    /** Per variant, the faults that did not happen to it (an operator action its health made unnecessary). */
    readonly skipped: Record<VariantName, readonly number[]>;
    readonly recoverySeconds: Record<VariantName, number | null>;
    readonly series: Record<VariantName, Series>;
  }[];
}

const require = createRequire(import.meta.url);

function uplotAsset(file: string): string {
  return readFileSync(require.resolve(`uplot/dist/${file}`), 'utf8');
}

/** Renders the whole report; the same run gives the same bytes. */
export function renderReport(run: LabRun): string {
  const data: ChartData = {
    seed: run.seed,
    metrics: REPORT_METRICS,
    scenarios: run.scenarios.map((s) => ({
      name: s.name,
      durationS: s.durationS,
      originCapacityQps: s.originCapacityQps,
      objectiveP99Ms: s.objectiveP99Ms,
      triggerEndS: s.triggerEndS,
      faults: s.faults,
      skipped: { naive: s.variants.naive.skippedFaults, damper: s.variants.damper.skippedFaults },
      recoverySeconds: { naive: s.variants.naive.summary.recoverySeconds, damper: s.variants.damper.summary.recoverySeconds },
      series: { naive: s.variants.naive.series, damper: s.variants.damper.series },
    })),
  };
  const scenarioWord = run.scenarios.length === 1 ? 'scenario' : 'scenarios';
  return `${pageHead(`damper incident lab — seed ${run.seed}`)}
<style>
${inlineCss(uplotAsset('uPlot.min.css'))}
</style>
<style>
${PAGE_CSS}
</style>
</head>
<body>
<header class="page">
<h1>damper incident lab</h1>
<p class="meta">seed ${run.seed} · ${run.scenarios.length} ${scenarioWord}, each replayed twice on the same traffic: <strong>naive</strong> (${VARIANT_NOTES.naive}) and <strong>damper</strong>. Time is simulated; charts are per simulated second.</p>
${run.scenarios.length > 1 ? renderContents(run.scenarios) : ''}
</header>
<main>
${run.scenarios.map(renderScenario).join('\n')}
</main>
<footer class="page">Charts drawn with uPlot (MIT licence, © Leon Sorokin), inlined in this file; the page loads nothing from the network. Hover a chart to read its values; the cursor follows across the scenario’s charts.</footer>
<noscript><p class="noscript">The charts need JavaScript; the tables above do not.</p></noscript>
<script type="application/json" id="lab-data">${jsonIsland(data)}</script>
<script>
${inlineScript(uplotAsset('uPlot.iife.min.js'))}
</script>
<script>
${PAGE_SCRIPT}
</script>
</body>
</html>
`;
}

function renderContents(scenarios: readonly ScenarioRun[]): string {
  const items = scenarios.map((s) => `<li><a href="#${anchor(s.name)}">${esc(s.title)}</a> — ${esc(s.verdict)}</li>`);
  return `<nav class="contents"><ol>\n${items.join('\n')}\n</ol></nav>`;
}

function renderScenario(s: ScenarioRun): string {
  const heads = VARIANTS.map((v) => `<div class="col-head"><span class="variant">${v}</span> <span class="note">${VARIANT_NOTES[v]}</span></div>`).join('');
  const rows = REPORT_METRICS.map((m) => {
    const charts = VARIANTS.map(
      (v) =>
        `<div class="chart" data-scenario="${esc(s.name)}" data-metric="${m.key}" data-variant="${v}" role="img" aria-label="${esc(`${s.title}, ${v}: ${m.title}`)}"></div>`,
    ).join('\n');
    return `<h4 class="metric"><span class="metric-title">${m.title}</span> <span class="help">${m.help}</span></h4>\n${charts}`;
  });
  return `<section class="scenario" id="${anchor(s.name)}">
<h2>${esc(s.title)} <span class="name">${esc(s.name)}</span></h2>
<p class="description">${esc(s.description)}</p>
<p class="verdict">${esc(s.verdict)}</p>
<div class="overview">
${renderSummary(s)}
${renderTimeline(s)}
</div>
<div class="charts">
${heads}
${rows.join('\n')}
</div>
</section>`;
}

interface SummaryRow {
  readonly key: keyof VariantSummary;
  readonly label: string;
  readonly cell: (v: VariantSummary) => string;
  readonly bad?: (v: VariantSummary) => boolean;
}

const SUMMARY_ROWS: readonly SummaryRow[] = [
  { key: 'recovered', label: 'recovered', cell: (v) => (v.recovered ? 'yes' : 'no'), bad: (v) => !v.recovered },
  { key: 'recoverySeconds', label: 'recovery after the trigger ended', cell: (v) => (v.recoverySeconds === null ? 'never' : `${num(v.recoverySeconds, 0)} s`), bad: (v) => v.recoverySeconds === null },
  { key: 'baselineOriginQps', label: 'baseline origin queries/s', cell: (v) => qps(v.baselineOriginQps) },
  { key: 'peakOriginQps', label: 'peak origin queries/s', cell: (v) => qps(v.peakOriginQps) },
  { key: 'amplification', label: 'amplification (peak ÷ baseline)', cell: (v) => (Number.isFinite(v.amplification) ? `×${num(v.amplification, v.amplification >= 100 ? 0 : 1)}` : '—') },
  { key: 'errorRate', label: 'error rate', cell: (v) => pct(v.errorRate) },
  { key: 'goodputRatio', label: 'goodput ÷ offered', cell: (v) => pct(v.goodputRatio) },
  { key: 'p99Ms', label: 'p99 latency', cell: (v) => `${num(v.p99Ms, v.p99Ms >= 100 ? 0 : 1)} ms` },
  { key: 'invalidServed', label: 'invalid values served', cell: (v) => num(v.invalidServed, 0), bad: (v) => v.invalidServed > 0 },
];

function renderSummary(s: ScenarioRun): string {
  const head = `<tr><th scope="col">whole run</th>${VARIANTS.map((v) => `<th scope="col">${v}</th>`).join('')}</tr>`;
  const rows = SUMMARY_ROWS.map((r) => {
    const cells = VARIANTS.map((v) => {
      const summary = s.variants[v].summary;
      return `<td${r.bad?.(summary) ? ' class="bad"' : ''}>${esc(r.cell(summary))}</td>`;
    }).join('');
    return `<tr><th scope="row" title="${r.key}">${r.label}</th>${cells}</tr>`;
  });
  return `<table class="summary">\n<thead>${head}</thead>\n<tbody>\n${rows.join('\n')}\n</tbody>\n</table>`;
}

const KIND_NOTES: Record<FaultSpan['kind'], string> = { trigger: 'part of the incident’s cause', operator: 'a human action' };

function renderTimeline(s: ScenarioRun): string {
  const faults = [...s.faults]
    .sort((a, b) => a.startS - b.startS || a.endS - b.endS)
    .map((f) => {
      const when = f.endS > f.startS ? `${num(f.startS, 0)}–${num(f.endS, 0)} s` : `at ${num(f.startS, 0)} s`;
      return `<li><span class="swatch ${f.kind}"></span><span class="kind" title="${KIND_NOTES[f.kind]}">${f.kind}</span> ${esc(f.label)} <span class="when">${when}</span></li>`;
    });
  return `<div class="timeline">
<h3>Timeline</h3>
<ul class="faults">
${faults.length > 0 ? faults.join('\n') : '<li class="none">no fault spans</li>'}
</ul>
<ul class="keys">
<li><span class="line trigger-end"></span>trigger ended (${num(s.triggerEndS, 0)} s): recovery counts from here</li>
<li><span class="line recovered"></span>healthy again (when it happens)</li>
<li><span class="line reference"></span>origin capacity ${qps(s.originCapacityQps)} q/s · p99 objective ${num(s.objectiveP99Ms, 0)} ms</li>
</ul>
</div>`;
}

// ---- formatting: no toLocaleString, so the bytes do not depend on the machine's locale

/**
 * The start of a self-contained page, up to its `<style>`: no favicon request
 * (`data:`), light scheme. The title is HTML-escaped.
 */
export function pageHead(title: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light">
<title>${esc(title)}</title>
<link rel="icon" href="data:,">`;
}

export function num(v: number, digits: number): string {
  if (!Number.isFinite(v)) return '—';
  const [int = '', frac] = Math.abs(v).toFixed(digits).split('.');
  const grouped = int.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const sign = v < 0 && Number(int + (frac ?? '')) !== 0 ? '−' : '';
  return `${sign}${grouped}${frac === undefined ? '' : `.${frac}`}`;
}

const qps = (v: number): string => num(v, Math.abs(v) >= 100 ? 0 : 1);

export function pct(ratio: number): string {
  if (!Number.isFinite(ratio)) return '—';
  const p = ratio * 100;
  return `${num(p, p === 0 || p >= 10 ? 1 : 2)} %`;
}

export function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function anchor(name: string): string {
  return `scenario-${name.replace(/[^A-Za-z0-9_-]/g, '-')}`;
}

/** JSON that cannot end its script element early or open a comment: every `<` becomes `\u003c` (still valid JSON). */
export function jsonIsland(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

function inlineScript(js: string): string {
  return js.replace(/<\/(script)/gi, '<\\/$1').replace(/<!--/g, '<\\!--');
}

function inlineCss(css: string): string {
  return css.replace(/<\/(style)/gi, '<\\/$1');
}

const PAGE_CSS = `
:root {
  --text: #1f2328; --muted: #59636e; --rule: #d8dee4; --panel: #f6f8fa;
  --series: #1f6feb; --bad: #b42318;
  --trigger: rgba(220, 38, 38, 0.14); --trigger-edge: rgba(220, 38, 38, 0.55);
  --operator: rgba(217, 119, 6, 0.16); --operator-edge: rgba(217, 119, 6, 0.6);
  --recovered: #15803d; --trigger-end: #57606a; --reference: #3d444d;
}
* { box-sizing: border-box; }
html { background: #fff; }
body {
  margin: 0 auto; max-width: 1280px; padding: 24px 32px 48px;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", "Liberation Sans", sans-serif;
  color: var(--text); background: #fff;
}
a { color: #0550ae; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 22px; margin: 0 0 6px; }
h2 .name { font: 13px ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; color: var(--muted); font-weight: normal; margin-left: 8px; }
h3 { font-size: 14px; margin: 0 0 6px; text-transform: uppercase; letter-spacing: 0.04em; color: var(--muted); }
.meta { color: var(--muted); margin: 0 0 12px; max-width: 80ch; }
.contents ol { margin: 0; padding-left: 22px; }
.contents li { margin: 2px 0; }
.scenario { border-top: 1px solid var(--rule); margin-top: 28px; padding-top: 22px; }
.description { margin: 0 0 8px; max-width: 90ch; }
.verdict { margin: 0 0 16px; padding: 8px 12px; background: var(--panel); border-left: 4px solid var(--series); font-weight: 600; }
.overview { display: flex; flex-wrap: wrap; gap: 16px 40px; align-items: flex-start; margin-bottom: 20px; }
table.summary { border-collapse: collapse; font-size: 14px; font-variant-numeric: tabular-nums; }
table.summary th, table.summary td { padding: 3px 12px; border-bottom: 1px solid var(--rule); }
table.summary thead th { text-align: right; border-bottom: 2px solid var(--rule); font-weight: 600; }
table.summary thead th:first-child { text-align: left; color: var(--muted); font-weight: normal; }
table.summary tbody th { text-align: left; font-weight: normal; color: var(--muted); }
table.summary td { text-align: right; min-width: 96px; }
table.summary td.bad { color: var(--bad); font-weight: 600; }
.timeline { flex: 1 1 320px; font-size: 14px; }
.timeline ul { list-style: none; margin: 0 0 10px; padding: 0; }
.timeline li { margin: 3px 0; }
.timeline .kind { display: inline-block; min-width: 64px; color: var(--muted); }
.timeline .when { color: var(--muted); font-variant-numeric: tabular-nums; white-space: nowrap; }
.timeline .keys { color: var(--muted); font-size: 13px; }
.swatch { display: inline-block; width: 14px; height: 14px; vertical-align: -2px; margin-right: 8px; border: 1px solid; }
.swatch.trigger { background: var(--trigger); border-color: var(--trigger-edge); }
.swatch.operator { background: var(--operator); border-color: var(--operator-edge); }
.line { display: inline-block; width: 14px; height: 0; vertical-align: 4px; margin-right: 8px; border-top: 2px solid; }
.line.trigger-end, .line.recovered { width: 0; height: 14px; vertical-align: -2px; margin: 0 14px 0 6px; border-top: 0; border-left: 2px dashed var(--trigger-end); }
.line.recovered { border-left: 2px solid var(--recovered); }
.line.reference { border-top: 2px dashed var(--reference); }
.charts { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 0 28px; }
.col-head { font-size: 17px; font-weight: 600; padding-bottom: 4px; border-bottom: 2px solid var(--rule); }
.col-head .note { font-size: 13px; font-weight: normal; color: var(--muted); margin-left: 6px; }
h4.metric { grid-column: 1 / -1; margin: 16px 0 2px; font-size: 15px; }
h4.metric .help { font-weight: normal; font-size: 13px; color: var(--muted); margin-left: 6px; }
.chart { position: relative; min-width: 0; min-height: 210px; }
.chart .uplot { width: 100%; }
.chart .readout { position: absolute; z-index: 1; top: 2px; right: 24px; max-width: calc(100% - 80px); padding: 0 6px; font-size: 12px; line-height: 18px; color: var(--text); background: rgba(255, 255, 255, 0.9); border-radius: 3px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; font-variant-numeric: tabular-nums; pointer-events: none; }
.chart .readout:empty { display: none; }
footer.page { margin-top: 40px; padding-top: 12px; border-top: 1px solid var(--rule); color: var(--muted); font-size: 13px; }
.noscript { color: var(--bad); }
@media (max-width: 820px) {
  body { padding: 16px; }
  .charts { grid-template-columns: minmax(0, 1fr); }
  .col-head { display: none; }
  .chart::before { content: attr(data-variant); display: block; font-size: 13px; font-weight: 600; }
}
`;

/**
 * The page's own script, browser side. A raw string, so backslashes reach the
 * browser as written; it must contain no backtick and no dollar-brace.
 */
const PAGE_SCRIPT = String.raw`
(function () {
  'use strict';
  var VARIANTS = ['naive', 'damper'];
  var HEIGHT = 210;
  var FONT = '11px system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", sans-serif';
  var LABEL_FONT = '600 11px system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", sans-serif';
  var css = getComputedStyle(document.documentElement);
  function color(name) { return css.getPropertyValue(name).trim(); }
  var C = {
    series: color('--series'), trigger: color('--trigger'), triggerEdge: color('--trigger-edge'),
    operator: color('--operator'), operatorEdge: color('--operator-edge'),
    recovered: color('--recovered'), triggerEnd: color('--trigger-end'), reference: color('--reference'),
    axis: '#59636e', grid: '#eaeef2'
  };
  var data = JSON.parse(document.getElementById('lab-data').textContent);
  var byName = {};
  data.scenarios.forEach(function (s) { byName[s.name] = s; });
  var metrics = {};
  data.metrics.forEach(function (m) { metrics[m.key] = m; });

  function niceCeil(v) {
    if (!(v > 0) || !isFinite(v)) return 0;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * p >= v * (1 - 1e-9)) return steps[i] * p;
    return 10 * p;
  }
  function trim(s) { return s.indexOf('.') < 0 ? s : s.replace(/\.?0+$/, ''); }
  function compact(v) {
    if (v === null || v === undefined || !isFinite(v)) return '–';
    var a = Math.abs(v);
    if (a >= 1e6) return trim((v / 1e6).toFixed(2)) + 'M';
    if (a >= 100) return v.toFixed(0).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
    if (a >= 10) return trim(v.toFixed(1));
    return trim(v.toFixed(2));
  }
  function format(unit, v) {
    if (v === null || v === undefined || !isFinite(v)) return '–';
    if (unit === '%') return compact(v * 100) + ' %';
    return compact(v) + ' ' + unit;
  }
  function axisValues(unit, vals) {
    var top = 0;
    vals.forEach(function (v) { if (isFinite(v)) top = Math.max(top, Math.abs(v)); });
    return vals.map(function (v) {
      if (v === 0) return unit === '%' ? '0%' : '0';
      if (unit === '%') return trim((v * 100).toFixed(1)) + '%';
      if (top >= 1e6) return trim((v / 1e6).toFixed(2)) + 'M';
      if (top >= 1e4) return trim((v / 1e3).toFixed(1)) + 'k';
      return trim(v.toFixed(top >= 10 ? 0 : 2));
    });
  }

  function values(metric, series, n) {
    var out;
    if (metric === 'errorRate') {
      out = [];
      for (var i = 0; i < n; i++) {
        var g = series.goodput[i], e = series.errors[i];
        out.push(g === null || e === null || g === undefined || e === undefined || g + e === 0 ? null : e / (g + e));
      }
      return out;
    }
    out = series[metric];
    if (out.length === n) return out;
    out = out.slice(0, n);
    while (out.length < n) out.push(null);
    return out;
  }
  function maxOf(arr) {
    var m = 0;
    for (var i = 0; i < arr.length; i++) if (arr[i] !== null && isFinite(arr[i]) && arr[i] > m) m = arr[i];
    return m;
  }
  function length(series) {
    var n = 0;
    for (var k in series) if (Object.prototype.hasOwnProperty.call(series, k)) n = Math.max(n, series[k].length);
    return n;
  }

  // Per scenario and metric: the data for both variants and their shared y range.
  var plans = {};
  data.scenarios.forEach(function (s) {
    var n = Math.max(s.durationS, length(s.series.naive), length(s.series.damper));
    var x = [];
    for (var i = 0; i < n; i++) x.push(i);
    data.metrics.forEach(function (m) {
      var ref = m.key === 'originQps' ? s.originCapacityQps : m.key === 'p99Ms' ? s.objectiveP99Ms : null;
      var ys = {}, max = ref === null ? 0 : ref;
      VARIANTS.forEach(function (v) { ys[v] = values(m.key, s.series[v], n); max = Math.max(max, maxOf(ys[v])); });
      var top = m.key === 'hitRatio' ? 1 : niceCeil(max * 1.08);
      if (m.unit === '%') top = Math.min(1, Math.max(top, 0.01));
      if (!(top > 0)) top = 1;
      plans[s.name + '\u0000' + m.key] = { x: x, ys: ys, top: top, ref: ref, n: n };
    });
  });

  function shade(s, variant) {
    return function (u) {
      var ctx = u.ctx, b = u.bbox, px = Math.max(1, Math.round(devicePixelRatio || 1));
      ctx.save();
      s.faults.forEach(function (f, i) {
        if (s.skipped[variant].indexOf(i) !== -1) return;
        var x0 = Math.max(b.left, u.valToPos(f.startS, 'x', true));
        var x1 = Math.min(b.left + b.width, u.valToPos(f.endS, 'x', true));
        var thin = x1 - x0 < 3 * px;
        if (thin) { var mid = (x0 + x1) / 2; x0 = mid - 1.5 * px; x1 = mid + 1.5 * px; }
        if (x1 < b.left || x0 > b.left + b.width) return;
        ctx.fillStyle = f.kind === 'trigger' ? (thin ? C.triggerEdge : C.trigger) : (thin ? C.operatorEdge : C.operator);
        ctx.fillRect(x0, b.top, x1 - x0, b.height);
      });
      ctx.restore();
    };
  }
  function vline(u, at, stroke, dash, label) {
    var ctx = u.ctx, b = u.bbox, px = devicePixelRatio || 1;
    var x = Math.round(u.valToPos(at, 'x', true)) + 0.5;
    if (!(x >= b.left && x <= b.left + b.width)) return;
    ctx.save();
    ctx.strokeStyle = stroke;
    ctx.lineWidth = 1.5 * px;
    ctx.setLineDash(dash.map(function (d) { return d * px; }));
    ctx.beginPath(); ctx.moveTo(x, b.top); ctx.lineTo(x, b.top + b.height); ctx.stroke();
    if (label) {
      ctx.setLineDash([]);
      ctx.font = LABEL_FONT.replace('11px', Math.round(11 * px) + 'px');
      ctx.fillStyle = stroke;
      ctx.textBaseline = 'top';
      var w = ctx.measureText(label).width, gap = 4 * px;
      var right = x + gap + w <= b.left + b.width;
      var tx = right ? x + gap : x - gap - w;
      ctx.fillStyle = 'rgba(255, 255, 255, 0.85)';
      ctx.fillRect(tx - 2 * px, b.top + 2 * px, w + 4 * px, 14 * px);
      ctx.fillStyle = stroke;
      ctx.textAlign = 'left';
      ctx.fillText(label, tx, b.top + 3 * px);
    }
    ctx.restore();
  }
  function markers(s, variant) {
    return function (u) {
      vline(u, s.triggerEndS, C.triggerEnd, [5, 4], null);
      var r = s.recoverySeconds[variant];
      if (r !== null && r !== undefined) vline(u, s.triggerEndS + r, C.recovered, [], 'healthy');
    };
  }

  // Hovering a chart writes that second's values above it (and above its synced neighbours).
  function readout(m, plan, variant, el) {
    var refLabel = m.key === 'originQps' ? 'capacity ' : 'objective ';
    return function (u) {
      var i = u.cursor.idx;
      if (i === null || i === undefined) { el.textContent = ''; return; }
      var text = 't = ' + i + ' s · ' + m.title.toLowerCase() + ' ' + format(m.unit, plan.ys[variant][i]);
      if (plan.ref !== null) text += ' · ' + refLabel + format(m.unit, plan.ref);
      el.textContent = text;
    };
  }

  var charts = [];
  var cells = document.querySelectorAll('.chart');
  for (var c = 0; c < cells.length; c++) {
    var el = cells[c];
    var s = byName[el.dataset.scenario], m = metrics[el.dataset.metric], variant = el.dataset.variant;
    var plan = s && m && plans[s.name + '\u0000' + m.key];
    if (!plan || !s.series[variant]) continue;
    var readoutEl = document.createElement('div');
    readoutEl.className = 'readout';
    el.appendChild(readoutEl);
    var opts = chartOptions(s, m, variant, plan, el.clientWidth || 560, readoutEl);
    var series = [plan.x, plan.ys[variant]];
    if (plan.ref !== null) series.push(plan.x.map(function () { return plan.ref; }));
    charts.push({ el: el, plot: new uPlot(opts, series, el) });
  }

  function chartOptions(s, m, variant, plan, width, readoutEl) {
    var unit = m.unit, top = plan.top, last = Math.max(plan.n - 1, 1);
    var ys = [
      {},
      { label: m.title, stroke: C.series, width: 1.5 }
    ];
    if (plan.ref !== null) {
      ys.push({ label: m.key === 'originQps' ? 'capacity' : 'objective', stroke: C.reference, width: 1.25, dash: [6, 4], points: { show: false } });
    }
    return {
      width: width,
      height: HEIGHT,
      cursor: { sync: { key: s.name }, y: false, drag: { x: false, y: false }, points: { size: 6 } },
      select: { show: false },
      scales: {
        x: { time: false, range: function () { return [0, last]; } },
        y: { range: function () { return [0, top]; } }
      },
      axes: [
        { font: FONT, labelFont: FONT, stroke: C.axis, label: 'simulated time (s)', labelSize: 18, labelGap: 0, size: 30, gap: 4,
          grid: { stroke: C.grid, width: 1 }, ticks: { stroke: C.grid, width: 1, size: 4 } },
        { font: FONT, labelFont: FONT, stroke: C.axis, label: unit, labelSize: 16, labelGap: 0, size: 46, gap: 4,
          grid: { stroke: C.grid, width: 1 }, ticks: { stroke: C.grid, width: 1, size: 4 },
          values: function (u, vals) { return axisValues(unit, vals); } }
      ],
      series: ys,
      legend: { show: false },
      hooks: { drawClear: [shade(s, variant)], draw: [markers(s, variant)], setCursor: [readout(m, plan, variant, readoutEl)] }
    };
  }

  var pending = false;
  addEventListener('resize', function () {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () {
      pending = false;
      charts.forEach(function (ch) {
        var w = ch.el.clientWidth;
        if (w > 0 && w !== ch.plot.width) ch.plot.setSize({ width: w, height: HEIGHT });
      });
    });
  });
  document.documentElement.dataset.charts = String(charts.length);
})();
`;
