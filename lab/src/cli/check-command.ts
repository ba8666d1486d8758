import { join } from 'node:path';
import { CHECKED, judgeCheck } from '../lab/check.js';
import { checkPlan } from '../lab/check-plan.js';
import { formatCheck } from './check-summary.js';
import { costLine, type GridRun, sweepGrid, sweepSource } from './sweep-command.js';

/**
 * `damper lab check SCENARIO`: the scenario's check grid (check-plan.ts),
 * damper variant only, judged against its margins (check.ts). Exit 0: the
 * scenario's point and its margin lie outside the damper variant's
 * vulnerable region; 1: they do not; 2 (thrown, main.ts): bad input.
 */
export async function check(ref: string, args: GridRun): Promise<number> {
  const source = await sweepSource(ref, args.damperConfig);
  // The plan before the run: a margin outside the grid is bad input, found in a second, not after the sweep.
  const plan = checkPlan(source);
  const { result, dir, wall, workers } = await sweepGrid(source, plan.grid, { ...args, operators: false, variants: [CHECKED] });
  const verdict = judgeCheck(result, plan.margins);
  process.stdout.write(`${formatCheck(result, plan, verdict, source.scenario.damper?.config)}\n\n${costLine(result.cells.length, wall, workers)}\nwrote ${join(dir, 'sweep.html')} and ${join(dir, 'sweep.json')}\n`);
  return verdict.safe ? 0 : 1;
}
