import { num } from '../format.js';
import { originCapacity } from '../judge/best-possible.js';
import { compareFidelity, type FidelityRow, hostPeaks } from '../judge/fidelity.js';
import { agreementWords, barWords, FIGURE_NOTES, FIGURE_TITLES, figureValue, fittingWords, realWords } from '../judge/fidelity-words.js';
import { type JudgedRun, type Series, type VariantName } from '../judge/results.js';
import { type Fidelity, type FidelityVariant, type HostSeries } from '../real/real-run.js';
import { triggerEndS, triggerStartS } from '../scenario.js';
import { esc } from './html.js';
import { chartScripts, type ChartTimeline, type ChartUnit, inlineCss, PAGE_CSS, pageHead, siblingLink, uplotAsset, VARIANT_NOTES } from './report.js';

/**
 * The fidelity page of `damper lab real` (issue 30, item 3): per variant, the
 * table of item 4 (each judged figure, simulated against every real run,
 * with its bar, the spread and how many runs agree), the simulated and the
 * real per-second series drawn over each other, and what each process took
 * of the host (CPU, event-loop delay), so a reader can tell a disagreement
 * the model made from one the machine made.
 *
 * One self-contained file like report.html: uPlot, the lab's chart kit and
 * this page's script (fidelity-charts.ts) inlined, the series in a JSON
 * island. Nothing reads the clock or the locale: the same data renders the
 * same bytes.
 */

/** The series drawn for each variant, simulated and real over each other. */
export type FidelitySeriesKey = 'offered' | 'goodput' | 'originQps' | 'p99Ms' | 'inFlight';

/** The host's series drawn for each variant. */
export type HostMetricKey = 'cpu' | 'lagP99Ms';

/** One chart of the page: what it plots and how it is labelled. */
export interface FidelityMetric<K extends string = FidelitySeriesKey | HostMetricKey> {
  readonly key: K;
  readonly title: string;
  readonly help: string;
  readonly unit: ChartUnit;
  /** `log` where the runs may lie orders of magnitude apart (origin, latency, a loop's delay). */
  readonly axis: 'linear' | 'log';
}

/** The run charts of each variant, in order. */
export const FIDELITY_METRICS: readonly FidelityMetric<FidelitySeriesKey>[] = [
  { key: 'offered', title: 'Offered load', help: 'requests clients sent per second, first attempts and retries', unit: 'req/s', axis: 'linear' },
  { key: 'goodput', title: 'Goodput', help: 'of the requests sent that second, those answered with a valid value within the client’s timeout', unit: 'req/s', axis: 'linear' },
  { key: 'originQps', title: 'Origin queries', help: 'queries that reached the origin per second; dashed: its capacity that second', unit: 'q/s', axis: 'log' },
  { key: 'p99Ms', title: 'p99 latency', help: 'of the requests sent in that second; dashed: the objective', unit: 'ms', axis: 'log' },
  { key: 'inFlight', title: 'In flight', help: 'requests sent and not yet ended at the second’s end', unit: 'requests', axis: 'log' },
];

/** The host charts of each variant: one line per process and real run. */
export const HOST_METRICS: readonly FidelityMetric<HostMetricKey>[] = [
  { key: 'cpu', title: 'CPU per process', help: 'user + system, cores; dashed: the host’s cores; dotted: one core, all a Node process’s event loop can use', unit: 'cores', axis: 'linear' },
  { key: 'lagP99Ms', title: 'Event-loop delay per process', help: 'p99 of each second; a process without an event loop (redis-server, PostgreSQL) has none', unit: 'ms', axis: 'log' },
];

/** One run as the page's script draws it. */
export interface ChartRun {
  /** `simulation`, `run 1`, `run 2`… */
  readonly label: string;
  readonly series: Pick<Series, FidelitySeriesKey>;
  /** Indices into the scenario's faults that did not happen in this run. */
  readonly skipped: readonly number[];
  /** s after the trigger's end; null: never healthy again. */
  readonly recoverySeconds: number | null;
}

