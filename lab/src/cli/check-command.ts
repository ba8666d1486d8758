import { join } from 'node:path';
import { judgeCheck } from '../lab/sweep/check.js';
import { checkPlan, DEFAULT_SPAN } from '../lab/sweep/check-plan.js';
import { factor } from '../lab/format.js';
import { LATER_BY_S } from '../lab/sweep/worse.js';
import { oneScenario } from './args.js';
import { formatCheck } from './check-summary.js';
import { type Command } from './command.js';
import { costLine, GRID_OPTIONS, type GridRun, gridRun, partLines, savedClause, sweepGrid, sweepSource } from './sweep-command.js';
import { type CheckOfPart } from '../lab/sweep/shard.js';
import { type SweepResult } from '../lab/sweep/sweep.js';

/**
 * `damper lab check SCENARIO`: the scenario's check grid (check-plan.ts),
 * naive beside damper (and the lab's own settings beside a configuration),
 * judged against its margins and naive (check.ts). Exit 0: the scenario's
 * point and its margin lie outside the damper variant's vulnerable region,
 * and no cell does worse than naive; 1: otherwise; 2 (thrown, main.ts): bad
 * input. With `--shard` it writes its part; `lab merge` judges the whole.
 */
export const checkCommand: Command = {
  name: 'lab check',
  summary: 'is damper clear of its region, and nowhere worse than naive?',
  usage: 'lab check SCENARIO [options]',
  about: `Sweeps the scenario’s check grid: its "check" section, or by default load and trigger length ${factor(DEFAULT_SPAN.from)} to ${factor(DEFAULT_SPAN.to)} of its own in ${DEFAULT_SPAN.steps} steps; every cell runs naive beside damper (and, with a configuration, damper with the lab’s own settings too). Prints damper’s grid, each cell’s recovery and goodput per variant, how far the nearest stuck cell lies from the scenario’s own point along each axis, and one line when damper does worse than naive in any cell (stuck where naive recovers, or recovered more than ${LATER_BY_S} s after it); writes DIR/sweep.html and DIR/sweep.json. Exit 0: neither the point nor the margin its check section asks for is stuck, and no cell is worse than naive; 1: otherwise; 2: bad input.`,
  operands: [['SCENARIO', 'a shipped scenario (below) or the path to a scenario file']],
  options: [
    ['damper-config', GRID_OPTIONS['damper-config']],
    ['out', GRID_OPTIONS.out],
    ['seed', GRID_OPTIONS.seed],
    ['serial', GRID_OPTIONS.serial],
    ['max-calls', GRID_OPTIONS['max-calls']],
    ['max-minutes', GRID_OPTIONS['max-minutes']],
    ['shard', GRID_OPTIONS.shard],
  ],
  examples: [
    ['damper lab check retry-storm', 'the default grid around retry-storm’s own point, with the lab’s own settings'],
    ['damper lab check examples/lab/checkout.json --damper-config examples/lab/checkout.config.mjs', 'your own system with your configuration: the exit code gates CI'],
  ],
  run: (operands, values) => check(oneScenario('lab check', operands), gridRun(values)),
};

async function check(ref: string, args: GridRun): Promise<number> {
  const source = await sweepSource(ref, args.damperConfig);
  // The plan before the run: a margin outside the grid is bad input, found in a second, not after the sweep.
  const plan = checkPlan(source);
  const config = source.scenario.damper?.config;
  const checked: CheckOfPart = { margins: plan.margins, origin: plan.origin, ...(config === undefined ? {} : { config }) };
  const outcome = await sweepGrid(source, plan.grid, { ...args, operators: false, check: checked });
  if (outcome.kind === 'part') {
    process.stdout.write(`${partLines(outcome)}\n`);
    return 0;
  }
  return reportCheck(outcome.result, checked, `${costLine(outcome.result.cells.length, outcome.wall, outcome.workers, outcome.estimateS)}${savedClause(outcome.result)}\nwrote ${join(outcome.dir, 'sweep.html')} and ${join(outcome.dir, 'sweep.json')}`);
}

/** Judges a check's sweep (a run's or a merge's), prints its screen and `footer`, and returns the exit code: 0 safe, 1 not. */
export function reportCheck(result: SweepResult, checked: CheckOfPart, footer: string): number {
  const verdict = judgeCheck(result, checked.margins);
  process.stdout.write(`${formatCheck(result, checked, verdict)}\n\n${footer}\n`);
  return verdict.safe ? 0 : 1;
}
