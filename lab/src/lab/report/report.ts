import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type * as TS from 'typescript';
import { alertSentence } from '../judge/alert-words.js';
import { type AlertRule } from '../judge/alerts.js';
import { CHARACTERISTIC_GAUGES, type CharacteristicGauge, type CharacteristicSeries, RATIO_WINDOW_MS } from '../judge/characteristic.js';
import { millis, num, percent, times } from '../format.js';
import { columnsOf, VARIANTS, type FaultSpan, type JudgedSeries, type LabRun, type ScenarioRun, type VariantName, type VariantSummary } from '../judge/results.js';
import { characteristicAlerts } from 'damper/otel';
import { esc } from './html.js';
import { servedChart } from './served-chart.js';

/**
 * The lab's `report.html`: one self-contained page (no network at all) with
 * each scenario's verdict, a summary table and, per metric, the naive and the
 * damper variant side by side on the same y range (a log one for origin and
 * latency), the trigger window and operator spans marked.
 *
 * uPlot, its stylesheet, the lab's chart kit and the page's own script
 * (src/lab/report/chart-kit.ts and report-page.ts, compiled beside this file)
 * are read at render time and inlined; the series
 * travel as a JSON data island and are handed to uPlot as they are (x = index
 * = simulated second). Nothing here reads the clock or the locale, so the same
 * run renders the same bytes.
 */

/** What a lab chart's y axis counts (chart-kit.ts writes each its own way): `%` a share in [0, 1]; `ratio` a quotient that may pass 1. */
export type ChartUnit = 'req/s' | 'q/s' | '%' | 'ms' | 'ratio' | 'requests' | 'cores';

/** One chart row of a scenario: what it plots and how the page labels it. */
export interface ReportMetric {
  readonly key: 'offered' | 'goodput' | 'originQps' | 'errorRate' | 'p99Ms' | 'hitRatio' | 'staleRatio' | CharacteristicGauge;
  readonly title: string;
  readonly help: string;
  /** Shown on the y axis; `%` means the values are ratios in [0, 1]; `ratio`, a quotient that may pass 1 (retries per first attempt). */
  readonly unit: Extract<ChartUnit, 'req/s' | 'q/s' | '%' | 'ms' | 'ratio'>;
  /**
   * `log` where the variants lie orders of magnitude apart (naive's origin at
   * 1,000 q/s, damper's at 17; a p99 of 2 s against one under 1 ms): on a
   * shared linear axis the smaller one would be a flat line at zero.
   */
  readonly axis: 'linear' | 'log';
}

/** The charts drawn for a scenario, top to bottom; each once per variant. */
export const REPORT_METRICS: readonly ReportMetric[] = [
  { key: 'offered', title: 'Offered load', help: 'requests clients sent per second, first attempts and retries', unit: 'req/s', axis: 'linear' },
  { key: 'goodput', title: 'Goodput', help: 'of the requests sent that second, those answered with a valid value within the client’s timeout; wide pale line: the best possible with the capacity left', unit: 'req/s', axis: 'linear' },
  { key: 'originQps', title: 'Origin queries', help: 'queries that reached the origin per second; dashed line: its capacity that second', unit: 'q/s', axis: 'log' },
  { key: 'errorRate', title: 'Error rate', help: 'errors ÷ (goodput + errors), per second', unit: '%', axis: 'linear' },
  { key: 'p99Ms', title: 'p99 latency', help: '99th percentile of the requests sent in that second; dashed line: the objective', unit: 'ms', axis: 'log' },
  { key: 'hitRatio', title: 'Cache hit ratio', help: 'share of requests answered with a fresh value without waiting for the origin, as a dashboard counts hits', unit: '%', axis: 'linear' },
  { key: 'staleRatio', title: 'Stale answers', help: 'share of requests answered at once with a value past its ttl while it is refreshed (damper’s stale window): not hits, and not waits', unit: '%', axis: 'linear' },
];

/** The charts of one scenario: no hit ratio or stale answers where the world has no cache (each would be a flat, meaningless zero). */
export function reportMetrics(s: ScenarioRun): readonly ReportMetric[] {
  return REPORT_METRICS.filter((m) => (m.key !== 'hitRatio' && m.key !== 'staleRatio') || s.cached);
}