/** One real run's processes, as the host charts draw them. */
export interface ChartHost {
  readonly label: string;
  readonly processes: readonly Pick<HostSeries, 'name' | 'cpu' | 'lagP99Ms'>[];
}

/** One variant as the page's script draws it: its simulation, its real runs and their processes. */
export interface FidelityChartVariant {
  readonly name: VariantName;
  readonly simulated: ChartRun;
  readonly real: readonly ChartRun[];
  readonly host: readonly ChartHost[];
  /** Every process of any run, in order of first appearance: one colour each. */
  readonly processes: readonly string[];
}

/** What the page's script (fidelity-charts.ts) reads. */
export interface FidelityChartData extends ChartTimeline {
  /** The host's cores: the CPU charts' reference line. */
  readonly cores: number;
  readonly metrics: readonly FidelityMetric[];
  readonly variants: readonly FidelityChartVariant[];
  readonly colours: { readonly simulation: string; readonly real: readonly string[]; readonly processes: readonly string[]; readonly runDashes: readonly (readonly number[])[] };
}

/** What the real runner found about the host, per variant: a line each (the host, not the modelled capacity, may have limited a run). */
export type HostNotes = Partial<Record<VariantName, readonly string[]>>;

/** The real runs' colours (one family: oranges and browns) and the simulation's (blue, the report's series colour). */
export const RUN_COLOURS = { simulation: '#1f6feb', real: ['#d9480f', '#f59f00', '#8f3d0b', '#e8590c', '#c28400'] } as const;

/** The processes' colours on the host charts, in order, repeating past the eighth. */
export const PROCESS_COLOURS = ['#1f77b4', '#2ca02c', '#9467bd', '#d62728', '#17becf', '#8c564b', '#e377c2', '#7f7f7f'] as const;

/** The real runs' strokes on the host charts (a process has one colour in every run): run 1 solid, run 2 dashed, run 3 dotted, repeating; `css` is the legend's border style. */
export const RUN_DASHES: readonly { readonly dash: readonly number[]; readonly css: 'solid' | 'dashed' | 'dotted' }[] = [
  { dash: [], css: 'solid' },
  { dash: [6, 3], css: 'dashed' },
  { dash: [2, 3], css: 'dotted' },
];

const runDash = (i: number): (typeof RUN_DASHES)[number] => RUN_DASHES[i % RUN_DASHES.length]!;

const pick = (s: Series): Pick<Series, FidelitySeriesKey> => ({ offered: s.offered, goodput: s.goodput, originQps: s.originQps, p99Ms: s.p99Ms, inFlight: s.inFlight });

function chartRun(label: string, run: JudgedRun): ChartRun {
  return { label, series: pick(run.series), skipped: run.skippedFaults, recoverySeconds: run.summary.recoverySeconds };
}

const runLabel = (i: number): string => `run ${i + 1}`;

/** Every process of a variant's real runs, in order of first appearance: one colour each on the host charts. */
function processesOf(v: FidelityVariant): string[] {
  const processes: string[] = [];
  for (const r of v.real) for (const p of r.host) if (!processes.includes(p.name)) processes.push(p.name);
  return processes;
}

function chartVariant(name: VariantName, v: FidelityVariant): FidelityChartVariant {
  return {
    name,
    simulated: chartRun('simulation', v.simulated),
    real: v.real.map((r, i) => chartRun(runLabel(i), r)),
    host: v.real.map((r, i) => ({ label: runLabel(i), processes: r.host.map((p) => ({ name: p.name, cpu: p.cpu, lagP99Ms: p.lagP99Ms })) })),
    processes: processesOf(v),
  };
}

