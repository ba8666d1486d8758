import { join } from 'node:path';
import { CHECKED, judgeCheck } from '../lab/sweep/check.js';
import { checkPlan, DEFAULT_SPAN } from '../lab/sweep/check-plan.js';
import { factor } from '../lab/format.js';
import { oneScenario } from './args.js';
import { formatCheck } from './check-summary.js';
import { type Command } from './command.js';
import { costLine, savedClause, GRID_OPTIONS, type GridRun, gridRun, sweepGrid, sweepSource } from './sweep-command.js';

/**
 * `damper lab check SCENARIO`: the scenario's check grid (check-plan.ts),
 * damper variant only, judged against its margins (check.ts). Exit 0: the
 * scenario's point and its margin lie outside the damper variant's
 * vulnerable region; 1: they do not; 2 (thrown, main.ts): bad input.
 */
export const checkCommand: Command = {
  name: 'lab check',
  summary: 'is a scenario’s point clear of damper’s vulnerable region?',
  usage: 'lab check SCENARIO [options]',
  about: `Sweeps the scenario’s check grid, the damper variant only: its "check" section, or by default load and trigger length ${factor(DEFAULT_SPAN.from)} to ${factor(DEFAULT_SPAN.to)} of its own in ${DEFAULT_SPAN.steps} steps. Prints how far the nearest stuck cell lies from the scenario’s own point along each axis, and writes DIR/sweep.html and DIR/sweep.json. Exit 0: neither the point nor the margin its check section asks for is stuck; 1: a stuck cell within the margin; 2: bad input.`,
  operands: [['SCENARIO', 'a shipped scenario (below) or the path to a scenario file']],
  options: [
    ['damper-config', GRID_OPTIONS['damper-config']],
    ['out', GRID_OPTIONS.out],
    ['seed', GRID_OPTIONS.seed],
    ['serial', GRID_OPTIONS.serial],
    ['max-calls', GRID_OPTIONS['max-calls']],
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
  const { result, dir, wall, workers } = await sweepGrid(source, plan.grid, { ...args, operators: false, variants: [CHECKED] });
  const verdict = judgeCheck(result, plan.margins);
  process.stdout.write(`${formatCheck(result, plan, verdict, source.scenario.damper?.config)}\n\n${costLine(result.cells.length, wall, workers)}${savedClause(result)}\nwrote ${join(dir, 'sweep.html')} and ${join(dir, 'sweep.json')}\n`);
  return verdict.safe ? 0 : 1;
}
