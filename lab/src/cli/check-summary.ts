import { type AxisReach, CHECKED, type CheckVerdict } from '../lab/sweep/check.js';
import { type CheckOfPart } from '../lab/sweep/shard.js';
import { type SweepResult } from '../lab/sweep/sweep.js';
import { axisAt, axisTick, axisWord, type SweepAxis } from '../lab/sweep/sweep-axis.js';
import { formatCellTable, formatGrid, formatGridHeading, worseLine } from './terminal.js';

/**
 * `damper lab check`'s one screen: the damper variant's grid in characters,
 * every cell's figures beside naive's (and the lab's own settings'), per axis how far the nearest stuck cells lie from the scenario's own point,
 * the verdict on the margin box, and the one line that says when damper
 * does worse than naive.
 */

function signed(axis: SweepAxis, d: number): string {
  return `${d < 0 ? '−' : '+'}${axisTick(axis, Math.abs(d))}`;
}

/** "load: stuck from 1.5× (+0.5× from its own 1×); none below" */
function reachLine(r: AxisReach): string {
  const { axis } = r;
  const own = axis.scenarioValue;
  const first = axis.values[0]!;
  const last = axis.values[axis.values.length - 1]!;
  const up = r.stuckFrom === null ? `no stuck cell up to ${axisTick(axis, last)}` : r.stuckFrom === own ? 'stuck at its own value' : `stuck from ${axisTick(axis, r.stuckFrom)} (${signed(axis, r.stuckFrom - own)})`;
  const down = r.stuckBelow === null ? `none down to ${axisTick(axis, first)}` : `stuck below at ${axisTick(axis, r.stuckBelow)} (${signed(axis, r.stuckBelow - own)})`;
  const margin = r.margin === 0 ? 'no margin asked' : `margin asked ${signed(axis, r.margin)}`;
  return `  ${axisWord(axis)}: ${up}; ${down}; this scenario: ${axisTick(axis, own)}, ${margin}`;
}

function range(axis: SweepAxis, [from, to]: readonly [number, number]): string {
  return from === to ? axisTick(axis, from) : `${axisTick(axis, from)}..${axisTick(axis, to)}`;
}

/** The whole screen; `checked.config` is the configuration module in use, or undefined for the lab's own settings. */
export function formatCheck(result: SweepResult, checked: CheckOfPart, verdict: CheckVerdict): string {
  const { across, up } = result;
  const { config } = checked;
  const lines = [
    ...formatGridHeading(result, 'lab check'),
    `the ${CHECKED} variant with ${config === undefined ? 'the lab’s own settings' : `the configuration ${config}`}; ${checked.origin === 'declared' ? 'the grid and margins of the scenario’s check section' : 'the default grid (×0.5 to ×2.5 of its own load and trigger), no margin'}`,
    '',
    ...formatGrid(result, CHECKED),
    '',
    ...formatCellTable(result, verdict.worse),
    '',
    `along each axis through this scenario's point (${axisAt(across, across.scenarioValue)}, ${axisAt(up, up.scenarioValue)}):`,
    ...verdict.reach.map(reachLine),
    '',
  ];
  const box = `${axisWord(across)} ${range(across, verdict.box.across)} × ${axisWord(up)} ${range(up, verdict.box.up)}`;
  const stuck = verdict.stuck.map((c) => `${axisTick(across, c.across)} × ${axisTick(up, c.up)}`).join(', ');
  const worse = worseLine(result, verdict.worse);
  if (verdict.stuck.length > 0) lines.push(`NOT SAFE: ${verdict.stuck.length} of the ${verdict.boxCells.length} cells from the scenario's point to its margin (${box}) stuck: ${stuck}`);
  else lines.push(`${worse === undefined ? 'SAFE' : 'NOT SAFE'}: none of the ${verdict.boxCells.length} cells from the scenario's point to its margin (${box}) is stuck${worse === undefined ? '' : ', but the configuration does worse than naive'}`);
  if (worse !== undefined) lines.push(worse);
  return lines.join('\n');
}