/** Renders the fidelity page; `hostNotes` are the real runner's words on the host, shown with each variant's host charts. */
export function renderFidelity(f: Fidelity, hostNotes: HostNotes = {}): string {
  const rows = compareFidelity(f);
  const scenario = f.scenario;
  const data: FidelityChartData = {
    durationS: scenario.durationS,
    originCapacity: originCapacity(scenario, Math.ceil(scenario.durationS)),
    objectiveP99Ms: scenario.objective.p99Ms,
    triggerStartS: triggerStartS(scenario),
    triggerEndS: triggerEndS(scenario),
    faults: scenario.faults.map((x) => ({ label: x.label, startS: x.startS, endS: x.endS, kind: x.trigger ? 'trigger' : 'operator' })),
    cores: f.cores,
    metrics: [...FIDELITY_METRICS, ...HOST_METRICS],
    variants: rows.map(({ variant }) => chartVariant(variant, f.variants[variant]!)),
    colours: { simulation: RUN_COLOURS.simulation, real: RUN_COLOURS.real, processes: PROCESS_COLOURS, runDashes: RUN_DASHES.map((d) => d.dash) },
  };
  const runs = Math.max(0, ...rows.map((r) => r.row.runs));
  return `${pageHead(`damper lab real — ${scenario.name}, seed ${f.seed}`)}
<style>
${inlineCss(uplotAsset('uPlot.min.css'))}
</style>
<style>
${PAGE_CSS}
${FIDELITY_CSS}
</style>
</head>
<body>
<header class="page">
<h1>damper lab real <span class="name">${esc(scenario.name)}</span></h1>
<p class="title">${esc(scenario.title)}</p>
<p class="meta">seed ${f.seed} · each variant simulated once and run ${runs} time${runs === 1 ? '' : 's'} on real processes on loopback, the same scenario both ways (${esc(fittingWords(f))}) · host: ${num(f.cores, 0)} cores. Time is the fitted scenario’s: simulated for the simulation, wall-clock for the real runs.</p>
${siblingLink('report.html', 'the lab’s own replay of the shipped scenarios, chart by chart', ['damper lab'])}
<p class="verdict">${esc(overall(rows, hostNotes))}</p>
</header>
<main>
${rows.map(({ variant, row }) => renderVariant(f, variant, row, hostNotes[variant] ?? [])).join('\n')}
</main>
<footer class="page">Made by <code>damper lab real</code>. How the runs are judged: the simulation is the reference; a figure agrees when every real run lies within its bar around the simulated value (item 4 of issue 30); a recovery that never came agrees only with another. Charts drawn with uPlot (MIT licence, © Leon Sorokin), inlined in this file; the page loads nothing from the network. The same figures are in <code>fidelity.json</code>.</footer>
<noscript><p class="noscript">The charts need JavaScript; the tables do not.</p></noscript>
${chartScripts('fidelity-data', data, 'fidelity-charts')}
</body>
</html>
`;
}

/** The page's headline: whether each variant agrees, and where the host may have had a say. */
function overall(rows: ReturnType<typeof compareFidelity>, hostNotes: HostNotes): string {
  const parts = rows.map(({ variant, row }) => {
    const off = row.figures.filter((c) => c.agrees === false).map((c) => FIGURE_TITLES[c.figure]);
    return off.length === 0 ? `${variant}: the simulation and the real runs agree on every judged figure` : `${variant}: they disagree on ${off.join(', ')}`;
  });
  const noted = rows.filter(({ variant }) => (hostNotes[variant] ?? []).length > 0).map(({ variant }) => variant);
  const host = noted.length === 0 ? '' : ` The host may have limited ${noted.join(' and ')}: see its notes below.`;
  return `${parts.join('. ')}.${host}`;
}

function renderVariant(f: Fidelity, variant: VariantName, row: FidelityRow, notes: readonly string[]): string {
  const v = f.variants[variant]!;
  const agreement = row.agrees ? '<span class="agreement agrees">agrees</span>' : '<span class="agreement disagrees">disagrees</span>';
  return `<section class="variant" id="variant-${variant}" data-variant="${variant}">
<h2>${variant} <span class="note">${VARIANT_NOTES[variant]}</span> ${agreement}</h2>
${renderTable(variant, row)}
${renderRunKeys(v)}
<div class="charts">
${FIDELITY_METRICS.map((m) => chart(variant, m)).join('\n')}
</div>
<h3 class="host">The host: what each process took of it</h3>
${notes.length > 0 ? `<ul class="host-notes">\n${notes.map((n) => `<li>${esc(n)}</li>`).join('\n')}\n</ul>` : ''}
${renderHostKeys(v)}
<div class="charts">
${HOST_METRICS.map((m) => chart(variant, m)).join('\n')}
</div>
${renderHostPeaks(v)}
</section>`;
}

