import { type Series } from '../judge/results.js';
import { esc } from './html.js';

/**
 * The share of each second's calls served in time, one line per run, on one
 * chart, the trigger shaded: how stacks compare at a glance (issue 31: "the
 * page draws each variant's per-second goodput on one chart"). Drawn by
 * `lab stacks`' page and by the report of `damper lab --stack`. Plain
 * inline SVG, no script: the same runs give the same bytes.
 */

/** One line of the chart: a run's name and its series (undefined: drawn as nothing, named in the legend). */
export interface ServedLine {
  readonly name: string;
  readonly series: Series | undefined;
}

/** naive red and damper blue wherever they stand, so every chart reads alike; the peers in between take the rest in turn. */
const NAIVE = '#c0392b';
const DAMPER = '#2e86c1';
const PEER_COLOURS = ['#8e44ad', '#d68910', '#16a085', '#7f8c8d'];

function colours(lines: readonly ServedLine[]): string[] {
  let peer = 0;
  return lines.map(({ name }) => (name === 'naive' ? NAIVE : name === 'damper' ? DAMPER : PEER_COLOURS[peer++ % PEER_COLOURS.length]!));
}

const WIDTH = 900;
const HEIGHT = 260;
const PAD = { left: 48, right: 12, top: 12, bottom: 28 };

/** Served calls per second as a share of the calls the users sent that second. */
function servedShare(series: Series): (number | null)[] {
  return series.offered.map((sent, i) => (sent === 0 ? null : series.goodput[i]! / sent));
}

/** The run's length and its trigger window, s: what the chart's x axis and shading need (a `ScenarioRun` has them). */
export interface ServedTimeline {
  readonly durationS: number;
  readonly triggerStartS: number;
  readonly triggerEndS: number;
}

/** The chart of `lines` over `timeline`, under a heading `title` of level `heading` (a page's section, or a part of one). */
export function servedChart(timeline: ServedTimeline, title: string, lines: readonly ServedLine[], heading: 'h2' | 'h3' = 'h2'): string {
  const seconds = Math.ceil(timeline.durationS);
  const x = (s: number): number => PAD.left + (s / seconds) * (WIDTH - PAD.left - PAD.right);
  const y = (v: number): number => PAD.top + (1 - v) * (HEIGHT - PAD.top - PAD.bottom);
  const from = x(timeline.triggerStartS);
  const to = x(timeline.triggerEndS);
  const colour = colours(lines);
  const drawn = lines.map(({ name, series }, i) => {
    if (series === undefined) return '';
    const points = servedShare(series).flatMap((v, s) => (v === null ? [] : [`${x(s + 0.5).toFixed(1)},${y(v).toFixed(1)}`]));
    return `<polyline fill="none" stroke="${colour[i]}" stroke-width="1.5" points="${points.join(' ')}"><title>${esc(name)}</title></polyline>`;
  });
  const ticks = [0, 0.5, 1].map((v) => `<text x="${PAD.left - 6}" y="${y(v) + 4}" text-anchor="end">${v * 100}%</text><line x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`);
  const step = seconds > 300 ? 120 : seconds > 60 ? 30 : 10;
  const xTicks = Array.from({ length: Math.floor(seconds / step) + 1 }, (_, k) => `<text x="${x(k * step)}" y="${HEIGHT - 8}" text-anchor="middle">${k * step} s</text>`);
  const legend = lines.map(({ name }, i) => `<span style="color:${colour[i]}">■ ${esc(name)}</span>`).join(' ');
  return `<${heading}>${esc(title)}</${heading}>
<p class="legend">${legend}</p>
<svg viewBox="0 0 ${WIDTH} ${HEIGHT}" width="${WIDTH}" height="${HEIGHT}" role="img" aria-label="${esc(title)}" font-size="11" font-family="sans-serif">
<rect x="${from}" y="${PAD.top}" width="${Math.max(1, to - from)}" height="${HEIGHT - PAD.top - PAD.bottom}" fill="#f6d8d8"><title>trigger</title></rect>
${ticks.join('\n')}
${xTicks.join('\n')}
${drawn.join('\n')}
</svg>`;
}