/**
 * The characteristic metrics' charts, below the others: the gauges as
 * damper/otel defines them, for both variants, with the shipped alerts'
 * thresholds and where each fired.
 */
export const CHARACTERISTIC_METRICS: readonly ReportMetric[] = CHARACTERISTIC_GAUGES.map((g) => ({
  key: g.gauge,
  title: `${g.title} (${g.gauge})`,
  help: `${g.ratio} over the last ${RATIO_WINDOW_MS / 1000} s, read once a second; the highest of the variant’s ${g.of}s where it has several; dashed: a shipped alert’s threshold; solid: where it fired`,
  unit: 'ratio',
  // A quotient that may pass 1 on asinh, linear up to 1 (where the thresholds are) and logarithmic above: one warm-up spike must not flatten the rest.
  axis: g.share ? 'linear' : 'log',
}));

/** The characteristic metrics either variant of a scenario has: a gauge neither has is not drawn. */
export function characteristicMetrics(s: ScenarioRun): readonly ReportMetric[] {
  return CHARACTERISTIC_METRICS.filter((m) => VARIANTS.some((v) => has(s.variants[v].characteristics, m.key)));
}

function has(c: CharacteristicSeries, key: ReportMetric['key']): boolean {
  return Object.hasOwn(c, key);
}

/** A shipped alert that fired on a variant: what the page marks on its gauge's chart. */
export interface ChartAlert {
  readonly alert: string;
  readonly metric: string;
  readonly firstFiredSeconds: number;
}

/** Per second, the highest of a gauge's series (null where none existed): what a `max by` panel draws. */
function highest(c: CharacteristicSeries): Partial<Record<CharacteristicGauge, (number | null)[]>> {
  const out: Partial<Record<CharacteristicGauge, (number | null)[]>> = {};
  for (const [gauge, byName] of Object.entries(c) as [CharacteristicGauge, Readonly<Record<string, readonly (number | null)[]>>][]) {
    const all = Object.values(byName);
    const n = Math.max(0, ...all.map((xs) => xs.length));
    out[gauge] = Array.from({ length: n }, (_, i) => {
      let top: number | null = null;
      for (const xs of all) {
        const x = xs[i];
        if (x !== null && x !== undefined && (top === null || x > top)) top = x;
      }
      return top;
    });
  }
  return out;
}

function firedAlerts(summary: VariantSummary): ChartAlert[] {
  return characteristicAlerts.flatMap((rule) => {
    const at = summary.alerts[rule.alert]?.firstFiredSeconds;
    return at === null || at === undefined ? [] : [{ alert: rule.alert, metric: rule.metric, firstFiredSeconds: at }];
  });
}

/** What each variant is, in a few words beside its name. */
export const VARIANT_NOTES: Record<VariantName, string> = {
  naive: 'the outage’s behaviour, bugs included',
  damper: 'the same traffic through damper',
};

/** What the page's script (src/lab/report/report-page.ts) reads: the series exactly as the run produced them, plus what the charts draw over them. */
export interface ChartData {
  readonly seed: number;
  readonly variants: typeof VARIANTS;
  readonly metrics: readonly ReportMetric[];
  /** The shipped alert rules: their thresholds are drawn on their gauges' charts. */
  readonly alertRules: readonly AlertRule[];
  readonly scenarios: readonly ChartScenario[];
}

/** A scenario's timeline as a page's charts draw it: its length, its reference lines and its shaded spans. */
export interface ChartTimeline {
  readonly durationS: number;
  /** The origin's capacity each second: the origin chart's reference line. */
  readonly originCapacity: readonly number[];
  readonly objectiveP99Ms: number;
  readonly triggerStartS: number;
  readonly triggerEndS: number;
  readonly faults: readonly FaultSpan[];
}

export interface ChartScenario extends ChartTimeline {
  readonly name: string;
  /** Per variant, the faults that did not happen to it (an operator action its health made unnecessary). */
  readonly skipped: Record<VariantName, readonly number[]>;
  readonly recoverySeconds: Record<VariantName, number | null>;
  readonly series: Record<VariantName, JudgedSeries>;
  /** Per variant, each characteristic gauge it has: the highest of its series, per second. */
  readonly characteristics: Record<VariantName, Partial<Record<CharacteristicGauge, (number | null)[]>>>;
  /** Per variant, the shipped alerts that fired, with when they first did. */
  readonly alerts: Record<VariantName, readonly ChartAlert[]>;
}