function chart(variant: VariantName, m: FidelityMetric): string {
  return `<div class="chart-cell"><h4 class="metric"><span class="metric-title">${m.title}</span> <span class="help">${m.help}</span></h4>
<div class="chart" data-variant="${variant}" data-metric="${m.key}" role="img" aria-label="${esc(`${variant}: ${m.title}`)}"></div></div>`;
}

/** The table of item 4: one row per figure, the simulated value, each real run's (those outside the bar marked), the spread, the bar and the agreement. */
function renderTable(variant: VariantName, row: FidelityRow): string {
  const runs = Array.from({ length: row.runs }, (_, i) => `<th scope="col" class="run">${runLabel(i)}</th>`).join('');
  const head = `<tr><th scope="col">figure</th><th scope="col" class="sim">simulation</th>${runs}<th scope="col">real: median [min–max]</th><th scope="col">bar</th><th scope="col">agree</th></tr>`;
  const body = row.figures.map((c) => {
    const cells = c.real.map((x, i) => `<td class="run${c.within?.[i] === false ? ' off' : ''}">${esc(figureValue(c.figure, x))}</td>`).join('');
    const state = c.agrees === null ? 'shown' : c.agrees ? 'agrees' : 'disagrees';
    return `<tr data-figure="${c.figure}" class="${state}"><th scope="row" title="${esc(FIGURE_NOTES[c.figure])}">${FIGURE_TITLES[c.figure]}</th><td class="sim">${esc(figureValue(c.figure, c.simulated))}</td>${cells}<td class="spread">${esc(realWords(c))}</td><td class="bar">${esc(barWords(c))}</td><td class="agree">${esc(agreementWords(c)) || '—'}</td></tr>`;
  });
  return `<table class="fidelity" data-variant="${variant}">
<caption>Simulated against real: each judged figure agrees when every real run lies within its bar around the simulated value; a value outside it is marked. Error rate and p99 are shown, not judged.</caption>
<thead>${head}</thead>
<tbody>
${body.join('\n')}
</tbody>
</table>`;
}

/** What the run charts' lines and marks are. */
function renderRunKeys(v: FidelityVariant): string {
  const real = v.real.map((_, i) => `<span class="line" style="border-color: ${realColour(i)}"></span>${runLabel(i)}`).join(' ');
  return `<ul class="keys">
<li><span class="line" style="border-color: ${RUN_COLOURS.simulation}; border-top-width: 3px"></span>the simulation · real runs: ${real}</li>
<li><span class="swatch trigger-window"></span>the trigger window, with a bar along the top; operator actions hatched (when they happened in any run) · <span class="line trigger-end"></span>trigger ended · solid vertical lines: when each run was healthy again, in its colour</li>
</ul>`;
}

/** The host charts' processes (colours) and runs (dashes). */
function renderHostKeys(v: FidelityVariant): string {
  const processes = processesOf(v).map((p, i) => `<span class="line" style="border-color: ${processColour(i)}"></span>${esc(p)}`).join(' ');
  const runs = v.real.map((_, i) => `<span class="line" style="border-top-style: ${runDash(i).css}"></span>${runLabel(i)}`).join(' ');
  return `<ul class="keys"><li>processes: ${processes}</li><li>real runs: ${runs}</li></ul>`;
}

