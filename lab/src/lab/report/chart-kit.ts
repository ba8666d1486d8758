/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/// <reference types="uplot" />

/**
 * What the lab's pages draw their uPlot charts with, browser side: numbers
 * written as src/lab/format.ts writes them, a y range and its ticks (linear,
 * or log on asinh), the trigger window's tint and bar, operator actions
 * hatched, labelled vertical lines, and charts that keep their container's
 * width. report.html's script (report-page.ts) and the fidelity page's
 * (fidelity-charts.ts) both draw with it, so the two pages read alike.
 *
 * A script like them (no import or export), inlined after uPlot and before
 * them: its one global is `labCharts`, the object it returns. Colours come
 * from the page's CSS custom properties, so each page keeps its palette in
 * its stylesheet.
 */
/* exported labCharts */
const labCharts = (function chartKit() {
  type Unit = import('./report.js').ChartUnit;
  type FaultSpan = import('../judge/results.js').FaultSpan;
  type Values = (number | null)[];

  const HEIGHT = 210;
  const FONT = '11px system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", sans-serif';
  const LABEL_FONT = '600 11px system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", sans-serif';
  const css = getComputedStyle(document.documentElement);
  const color = (name: string): string => css.getPropertyValue(name).trim();
  /** The colours every lab page defines. */
  const C = {
    trigger: color('--trigger'),
    triggerEdge: color('--trigger-edge'),
    operatorEdge: color('--operator-edge'),
    recovered: color('--recovered'),
    triggerEnd: color('--trigger-end'),
    reference: color('--reference'),
    axis: '#59636e',
    grid: '#eaeef2',
  };

  /** The page's JSON data island, parsed. */
  function island<T>(id: string): T {
    const el = document.getElementById(id);
    if (el === null) throw new Error(`lab page: no #${id} island`);
    return JSON.parse(el.textContent ?? '') as T;
  }

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
  function format(unit: Unit, v: number | null | undefined): string {
    if (v === null || v === undefined || !Number.isFinite(v)) return '–';
    if (unit === '%') return percent(v);
    if (unit === 'ratio') return trim(v.toFixed(3));
    // format.ts's `millis`: the engine steps whole ms, so 0 is "within the same millisecond".
    if (unit === 'ms') return v < 1 ? '<1 ms' : `${grouped(v)} ms`;
    if (unit === 'cores' && v === 1) return '1 core';
    return `${compact(v)} ${unit}`;
  }
  /** Tick labels; on a log axis uPlot hands over the ticks it filtered out as null (typed number). */
  function axisValues(unit: Unit, vals: readonly (number | null)[]): string[] {
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

  // ---- the y range

  /** `xs` cut or padded with nulls to `n` values: every line of a chart as long as its x. */
  function fit(xs: readonly (number | null)[], n: number): Values {
    const out = xs.slice(0, n);
    while (out.length < n) out.push(null);
    return out;
  }

  function maxOf(xs: readonly (number | null)[]): number {
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

  /** The top of a y axis over `max`, the highest value drawn: 100 % for a share, else a round number with room above the line (more on a log axis). */
  function topOf(unit: Unit, axis: 'linear' | 'log', max: number): number {
    const top = unit === '%' ? 1 : niceCeil(max * (axis === 'log' ? 1.3 : 1.08));
    return top > 0 ? top : 1;
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

  /**
   * What every lab chart shares: its size, a cursor synced across the charts
   * of `sync`, x from 0 to `lastS` s, y from 0 to `top` (on asinh when `axis`
   * is log: logarithmic above 1, linear below, so a zero is still drawn), and
   * axes labelled in `unit`. The caller adds its series, hooks and legend.
   */
  function frame(o: { sync: string; width: number; unit: Unit; axis: 'linear' | 'log'; top: number; lastS: number; xLabel: string }): uPlot.Options {
    const { unit, axis: scale, top } = o;
    const axis = { font: FONT, labelFont: FONT, stroke: C.axis, grid: { stroke: C.grid, width: 1 }, ticks: { stroke: C.grid, width: 1, size: 4 } };
    return {
      width: o.width,
      height: HEIGHT,
      cursor: { sync: { key: o.sync }, y: false, drag: { x: false, y: false }, points: { size: 6 } },
      select: { show: false, left: 0, top: 0, width: 0, height: 0 },
      scales: {
        x: { time: false, range: () => [0, Math.max(o.lastS, 1)] },
        y: scale === 'log' ? { distr: 4, asinh: 1, range: () => [0, top] } : { range: () => [0, top] },
      },
      axes: [
        { ...axis, label: o.xLabel, labelSize: 18, labelGap: 0, size: 30, gap: 4 },
        {
          ...axis,
          label: scale === 'log' ? `${unit}, log scale` : unit,
          labelSize: 16,
          labelGap: 0,
          size: 46,
          gap: 4,
          // uPlot's own log ticks include −1 and every 2…9 of each decade: too dense to read.
          ...(scale === 'log' ? { splits: () => (unit === 'ratio' ? ratioTicks(top) : logTicks(top)), filter: (_u: uPlot, splits: number[]) => splits } : {}),
          values: (_u, vals) => axisValues(unit, vals),
        },
      ],
      series: [{}],
      legend: { show: false },
    };
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

  /** The timeline under a chart's lines: the trigger window tinted, and each operator action that `happened` (by its index in `faults`) hatched. */
  function shade(t: { triggerStartS: number; triggerEndS: number; faults: readonly FaultSpan[] }, happened: (fault: number) => boolean): (u: uPlot) => void {
    return (u) => {
      const ctx = u.ctx;
      const b = u.bbox;
      const px = Math.max(1, Math.round(devicePixelRatio || 1));
      ctx.save();
      const trigger = span(u, t.triggerStartS, t.triggerEndS, px);
      if (trigger !== null) {
        ctx.fillStyle = C.trigger;
        ctx.fillRect(trigger[0], b.top, trigger[1] - trigger[0], b.height);
      }
      const pattern = hatch(ctx, px);
      t.faults.forEach((f, i) => {
        if (f.kind !== 'operator' || !happened(i)) return;
        const x = span(u, f.startS, f.endS, px);
        if (x === null) return;
        ctx.fillStyle = x[1] - x[0] <= 3 * px ? C.operatorEdge : pattern;
        ctx.fillRect(x[0], b.top, x[1] - x[0], b.height);
      });
      ctx.restore();
    };
  }

  /** The trigger window's bar along the top of the plot, and a dashed line at its end: recovery counts from there. */
  function triggerMarks(u: uPlot, t: { triggerStartS: number; triggerEndS: number }): void {
    const px = Math.max(1, Math.round(devicePixelRatio || 1));
    const trigger = span(u, t.triggerStartS, t.triggerEndS, px);
    if (trigger !== null) {
      u.ctx.save();
      u.ctx.fillStyle = C.triggerEdge;
      u.ctx.fillRect(trigger[0], u.bbox.top, trigger[1] - trigger[0], 4 * px);
      u.ctx.restore();
    }
    vline(u, t.triggerEndS, C.triggerEnd, [5, 4], null);
  }

  /** A line's label at the top of the plot; `row` 1 and on sit below it, so one label does not cover another. */
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

  /** A vertical line at `at` s across the plot, labelled at the top (in label row `row`) unless `text` is null. */
  function vline(u: uPlot, at: number, stroke: string, dash: number[], text: string | null, row = 0, width = 1.5): void {
    const ctx = u.ctx;
    const b = u.bbox;
    const px = devicePixelRatio || 1;
    const x = Math.round(u.valToPos(at, 'x', true)) + 0.5;
    if (!(x >= b.left && x <= b.left + b.width)) return;
    ctx.save();
    ctx.strokeStyle = stroke;
    ctx.lineWidth = width * px;
    ctx.setLineDash(dash.map((d) => d * px));
    ctx.beginPath();
    ctx.moveTo(x, b.top);
    ctx.lineTo(x, b.top + b.height);
    ctx.stroke();
    if (text !== null) label(u, text, x, stroke, row);
    ctx.restore();
  }

  /** Redraws the charts at their containers' widths when the window is resized, once a frame at most. */
  function keepWidths(charts: readonly { el: HTMLElement; plot: uPlot }[]): void {
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
  }

  return { C, color, island, format, fit, maxOf, topOf, frame, shade, triggerMarks, vline, keepWidths };
})();