const require = createRequire(import.meta.url);

/** A file of uPlot's distribution (its script, its stylesheet), to inline. */
export function uplotAsset(file: string): string {
  return readFileSync(require.resolve(`uplot/dist/${file}`), 'utf8');
}

/** The lab's browser scripts, compiled beside this file: the chart kit and each page's own. */
export type PageScript = 'chart-kit' | 'report-page' | 'fidelity-charts';

const pageScripts = new Map<PageScript, string>();

/**
 * A compiled browser script, next to this file wherever it runs from (dist/
 * for `npm start` and the package, build/src/lab for the tests), without its
 * source-map comment (the map is not beside the page). Run from the
 * TypeScript sources (tsx), there is no compiled file: it is transpiled here
 * as tsc would.
 */
export function pageScript(name: PageScript): string {
  const known = pageScripts.get(name);
  if (known !== undefined) return known;
  const compiled = new URL(`./${name}.js`, import.meta.url);
  let js: string;
  if (existsSync(compiled)) js = readFileSync(compiled, 'utf8');
  else {
    const ts = require('typescript') as typeof TS;
    const source = readFileSync(new URL(`./${name}.ts`, import.meta.url), 'utf8');
    // tsconfig.json's options that shape the output (test/report.test.ts holds the two outputs equal).
    js = ts.transpileModule(source, { compilerOptions: { target: ts.ScriptTarget.ES2022, alwaysStrict: true, moduleDetection: ts.ModuleDetectionKind.Legacy } }).outputText;
  }
  const text = js.replace(/\/\/# sourceMappingURL=\S*\s*$/, '').trimEnd();
  pageScripts.set(name, text);
  return text;
}

/**
 * A line linking the page another command writes into the same folder:
 * report.html and sweep.html point at each other. Whether that page is there
 * is not checked: a page renders the same bytes whatever its folder holds,
 * and every command writes to lab-out unless told otherwise, so they meet
 * there by default; the line says which command writes it.
 */
export function siblingLink(file: string, what: string, commands: readonly string[]): string {
  return `<p class="sibling">Beside this page: <a href="${file}">${file}</a>, ${what}, if ${commands.map((c) => `<code>${c}</code>`).join(' or ')} wrote it to this folder.</p>`;
}

/** Renders the whole report; the same run gives the same bytes. */
export function renderReport(run: LabRun): string {
  const data: ChartData = {
    seed: run.seed,
    variants: VARIANTS,
    metrics: [...REPORT_METRICS, ...CHARACTERISTIC_METRICS],
    alertRules: characteristicAlerts,
    scenarios: run.scenarios.map((s) => ({
      name: s.name,
      durationS: s.durationS,
      originCapacity: s.originCapacity,
      objectiveP99Ms: s.objectiveP99Ms,
      triggerStartS: s.triggerStartS,
      triggerEndS: s.triggerEndS,
      faults: s.faults,
      skipped: { naive: s.variants.naive.skippedFaults, damper: s.variants.damper.skippedFaults },
      recoverySeconds: { naive: s.variants.naive.summary.recoverySeconds, damper: s.variants.damper.summary.recoverySeconds },
      series: { naive: s.variants.naive.series, damper: s.variants.damper.series },
      characteristics: { naive: highest(s.variants.naive.characteristics), damper: highest(s.variants.damper.characteristics) },
      alerts: { naive: firedAlerts(s.variants.naive.summary), damper: firedAlerts(s.variants.damper.summary) },
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
<p class="meta">seed ${run.seed} · ${run.scenarios.length} ${scenarioWord}, each replayed twice on the same traffic: <strong>naive</strong> (${VARIANT_NOTES.naive}) and <strong>damper</strong>.${stacksWords(run)} Time is simulated; charts are per simulated second.</p>
${siblingLink('sweep.html', 'a scenario’s vulnerable region over two axes, both variants, cell by cell', ['damper lab sweep', 'damper lab check'])}
${run.scenarios.length > 1 ? renderContents(run.scenarios) : ''}
</header>
<main>
${run.scenarios.map(renderScenario).join('\n')}
</main>
<footer class="page">Charts drawn with uPlot (MIT licence, © Leon Sorokin), inlined in this file; the page loads nothing from the network. Hover a chart to read its values; the cursor follows across the scenario’s charts.</footer>
<noscript><p class="noscript">The charts need JavaScript; the tables above do not.</p></noscript>
${chartScripts('lab-data', data, 'report-page')}
</body>
</html>
`;
}

/** The peer stacks the run had (`--stack`), in a sentence for the page's heading; nothing without them. */
function stacksWords(run: LabRun): string {
  const names = [...new Set(run.scenarios.flatMap((s) => (s.stacks ?? []).map((o) => o.name)))];
  return names.length === 0 ? '' : ` Beside them, where it applies, each peer stack asked for: ${names.map((n) => `<strong>${esc(n)}</strong>`).join(', ')} (a column of each summary table, and a line on the chart of calls served).`;
}

function renderContents(scenarios: readonly ScenarioRun[]): string {
  const items = scenarios.map((s) => `<li><a href="#${anchor(s.name)}">${esc(s.title)}</a> — ${esc(s.verdict)}</li>`);
  return `<nav class="contents"><ol>\n${items.join('\n')}\n</ol></nav>`;
}

function chartRows(s: ScenarioRun, metrics: readonly ReportMetric[]): string[] {
  return metrics.map((m) => {
    const charts = VARIANTS.map((v) =>
      m.unit === 'ratio' && !has(s.variants[v].characteristics, m.key)
        ? `<div class="chart-absent">${v} has no ${gaugeOf(m.key).of} here: no ${gaugeOf(m.key).title.toLowerCase()}</div>`
        : `<div class="chart" data-scenario="${esc(s.name)}" data-metric="${m.key}" data-variant="${v}" role="img" aria-label="${esc(`${s.title}, ${v}: ${m.title}`)}"></div>`,
    ).join('\n');
    return `<h4 class="metric"><span class="metric-title">${m.title}</span> <span class="help">${m.help}</span></h4>\n${charts}`;
  });
}

function gaugeOf(key: ReportMetric['key']): (typeof CHARACTERISTIC_GAUGES)[number] {
  return CHARACTERISTIC_GAUGES.find((g) => g.gauge === key)!;
}

/** The characteristic metrics' block: which shipped alerts fired, what is not measured here, and the charts. */
function renderCharacteristics(s: ScenarioRun, heads: string): string {
  const drawn = characteristicMetrics(s);
  const missing = CHARACTERISTIC_GAUGES.filter((g) => !drawn.some((m) => m.key === g.gauge)).map((g) => `${g.title.toLowerCase()} (neither variant has a ${g.of})`);
  const rules = characteristicAlerts.map((r) => `<code>${esc(r.alert)}</code> (${esc(r.metric)} above ${num(r.above, 2)} for ${num(r.forMs / 1000, 0)} s)`);
  return `<h3 class="characteristic">Characteristic metrics and the shipped alerts</h3>
<p class="alerts">${esc(alertSentence(s))}</p>
<p class="alert-rules">Each alert of <code>damper/otel</code>’s <code>characteristicAlerts</code>, evaluated once a second as Prometheus would: ${rules.length > 0 ? rules.join('; ') : 'none shipped'}. damper’s gauges are read through <code>damper/otel</code>’s own instruments, naive’s computed from the lab’s counters with the same definitions.${missing.length > 0 ? ` Not measured here: ${missing.join('; ')}.` : ''}</p>
${drawn.length > 0 ? `<div class="charts">\n${heads}\n${chartRows(s, drawn).join('\n')}\n</div>` : ''}`;
}

function renderScenario(s: ScenarioRun): string {
  const heads = VARIANTS.map((v) => `<div class="col-head"><span class="variant">${v}</span> <span class="note">${VARIANT_NOTES[v]}</span></div>`).join('');
  const rows = chartRows(s, reportMetrics(s));
  return `<section class="scenario" id="${anchor(s.name)}">
<h2>${esc(s.title)} <span class="name">${esc(s.name)}</span></h2>
<p class="description">${esc(s.description)}</p>
<p class="verdict">${esc(s.verdict)}</p>
<div class="overview">
${renderSummary(s)}
${renderTimeline(s)}
</div>
${renderStacks(s)}<div class="charts">
${heads}
${rows.join('\n')}
</div>
${renderCharacteristics(s, heads)}
</section>`;
}

/**
 * The peer stacks of `damper lab --stack` (issue 31): each one's calls
 * served per second on one chart with naive's and damper's, and where a
 * stack could not run in this scenario, why. Its figures are columns of the
 * summary table above; the charts below stay naive beside damper.
 */
function renderStacks(s: ScenarioRun): string {
  if (s.stacks === undefined || s.stacks.length === 0) return '';
  const ran = columnsOf(s);
  const notRun = s.stacks.flatMap((o) => ('problem' in o ? [`<li><strong>${esc(o.name)}</strong> did not run here: ${esc(o.problem)}</li>`] : []));
  return `<div class="stacks">
${ran.length > 2 ? servedChart(s, 'Each stack: the share of each second’s calls served in time', ran.map((c) => ({ name: c.name, series: c.run.series })), 'h3') : ''}
<p class="stacks-note">A peer stack is naive’s system with the peer’s library in place of the part it replaces (the client tiers, or the servers’ cache), set up as its documentation recommends (docs/lab.md, “Other stacks”), in virtual time from the same seed.</p>
${notRun.length === 0 ? '' : `<ul class="not-run">\n${notRun.join('\n')}\n</ul>`}
</div>
`;
}

interface SummaryRow {
  /** The field in results.json (`trigger.efficiency` for a nested one). */
  readonly key: string;
  readonly label: string;
  readonly cell: (v: VariantSummary) => string;
  readonly bad?: (v: VariantSummary) => boolean;
}

interface SummaryGroup {
  readonly title: (s: ScenarioRun) => string;
  readonly rows: readonly SummaryRow[];
}

const seconds = (s: number): string => `${num(s, 0)} s`;

/** The summary table, in the order an SRE asks: how it did during the trigger, after it, and over the whole run. */
const SUMMARY: readonly SummaryGroup[] = [
  {
    title: (s) => `during the trigger, ${seconds(s.triggerStartS)}–${seconds(s.triggerEndS)}`,
    rows: [
      { key: 'trigger.goodputRatio', label: 'served ÷ offered', cell: (v) => percent(v.trigger.goodputRatio) },
      { key: 'trigger.bestGoodputRatio', label: 'best possible ÷ offered', cell: (v) => percent(v.trigger.bestGoodputRatio) },
      { key: 'trigger.efficiency', label: 'served ÷ best possible', cell: (v) => percent(v.trigger.efficiency) },
    ],
  },
  {
    title: () => 'after it',
    rows: [
      { key: 'recovered', label: 'recovered', cell: (v) => (v.recovered ? 'yes' : 'no'), bad: (v) => !v.recovered },
      { key: 'recoverySeconds', label: 'recovery after the trigger ended', cell: (v) => (v.recoverySeconds === null ? 'never' : seconds(v.recoverySeconds)), bad: (v) => v.recoverySeconds === null },
      { key: 'operatorForced', label: 'only after the operators acted', cell: (v) => (v.operatorForced ? 'yes' : 'no'), bad: (v) => v.operatorForced },
    ],
  },
  {
    title: () => 'whole run',
    rows: [
      { key: 'baselineOriginQps', label: 'baseline origin queries/s', cell: (v) => qps(v.baselineOriginQps) },
      { key: 'peakOriginQps', label: 'peak origin queries/s', cell: (v) => qps(v.peakOriginQps) },
      { key: 'amplification', label: 'amplification (peak ÷ baseline)', cell: (v) => times(v.amplification) },
      { key: 'errorRate', label: 'error rate', cell: (v) => percent(v.errorRate) },
      { key: 'goodputRatio', label: 'goodput ÷ offered', cell: (v) => percent(v.goodputRatio) },
      { key: 'p99Ms', label: 'p99 latency', cell: (v) => `${millis(v.p99Ms)} ms` },
      { key: 'invalidServed', label: 'invalid values served', cell: (v) => num(v.invalidServed, 0), bad: (v) => v.invalidServed > 0 },
    ],
  },
];

function renderSummary(s: ScenarioRun): string {
  // naive, the peer stacks that ran (--stack), damper: as lab stacks orders its rows.
  const columns = columnsOf(s);
  const head = `<tr><td></td>${columns.map((c) => `<th scope="col">${esc(c.name)}</th>`).join('')}</tr>`;
  const groups = SUMMARY.map((g) => {
    const rows = g.rows.map((r) => {
      const cells = columns.map(({ run }) => `<td${r.bad?.(run.summary) ? ' class="bad"' : ''}>${esc(r.cell(run.summary))}</td>`).join('');
      return `<tr><th scope="row" title="${r.key}">${r.label}</th>${cells}</tr>`;
    });
    return `<tbody>\n<tr class="group"><th scope="rowgroup" colspan="${columns.length + 1}">${esc(g.title(s))}</th></tr>\n${rows.join('\n')}\n</tbody>`;
  });
  return `<table class="summary">\n<thead>${head}</thead>\n${groups.join('\n')}\n</table>`;
}

const KIND_NOTES: Record<FaultSpan['kind'], string> = { trigger: 'part of the incident’s cause', operator: 'a human action' };

/** "origin capacity 400 q/s (100 q/s at the lowest)": the capacity line's range in words. */
function capacityWords(s: ScenarioRun): string {
  const lowest = Math.min(...s.originCapacity);
  const healthy = `origin capacity ${qps(s.originCapacityQps)} q/s`;
  return Number.isFinite(lowest) && lowest < s.originCapacityQps ? `${healthy}, ${qps(lowest)} q/s at the lowest` : healthy;
}

function renderTimeline(s: ScenarioRun): string {
  const faults = [...s.faults]
    .sort((a, b) => a.startS - b.startS || a.endS - b.endS)
    .map((f) => {
      const when = f.endS > f.startS ? `${num(f.startS, 0)}–${seconds(f.endS)}` : `at ${seconds(f.startS)}`;
      return `<li><span class="swatch ${f.kind}"></span><span class="kind" title="${KIND_NOTES[f.kind]}">${f.kind}</span> ${esc(f.label)} <span class="when">${when}</span></li>`;
    });
  return `<div class="timeline">
<h3>Timeline</h3>
<ul class="faults">
${faults.length > 0 ? faults.join('\n') : '<li class="none">no fault spans</li>'}
</ul>
<ul class="keys">
<li><span class="swatch trigger-window"></span>the trigger window (${num(s.triggerStartS, 0)}–${seconds(s.triggerEndS)}): tinted, with a bar along the top; operator actions are hatched</li>
<li><span class="line trigger-end"></span>trigger ended (${seconds(s.triggerEndS)}): recovery counts from here</li>
<li><span class="line recovered"></span>healthy again (when it happens)</li>
<li><span class="line best"></span>best possible goodput with the capacity left</li>
<li><span class="line reference"></span>${capacityWords(s)} · p99 objective ${num(s.objectiveP99Ms, 0)} ms</li>
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

const qps = (v: number): string => num(v, Math.abs(v) >= 100 ? 0 : 1);


function anchor(name: string): string {
  return `scenario-${name.replace(/[^A-Za-z0-9_-]/g, '-')}`;
}

/** JSON that cannot end its script element early or open a comment: every `<` becomes `\u003c` (still valid JSON). */
export function jsonIsland(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

/**
 * The end of a page with charts: its data as a JSON island (`id`), then
 * uPlot, the chart kit and the page's own `script` (a page script built
 * beside this file), each inlined, so the page loads nothing.
 */
export function chartScripts(id: string, data: unknown, script: PageScript): string {
  return `<script type="application/json" id="${id}">${jsonIsland(data)}</script>
<script>
${inlineScript(uplotAsset('uPlot.iife.min.js'))}
</script>
<script>
${inlineScript(pageScript('chart-kit'))}
</script>
<script>
${inlineScript(pageScript(script))}
</script>`;
}

/** A script's text made safe inside a `<script>` element: no `</script` or `<!--` in it. */
export function inlineScript(js: string): string {
  return js.replace(/<\/(script)/gi, '<\\/$1').replace(/<!--/g, '<\\!--');
}

/** A stylesheet made safe inside a `<style>` element. */
export function inlineCss(css: string): string {
  return css.replace(/<\/(style)/gi, '<\\/$1');
}

/** The report's stylesheet: the fidelity page starts from it and adds its own. */
export const PAGE_CSS = `
:root {
  --text: #1f2328; --muted: #59636e; --rule: #d8dee4; --panel: #f6f8fa;
  --series: #1f6feb; --best: #d5c4f7; --bad: #b42318;
  --trigger: rgba(220, 38, 38, 0.14); --trigger-edge: rgba(220, 38, 38, 0.55);
  --operator-edge: rgba(217, 119, 6, 0.6);
  --recovered: #15803d; --trigger-end: #57606a; --reference: #3d444d; --alert: #c2410c;
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
p.sibling { color: var(--muted); margin: 0 0 12px; }
.contents ol { margin: 0; padding-left: 22px; }
.contents li { margin: 2px 0; }
.scenario { border-top: 1px solid var(--rule); margin-top: 28px; padding-top: 22px; }
.description { margin: 0 0 8px; max-width: 90ch; }
.verdict { margin: 0 0 16px; padding: 8px 12px; background: var(--panel); border-left: 4px solid var(--series); font-weight: 600; }
.overview { display: flex; flex-wrap: wrap; gap: 16px 40px; align-items: flex-start; margin-bottom: 20px; }
table.summary { border-collapse: collapse; font-size: 14px; font-variant-numeric: tabular-nums; }
table.summary th, table.summary td { padding: 3px 12px; border-bottom: 1px solid var(--rule); }
table.summary thead th { text-align: right; border-bottom: 2px solid var(--rule); font-weight: 600; }
table.summary tr.group th { text-align: left; font-weight: 600; color: var(--text); padding-top: 10px; border-bottom: 1px solid var(--rule); }
table.summary tbody:first-of-type tr.group th { padding-top: 3px; }
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
.swatch.operator { background: repeating-linear-gradient(-45deg, var(--operator-edge) 0 1px, transparent 1px 5px); border-color: var(--operator-edge); }
.swatch.trigger-window { background: linear-gradient(var(--trigger-edge) 0 3px, var(--trigger) 3px); border-color: var(--trigger-edge); }
.line { display: inline-block; width: 14px; height: 0; vertical-align: 4px; margin-right: 8px; border-top: 2px solid; }
.line.trigger-end, .line.recovered { width: 0; height: 14px; vertical-align: -2px; margin: 0 14px 0 6px; border-top: 0; border-left: 2px dashed var(--trigger-end); }
.line.recovered { border-left: 2px solid var(--recovered); }
.line.reference { border-top: 2px dashed var(--reference); }
.line.best { border-top: 5px solid var(--best); vertical-align: 3px; }
.charts { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 0 28px; }
.col-head { font-size: 17px; font-weight: 600; padding-bottom: 4px; border-bottom: 2px solid var(--rule); }
.col-head .note { font-size: 13px; font-weight: normal; color: var(--muted); margin-left: 6px; }
h4.metric { grid-column: 1 / -1; margin: 16px 0 2px; font-size: 15px; }
h4.metric .help { font-weight: normal; font-size: 13px; color: var(--muted); margin-left: 6px; }
.chart { position: relative; min-width: 0; min-height: 210px; }
.chart .uplot { width: 100%; }
.chart-absent { min-height: 60px; padding: 18px 12px; color: var(--muted); font-size: 13px; background: var(--panel); align-self: start; margin-top: 6px; }
h3.characteristic { margin: 28px 0 6px; }
p.alerts { margin: 0 0 6px; padding: 6px 12px; background: var(--panel); border-left: 4px solid var(--alert); font-weight: 600; max-width: 100ch; }
p.alert-rules { margin: 0 0 8px; color: var(--muted); font-size: 13px; max-width: 120ch; }
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
.stacks { margin: 12px 0 0; }
.stacks .legend span { margin-right: 1em; }
.stacks svg { max-width: 100%; height: auto; }
.stacks-note { color: var(--muted); font-size: 13px; max-width: 100ch; }
`;
