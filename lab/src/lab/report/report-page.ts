/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/// <reference types="uplot" />

/**
 * The report page's own script, browser side: draws each chart of
 * `report.html` with the inlined uPlot from the page's JSON data island,
 * through the lab's chart kit (chart-kit.ts, inlined before it: `labCharts`).
 *
 * A script, not a module (no import or export): tsc emits it as it stands and
 * src/lab/report/report.ts inlines the compiled file in a script element after uPlot's.
 * Everything sits in one function so that nothing leaks into the page's, or
 * the type-checker's, global scope. Its types come from the renderer's
 * (`import('./report.js')`), so the two sides cannot drift apart.
 */
(function drawReport(): void {
  type ChartData = import('./report.js').ChartData;
  type ChartScenario = import('./report.js').ChartScenario;
  type ReportMetric = import('./report.js').ReportMetric;
  type VariantName = import('../judge/results.js').VariantName;
  type CharacteristicGauge = import('../judge/characteristic.js').CharacteristicGauge;
  type Values = (number | null)[];

  const kit = labCharts;
  const C = { ...kit.C, series: kit.color('--series'), best: kit.color('--best'), alert: kit.color('--alert') };

  const data = kit.island<ChartData>('lab-data');
  const scenarios = new Map(data.scenarios.map((s) => [s.name, s]));
  const metrics = new Map(data.metrics.map((m) => [m.key, m]));

  // ---- what each chart plots

  /** A line besides the variant's own: the best possible, the capacity, the objective. */
  interface Line {
    readonly label: string;
    readonly values: Values;
    readonly stroke: string;
    readonly width?: number;
    readonly dash?: number[];
  }

  interface Plan {
    readonly x: number[];
    readonly n: number;
    readonly ys: Record<VariantName, Values>;
    readonly lines: Record<VariantName, readonly Line[]>;
    readonly top: number;
  }

  function byVariant<T>(f: (v: VariantName) => T): Record<VariantName, T> {
    return Object.fromEntries(data.variants.map((v) => [v, f(v)])) as Record<VariantName, T>;
  }

  function isGauge(metric: ReportMetric['key']): metric is CharacteristicGauge {
    return metric.startsWith('damper.');
  }

  function values(metric: ReportMetric['key'], s: ChartScenario, variant: VariantName, n: number): Values {
    if (isGauge(metric)) return kit.fit(s.characteristics[variant][metric] ?? [], n);
    const series = s.series[variant];
    if (metric !== 'errorRate') return kit.fit(series[metric], n);
    const out: Values = [];
    for (let i = 0; i < n; i++) {
      const g = series.goodput[i];
      const e = series.errors[i];
      out.push(g === undefined || e === undefined || g + e === 0 ? null : e / (g + e));
    }
    return out;
  }

  function lines(metric: ReportMetric['key'], s: ChartScenario, variant: VariantName, n: number): Line[] {
    // A wide pale band under goodput: still seen where goodput runs on it, as damper's mostly does.
    if (metric === 'goodput') return [{ label: 'best possible', values: kit.fit(s.series[variant].bestGoodput, n), stroke: C.best, width: 5 }];
    if (metric === 'originQps') return [{ label: 'capacity', values: kit.fit(s.originCapacity, n), stroke: C.reference, dash: [6, 4] }];
    if (metric === 'p99Ms') return [{ label: 'objective', values: new Array<number>(n).fill(s.objectiveP99Ms), stroke: C.reference, dash: [6, 4] }];
    // Each shipped alert on this gauge: its threshold, on both variants' charts.
    return data.alertRules.filter((r) => r.metric === metric).map((r) => ({ label: `${r.alert} threshold`, values: new Array<number>(n).fill(r.above), stroke: C.alert, dash: [6, 4] }));
  }

  /**
   * Both variants of a metric share one y range, reference lines included, so
   * the same height means the same value on both sides; origin and latency
   * are drawn on a log axis (docs/lab.md, "The report"), where a damper at
   * 17 q/s and a naive at 1,000 q/s are both readable.
   */
  function plan(s: ChartScenario, m: ReportMetric): Plan {
    let n = s.durationS;
    for (const v of data.variants) for (const xs of Object.values(s.series[v])) n = Math.max(n, xs.length);
    const x = Array.from({ length: n }, (_, i) => i);
    const ys = byVariant((v) => values(m.key, s, v, n));
    const extra = byVariant((v) => lines(m.key, s, v, n));
    let max = 0;
    for (const v of data.variants) max = Math.max(max, kit.maxOf(ys[v]), ...extra[v].map((l) => kit.maxOf(l.values)));
    return { x, n, ys, lines: extra, top: kit.topOf(m.unit, m.axis, max) };
  }

  // ---- what is drawn over the lines

  /** The trigger window's marks and the variant's recovery. */
  function markers(s: ChartScenario, variant: VariantName): (u: uPlot) => void {
    return (u) => {
      kit.triggerMarks(u, s);
      const r = s.recoverySeconds[variant];
      if (r !== null) kit.vline(u, s.triggerEndS + r, C.recovered, [], 'healthy');
    };
  }

  /** Where each shipped alert on this gauge first fired for the variant: a solid line, labelled with the alert's name. */
  function alertMarks(s: ChartScenario, metric: ReportMetric['key'], variant: VariantName): (u: uPlot) => void {
    return (u) => {
      for (const a of s.alerts[variant]) if (a.metric === metric) kit.vline(u, a.firstFiredSeconds, C.alert, [], `${a.alert} fired`, 1);
    };
  }

  /** Hovering a chart writes that second's values above it (and above its synced neighbours). */
  function readout(m: ReportMetric, p: Plan, variant: VariantName, el: HTMLElement): (u: uPlot) => void {
    return (u) => {
      const i = u.cursor.idx;
      if (i === null || i === undefined) {
        el.textContent = '';
        return;
      }
      const parts = [`t = ${i} s`, `${m.title.toLowerCase()} ${kit.format(m.unit, p.ys[variant][i])}`];
      for (const l of p.lines[variant]) parts.push(`${l.label} ${kit.format(m.unit, l.values[i])}`);
      el.textContent = parts.join(' · ');
    };
  }

  function chartOptions(s: ChartScenario, m: ReportMetric, variant: VariantName, p: Plan, width: number, readoutEl: HTMLElement): uPlot.Options {
    const options = kit.frame({ sync: s.name, width, unit: m.unit, axis: m.axis, top: p.top, lastS: p.n - 1, xLabel: 'simulated time (s)' });
    // The lines beside the variant's come first, so it is drawn over them where they meet (damper's goodput on the best possible).
    for (const l of p.lines[variant]) options.series.push({ label: l.label, stroke: l.stroke, width: l.width ?? 1.5, ...(l.dash ? { dash: l.dash } : {}), points: { show: false } });
    options.series.push({ label: m.title, stroke: C.series, width: 1.5 });
    const skipped = s.skipped[variant];
    options.hooks = { drawClear: [kit.shade(s, (i) => !skipped.includes(i))], draw: [markers(s, variant), alertMarks(s, m.key, variant)], setCursor: [readout(m, p, variant, readoutEl)] };
    return options;
  }

  const plans = new Map<string, Plan>();
  const charts: { el: HTMLElement; plot: uPlot }[] = [];
  for (const el of document.querySelectorAll<HTMLElement>('.chart')) {
    const s = scenarios.get(el.dataset.scenario ?? '');
    const m = metrics.get((el.dataset.metric ?? '') as ReportMetric['key']);
    const variant = data.variants.find((v) => v === el.dataset.variant);
    if (s === undefined || m === undefined || variant === undefined) continue;
    const id = `${s.name}\u0000${m.key}`;
    const p = plans.get(id) ?? plan(s, m);
    plans.set(id, p);
    const readoutEl = document.createElement('div');
    readoutEl.className = 'readout';
    el.appendChild(readoutEl);
    const aligned: uPlot.AlignedData = [p.x, ...p.lines[variant].map((l) => l.values), p.ys[variant]];
    charts.push({ el, plot: new uPlot(chartOptions(s, m, variant, p, el.clientWidth || 560, readoutEl), aligned, el) });
  }
  kit.keepWidths(charts);
  document.documentElement.dataset.charts = String(charts.length);
})();