/** Per process and real run: its highest CPU in one second and its worst second's event-loop p99. */
function renderHostPeaks(v: FidelityVariant): string {
  const peaks = v.real.map(hostPeaks);
  const names = processesOf(v);
  const head = `<tr><th scope="col">process</th>${v.real.map((_, i) => `<th scope="col">${runLabel(i)}</th>`).join('')}</tr>`;
  const body = names.map((name) => {
    const cells = peaks.map((run) => {
      const p = run.find((x) => x.name === name);
      if (p === undefined) return '<td>–</td>';
      const lag = p.lagP99MaxMs === null ? 'no event loop' : `loop p99 ≤ ${num(p.lagP99MaxMs, 0)} ms`;
      return `<td>${num(p.cpuMaxCores, 2)} cores at most · ${lag}</td>`;
    });
    return `<tr><th scope="row">${esc(name)}</th>${cells.join('')}</tr>`;
  });
  return `<table class="host-peaks">
<caption>Each process at its worst second</caption>
<thead>${head}</thead>
<tbody>
${body.join('\n')}
</tbody>
</table>`;
}

/** A real run's colour: the family's i-th, repeating. */
export function realColour(i: number): string {
  return RUN_COLOURS.real[i % RUN_COLOURS.real.length]!;
}

/** A process's colour on the host charts, by its order of first appearance. */
export function processColour(i: number): string {
  return PROCESS_COLOURS[i % PROCESS_COLOURS.length]!;
}

/** The fidelity page's own rules, on top of the report's (PAGE_CSS): the colours the script reads, the table, the keys. */
const FIDELITY_CSS = `
:root { --sim: ${RUN_COLOURS.simulation}; --agree: #1a7f37; }
h1 .name { font: 15px ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; color: var(--muted); font-weight: normal; margin-left: 8px; }
.title { margin: 0 0 4px; font-weight: 600; }
section.variant { border-top: 1px solid var(--rule); margin-top: 28px; padding-top: 22px; }
section.variant h2 .note { font-size: 13px; font-weight: normal; color: var(--muted); margin-left: 6px; }
.agreement { font-size: 14px; padding: 1px 8px; border-radius: 10px; margin-left: 8px; vertical-align: 3px; }
.agreement.agrees { background: #dafbe1; color: var(--agree); }
.agreement.disagrees { background: #ffebe9; color: var(--bad); }
table.fidelity, table.host-peaks { border-collapse: collapse; font-size: 14px; font-variant-numeric: tabular-nums; margin: 8px 0 16px; }
table.fidelity caption, table.host-peaks caption { text-align: left; color: var(--muted); font-size: 13px; padding-bottom: 4px; max-width: 110ch; }
table.fidelity th, table.fidelity td, table.host-peaks th, table.host-peaks td { padding: 3px 12px; border-bottom: 1px solid var(--rule); text-align: right; }
table.fidelity thead th, table.host-peaks thead th { border-bottom: 2px solid var(--rule); font-weight: 600; }
table.fidelity tbody th, table.host-peaks tbody th { text-align: left; font-weight: normal; color: var(--muted); }
table.fidelity td.sim { color: var(--sim); font-weight: 600; }
table.fidelity td.off { color: var(--bad); font-weight: 600; text-decoration: underline dotted; }
table.fidelity td.bar, table.fidelity td.spread { color: var(--muted); }
table.fidelity tr.agrees td.agree { color: var(--agree); font-weight: 600; }
table.fidelity tr.disagrees td.agree { color: var(--bad); font-weight: 600; }
table.fidelity tr.shown { color: var(--muted); }
ul.keys { list-style: none; margin: 0 0 6px; padding: 0; color: var(--muted); font-size: 13px; }
ul.keys li { margin: 2px 0; }
ul.keys .line { margin: 0 4px 0 10px; }
ul.host-notes { margin: 0 0 8px; padding: 6px 12px 6px 28px; background: #fff8c5; border-left: 4px solid #d4a72c; max-width: 110ch; }
h3.host { margin: 24px 0 6px; }
.chart-cell { min-width: 0; }
.chart-cell h4.metric { margin: 12px 0 2px; }
`;
