/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/// <reference types="uplot" />

/**
 * The fidelity page's own script, browser side: draws each variant's run
 * charts (the simulation and every real run over each other) and host charts
 * (one line per process and real run) from the page's JSON data island,
 * through the lab's chart kit (chart-kit.ts, inlined before it: `labCharts`).
 *
 * A script, not a module, like report-page.ts: everything in one function,
 * its types taken from the renderer's (`import('./fidelity-page.js')`).
 */
(function drawFidelity(): void {
  type Data = import('./fidelity-page.js').FidelityChartData;
  type Metric = import('./fidelity-page.js').FidelityMetric;
  type Variant = import('./fidelity-page.js').FidelityChartVariant;
  type SeriesKey = import('./fidelity-page.js').FidelitySeriesKey;
  type Values = (number | null)[];

  const kit = labCharts;
  const data = kit.island<Data>('fidelity-data');
  const variants = new Map(data.variants.map((v) => [v.name, v]));
  const metrics = new Map(data.metrics.map((m) => [m.key, m]));
  const colours = data.colours;

  /** A line of a chart: its name in the readout, its values, its stroke. */
  interface Line {
    readonly label: string;
    readonly values: Values;
    readonly stroke: string;
    readonly width: number;
    readonly dash?: readonly number[];
    /** The readout names the simulation first, then the real runs (or processes) in order, then the references (capacity, objective, cores). */
    readonly role: 'simulation' | 'run' | 'reference';
  }

  const realColour = (i: number): string => colours.real[i % colours.real.length]!;
  const runDash = (i: number): readonly number[] => colours.runDashes[i % colours.runDashes.length]!;

  function length(v: Variant): number {
    let n = Math.ceil(data.durationS);
    for (const run of [v.simulated, ...v.real]) for (const xs of Object.values(run.series)) n = Math.max(n, xs.length);
    for (const run of v.host) for (const p of run.processes) n = Math.max(n, p.cpu.length, p.lagP99Ms.length);
    return n;
  }

  /** The simulation and each real run of one series; the reference line first, the simulation last so it is drawn over the real runs. */
  function runLines(v: Variant, key: SeriesKey, n: number): Line[] {
    const lines: Line[] = [];
    if (key === 'originQps') lines.push({ label: 'capacity', values: kit.fit(data.originCapacity, n), stroke: kit.C.reference, width: 1.5, dash: [6, 4], role: 'reference' });
    if (key === 'p99Ms') lines.push({ label: 'objective', values: new Array<number>(n).fill(data.objectiveP99Ms), stroke: kit.C.reference, width: 1.5, dash: [6, 4], role: 'reference' });
    v.real.forEach((r, i) => lines.push({ label: r.label, values: kit.fit(r.series[key], n), stroke: realColour(i), width: 1.25, role: 'run' }));
    lines.push({ label: v.simulated.label, values: kit.fit(v.simulated.series[key], n), stroke: colours.simulation, width: 2, role: 'simulation' });
    return lines;
  }

  /** One line per process and real run (a process keeps its colour across runs; a run its dash), then the host's cores and one core. */
  function hostLines(v: Variant, key: 'cpu' | 'lagP99Ms', n: number): Line[] {
    const lines: Line[] = [];
    v.host.forEach((run, r) => {
      for (const p of run.processes) {
        const colour = colours.processes[v.processes.indexOf(p.name) % colours.processes.length]!;
        lines.push({ label: `${p.name} (${run.label})`, values: kit.fit(p[key], n), stroke: colour, width: 1.25, dash: runDash(r), role: 'run' });
      }
    });
    if (key === 'cpu') {
      lines.push({ label: 'host', values: new Array<number>(n).fill(data.cores), stroke: kit.C.reference, width: 1.5, dash: [6, 4], role: 'reference' });
      lines.push({ label: 'one event loop', values: new Array<number>(n).fill(1), stroke: kit.C.reference, width: 1, dash: [1, 3], role: 'reference' });
    }
    return lines;
  }

  /** Operator actions hatched when they happened in any run drawn (one skipped by every run, being healthy, did not happen here). */
  function happened(v: Variant): (fault: number) => boolean {
    return (i) => [v.simulated, ...v.real].some((r) => !r.skipped.includes(i));
  }

  /** The trigger's marks, and when each run was healthy again, in its colour: the simulation's labelled. */
  function recoveries(v: Variant): (u: uPlot) => void {
    return (u) => {
      kit.triggerMarks(u, data);
      v.real.forEach((r, i) => {
        if (r.recoverySeconds !== null) kit.vline(u, data.triggerEndS + r.recoverySeconds, realColour(i), [], null, 0, 1);
      });
      const s = v.simulated.recoverySeconds;
      if (s !== null) kit.vline(u, data.triggerEndS + s, colours.simulation, [], 'simulation healthy');
    };
  }

  /** Hovering a chart writes that second's values above it: every run's, then the references. */
  function readout(m: Metric, lines: readonly Line[], el: HTMLElement): (u: uPlot) => void {
    const ordered = (['simulation', 'run', 'reference'] as const).flatMap((role) => lines.filter((l) => l.role === role));
    return (u) => {
      const i = u.cursor.idx;
      if (i === null || i === undefined) {
        el.textContent = '';
        return;
      }
      el.textContent = [`t = ${i} s`, ...ordered.map((l) => `${l.label} ${kit.format(m.unit, l.values[i])}`)].join(' · ');
    };
  }

  const charts: { el: HTMLElement; plot: uPlot }[] = [];
  for (const el of document.querySelectorAll<HTMLElement>('.chart')) {
    const v = variants.get((el.dataset.variant ?? '') as Variant['name']);
    const m = metrics.get((el.dataset.metric ?? '') as Metric['key']);
    if (v === undefined || m === undefined) continue;
    const n = length(v);
    const lines = m.key === 'cpu' || m.key === 'lagP99Ms' ? hostLines(v, m.key, n) : runLines(v, m.key, n);
    const top = kit.topOf(m.unit, m.axis, Math.max(0, ...lines.map((l) => kit.maxOf(l.values))));
    const readoutEl = document.createElement('div');
    readoutEl.className = 'readout';
    el.appendChild(readoutEl);
    const options = kit.frame({ sync: v.name, width: el.clientWidth || 560, unit: m.unit, axis: m.axis, top, lastS: n - 1, xLabel: 'time (s)' });
    for (const l of lines) options.series.push({ label: l.label, stroke: l.stroke, width: l.width, ...(l.dash ? { dash: [...l.dash] } : {}), points: { show: false } });
    options.hooks = { drawClear: [kit.shade(data, happened(v))], draw: [recoveries(v)], setCursor: [readout(m, lines, readoutEl)] };
    const x = Array.from({ length: n }, (_, i) => i);
    charts.push({ el, plot: new uPlot(options, [x, ...lines.map((l) => l.values)], el) });
  }
  kit.keepWidths(charts);
  document.documentElement.dataset.charts = String(charts.length);
})();
