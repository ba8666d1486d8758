/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/// <reference types="uplot" />

/**
 * The report page's own script, browser side: draws each chart of
 * `report.html` with the inlined uPlot from the page's JSON data island.
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

  const HEIGHT = 210;
  const FONT = '11px system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", sans-serif';
  const LABEL_FONT = '600 11px system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", sans-serif';
  const css = getComputedStyle(document.documentElement);
  const color = (name: string): string => css.getPropertyValue(name).trim();
  const C = {
    series: color('--series'),
    best: color('--best'),
    trigger: color('--trigger'),
    triggerEdge: color('--trigger-edge'),
    operatorEdge: color('--operator-edge'),
    recovered: color('--recovered'),
    triggerEnd: color('--trigger-end'),
    reference: color('--reference'),
    alert: color('--alert'),
    axis: '#59636e',
    grid: '#eaeef2',
  };

  const island = document.getElementById('lab-data');
  if (island === null) throw new Error('report: the page has no #lab-data island');
  const data = JSON.parse(island.textContent ?? '') as ChartData;
  const scenarios = new Map(data.scenarios.map((s) => [s.name, s]));
  const metrics = new Map(data.metrics.map((m) => [m.key, m]));

  // ---- numbers, as src/lab/format.ts writes them for people (a script cannot import it)

  function trim(s: string): string {
    return s.includes('.') ? s.replace(/\.?0+$/, '') : s;
  }
  function grouped(v: number): string {
    return v.toFixed(0).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  }
  function compact(v: number): string {
    const a = Math.abs(v);
    if (a >= 1e6) return `${trim((v / 1e6).toFixed(2))}M`;
    if (a >= 100) return grouped(v);
    if (a >= 10) return trim(v.toFixed(1));
    return trim(v.toFixed(2));
  }
  /** format.ts's `percent`: never a rounded 0 % or 100 % that is not. */
  function percent(r: number): string {
    if (r <= 0) return '0%';
    if (r >= 1) return '100%';
    if (r < 0.001) return '<0.1%';
    if (r > 0.999) return '>99.9%';
    return `${(r * 100).toFixed(1)}%`;
  }
  function format(unit: ReportMetric['unit'], v: number | null | undefined): string {
    if (v === null || v === undefined || !Number.isFinite(v)) return '–';
    if (unit === '%') return percent(v);
    if (unit === 'ratio') return trim(v.toFixed(3));
    // format.ts's `millis`: the engine steps whole ms, so 0 is "within the same millisecond".
    if (unit === 'ms') return v < 1 ? '<1 ms' : `${grouped(v)} ms`;
    return `${compact(v)} ${unit}`;
  }
  /** Tick labels; on a log axis uPlot hands over the ticks it filtered out as null (typed number). */
  function axisValues(unit: ReportMetric['unit'], vals: readonly (number | null)[]): string[] {
    let top = 0;
    for (const v of vals) if (v !== null && Number.isFinite(v)) top = Math.max(top, Math.abs(v));
    return vals.map((v) => {
      if (v === null) return '';
      if (v === 0) return unit === '%' ? '0%' : '0';
      if (unit === '%') return `${trim((v * 100).toFixed(1))}%`;
      // Two significant digits below 1: a shed ratio's ticks are 0.005 apart.
      if (unit === 'ratio') return v >= 1 ? trim(v.toFixed(v >= 10 ? 0 : 1)) : String(Number(v.toPrecision(2)));
      if (v >= 1e6) return `${trim((v / 1e6).toFixed(2))}M`;
      if (v >= 1e4 || (top >= 1e4 && v >= 1e3)) return `${trim((v / 1e3).toFixed(1))}k`;
      return trim(v.toFixed(v >= 10 || top >= 10 ? 0 : 2));
    });
  }

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

  function fit(xs: readonly (number | null)[], n: number): Values {
    const out = xs.slice(0, n);
    while (out.length < n) out.push(null);
    return out;
  }

  function isGauge(metric: ReportMetric['key']): metric is CharacteristicGauge {
    return metric.startsWith('damper.');
  }

  function values(metric: ReportMetric['key'], s: ChartScenario, variant: VariantName, n: number): Values {
    if (isGauge(metric)) return fit(s.characteristics[variant][metric] ?? [], n);
    const series = s.series[variant];
    if (metric !== 'errorRate') return fit(series[metric], n);
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
    if (metric === 'goodput') return [{ label: 'best possible', values: fit(s.series[variant].bestGoodput, n), stroke: C.best, width: 5 }];
    if (metric === 'originQps') return [{ label: 'capacity', values: fit(s.originCapacity, n), stroke: C.reference, dash: [6, 4] }];
    if (metric === 'p99Ms') return [{ label: 'objective', values: new Array<number>(n).fill(s.objectiveP99Ms), stroke: C.reference, dash: [6, 4] }];
    // Each shipped alert on this gauge: its threshold, on both variants' charts.
    return data.alertRules.filter((r) => r.metric === metric).map((r) => ({ label: `${r.alert} threshold`, values: new Array<number>(n).fill(r.above), stroke: C.alert, dash: [6, 4] }));
  }

  function maxOf(xs: Values): number {
    let m = 0;
    for (const v of xs) if (v !== null && Number.isFinite(v) && v > m) m = v;
    return m;
  }

  function niceCeil(v: number): number {
    if (!(v > 0) || !Number.isFinite(v)) return 0;
    const p = 10 ** Math.floor(Math.log10(v));
    for (const step of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (step * p >= v * (1 - 1e-9)) return step * p;
    return 10 * p;
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
    for (const v of data.variants) max = Math.max(max, maxOf(ys[v]), ...extra[v].map((l) => maxOf(l.values)));
    let top = m.unit === '%' ? 1 : niceCeil(max * (m.axis === 'log' ? 1.3 : 1.08));
    if (!(top > 0)) top = 1;
    return { x, n, ys, lines: extra, top };
  }

  /** A log axis's ticks: 0 and the decades up to the top, with 2 and 5 between them when there are few. */
  function logTicks(top: number): number[] {
    const decades: number[] = [];
    for (let d = 1; d <= top; d *= 10) decades.push(d);
    // With three decades or more, 1 sits on top of 0 (asinh is linear below 1): 0 alone says "idle" or "under 1 ms".
    const ticks = decades.length >= 3 ? decades.slice(1) : decades.flatMap((d) => [d, 2 * d, 5 * d]).filter((v) => v <= top);
    return [0, ...ticks];
  }

  /**
   * A ratio's log axis: linear up to 1 (0, ½, 1: where the alerts' thresholds
   * lie), then 2 and 5 of each decade; from 100 on the decades alone, and no ½,
   * which would sit on 0.
   */
  function ratioTicks(top: number): number[] {
    const above: number[] = [];
    for (let d = 1; d <= top; d *= 10) above.push(...(top >= 100 ? [d * 10] : [d * 2, d * 5, d * 10]));
    return [...(top >= 100 ? [0, 1] : [0, 0.5, 1]), ...above.filter((v) => v <= top)];
  }

  // ---- what is drawn under and over the lines

  /** Operator actions are hatched, so they read apart from the trigger's tint where they overlap it. */
  function hatch(ctx: CanvasRenderingContext2D, px: number): CanvasPattern | string {
    const size = Math.round(8 * px);
    const tile = document.createElement('canvas');
    tile.width = size;
    tile.height = size;
    const t = tile.getContext('2d');
    if (t === null) return C.operatorEdge;
    t.strokeStyle = C.operatorEdge;
    t.lineWidth = px;
    t.beginPath();
    t.moveTo(0, size);
    t.lineTo(size, 0);
    t.moveTo(-size / 2, size / 2);
    t.lineTo(size / 2, -size / 2);
    t.moveTo(size / 2, size * 1.5);
    t.lineTo(size * 1.5, size / 2);
    t.stroke();
    return ctx.createPattern(tile, 'repeat') ?? C.operatorEdge;
  }

  /** The x extent of [from, to] s on the plot, at least 3 px wide (an instant action is a thin band). */
  function span(u: uPlot, from: number, to: number, px: number): [number, number] | null {
    const b = u.bbox;
    let x0 = Math.max(b.left, u.valToPos(from, 'x', true));
    let x1 = Math.min(b.left + b.width, u.valToPos(to, 'x', true));
    if (x1 - x0 < 3 * px) {
      const mid = (x0 + x1) / 2;
      x0 = mid - 1.5 * px;
      x1 = mid + 1.5 * px;
    }
    return x1 < b.left || x0 > b.left + b.width ? null : [x0, x1];
  }

  function shade(s: ChartScenario, variant: VariantName): (u: uPlot) => void {
    return (u) => {
      const ctx = u.ctx;
      const b = u.bbox;
      const px = Math.max(1, Math.round(devicePixelRatio || 1));
      ctx.save();
      const trigger = span(u, s.triggerStartS, s.triggerEndS, px);
      if (trigger !== null) {
        ctx.fillStyle = C.trigger;
        ctx.fillRect(trigger[0], b.top, trigger[1] - trigger[0], b.height);
      }
      const pattern = hatch(ctx, px);
      s.faults.forEach((f, i) => {
        if (f.kind !== 'operator' || s.skipped[variant].includes(i)) return;
        const x = span(u, f.startS, f.endS, px);
        if (x === null) return;
        ctx.fillStyle = x[1] - x[0] <= 3 * px ? C.operatorEdge : pattern;
        ctx.fillRect(x[0], b.top, x[1] - x[0], b.height);
      });
      ctx.restore();
    };
  }

  /** A line's label at the top of the plot; `row` 1 and on sit below it, so an alert's does not cover "healthy". */
  function label(u: uPlot, text: string, x: number, stroke: string, row: number): void {
    const ctx = u.ctx;
    const b = u.bbox;
    const px = devicePixelRatio || 1;
    ctx.font = LABEL_FONT.replace('11px', `${Math.round(11 * px)}px`);
    ctx.textBaseline = 'top';
    ctx.textAlign = 'left';
    const w = ctx.measureText(text).width;
    const gap = 4 * px;
    const tx = x + gap + w <= b.left + b.width ? x + gap : x - gap - w;
    ctx.fillStyle = 'rgba(255, 255, 255, 0.85)';
    const y = b.top + (6 + 16 * row) * px;
    ctx.fillRect(tx - 2 * px, y, w + 4 * px, 14 * px);
    ctx.fillStyle = stroke;
    ctx.fillText(text, tx, y + px);
  }

  function vline(u: uPlot, at: number, stroke: string, dash: number[], text: string | null, row = 0): void {
    const ctx = u.ctx;
    const b = u.bbox;
    const px = devicePixelRatio || 1;
    const x = Math.round(u.valToPos(at, 'x', true)) + 0.5;
    if (!(x >= b.left && x <= b.left + b.width)) return;
    ctx.save();
    ctx.strokeStyle = stroke;
    ctx.lineWidth = 1.5 * px;
    ctx.setLineDash(dash.map((d) => d * px));
    ctx.beginPath();
    ctx.moveTo(x, b.top);
    ctx.lineTo(x, b.top + b.height);
    ctx.stroke();
    if (text !== null) label(u, text, x, stroke, row);
    ctx.restore();
  }

  /** The trigger window's bar along the top, its end (recovery counts from there) and the variant's recovery. */
  function markers(s: ChartScenario, variant: VariantName): (u: uPlot) => void {
    return (u) => {
      const px = Math.max(1, Math.round(devicePixelRatio || 1));
      const trigger = span(u, s.triggerStartS, s.triggerEndS, px);
      if (trigger !== null) {
        u.ctx.save();
        u.ctx.fillStyle = C.triggerEdge;
        u.ctx.fillRect(trigger[0], u.bbox.top, trigger[1] - trigger[0], 4 * px);
        u.ctx.restore();
      }
      vline(u, s.triggerEndS, C.triggerEnd, [5, 4], null);
      const r = s.recoverySeconds[variant];
      if (r !== null) vline(u, s.triggerEndS + r, C.recovered, [], 'healthy');
    };
  }

  /** Where each shipped alert on this gauge first fired for the variant: a solid line, labelled with the alert's name. */
  function alertMarks(s: ChartScenario, metric: ReportMetric['key'], variant: VariantName): (u: uPlot) => void {
    return (u) => {
      for (const a of s.alerts[variant]) if (a.metric === metric) vline(u, a.firstFiredSeconds, C.alert, [], `${a.alert} fired`, 1);
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
      const parts = [`t = ${i} s`, `${m.title.toLowerCase()} ${format(m.unit, p.ys[variant][i])}`];
      for (const l of p.lines[variant]) parts.push(`${l.label} ${format(m.unit, l.values[i])}`);
      el.textContent = parts.join(' · ');
    };
  }

  function chartOptions(s: ChartScenario, m: ReportMetric, variant: VariantName, p: Plan, width: number, readoutEl: HTMLElement): uPlot.Options {
    const unit = m.unit;
    const last = Math.max(p.n - 1, 1);
    // The lines beside the variant's come first, so it is drawn over them where they meet (damper's goodput on the best possible).
    const series: uPlot.Series[] = [{}];
    for (const l of p.lines[variant]) series.push({ label: l.label, stroke: l.stroke, width: l.width ?? 1.5, ...(l.dash ? { dash: l.dash } : {}), points: { show: false } });
    series.push({ label: m.title, stroke: C.series, width: 1.5 });
    const axis = { font: FONT, labelFont: FONT, stroke: C.axis, grid: { stroke: C.grid, width: 1 }, ticks: { stroke: C.grid, width: 1, size: 4 } };
    return {
      width,
      height: HEIGHT,
      cursor: { sync: { key: s.name }, y: false, drag: { x: false, y: false }, points: { size: 6 } },
      select: { show: false, left: 0, top: 0, width: 0, height: 0 },
      scales: {
        x: { time: false, range: () => [0, last] },
        // asinh: logarithmic above 1, linear below, so a zero (an idle origin, a sub-millisecond p99) is still drawn.
        y: m.axis === 'log' ? { distr: 4, asinh: 1, range: () => [0, p.top] } : { range: () => [0, p.top] },
      },
      axes: [
        { ...axis, label: 'simulated time (s)', labelSize: 18, labelGap: 0, size: 30, gap: 4 },
        {
          ...axis,
          label: m.axis === 'log' ? `${unit}, log scale` : unit,
          labelSize: 16,
          labelGap: 0,
          size: 46,
          gap: 4,
          // uPlot's own log ticks include −1 and every 2…9 of each decade: too dense to read.
          ...(m.axis === 'log' ? { splits: () => (unit === 'ratio' ? ratioTicks(p.top) : logTicks(p.top)), filter: (_u: uPlot, splits: number[]) => splits } : {}),
          values: (_u, vals) => axisValues(unit, vals),
        },
      ],
      series,
      legend: { show: false },
      hooks: { drawClear: [shade(s, variant)], draw: [markers(s, variant), alertMarks(s, m.key, variant)], setCursor: [readout(m, p, variant, readoutEl)] },
    };
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

  let pending = false;
  addEventListener('resize', () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      for (const ch of charts) {
        const w = ch.el.clientWidth;
        if (w > 0 && w !== ch.plot.width) ch.plot.setSize({ width: w, height: HEIGHT });
      }
    });
  });
  document.documentElement.dataset.charts = String(charts.length);
})();
