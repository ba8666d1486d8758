import { join } from 'node:path';
import { runLab } from '../lab/lab.js';
import { renderReport } from '../lab/report/report.js';
import { columnsOf, resultsJson } from '../lab/judge/results.js';
import { parseStackSpec } from '../lab/stacks/peers.js';
import { type StackSpec } from '../lab/stacks/stack.js';
import { seriesCsv, seriesFile } from '../lab/report/series-csv.js';
import { stopwatch } from './stopwatch.js';
import { damperConfigOf, parseMaxCalls, parseSeed } from './args.js';
import { DEFAULT_MAX_CALLS, maxCallsHelp } from '../lab/run-cost.js';
import { type Command } from './command.js';
import { DEFAULT_OUT, writableDir, writeFiles } from './out-dir.js';
import { formatSummary, progressBar } from './terminal.js';

/** `damper lab [SCENARIO…]`: replays the scenarios, writes report.html and results.json, prints the summary. */
export const labCommand: Command = {
  name: 'lab',
  summary: 'replays incidents in virtual time, naive and damper',
  usage: 'lab [SCENARIO…] [options]',
  about:
    'Replays each scenario twice on the same traffic, in virtual time: naive (the outage’s own behaviour, bugs included) and damper (the same system read through damper’s classes), and judges both: during the trigger against the best any policy could do with the capacity left, after it by the time to recover. Writes DIR/report.html (one self-contained page with charts) and DIR/results.json.',
  operands: [['SCENARIO…', 'a shipped scenario (below) or the path to a scenario file (damper lab schema has its fields); every shipped one when none is given']],
  options: [
    ['seed', 'seeds everything random: arrivals, keys, jitter (default 1); the same scenario and seed give a byte-identical results.json'],
    ['out', 'the folder to write into (default lab-out), made and proven writable before the run'],
    ['json', 'also prints results.json on standard output'],
    ['series', 'also writes each run’s per-second series to DIR/series/SCENARIO.VARIANT.csv'],
    ['damper-config', 'the damper variant’s configuration module, over the scenarios’ own damper.config'],
    ['max-calls', maxCallsHelp('every scenario and variant')],
    ['stack', 'a peer stack to run beside naive and damper, repeatable, with its knobs as in lab stacks (cockatiel:bulkhead=24): in virtual time from the same seed, in each scenario it applies to; its figures join the tables and its calls served per second are drawn beside theirs'],
  ],
  examples: [
    ['damper lab', 'replays every shipped scenario into lab-out/'],
    ['damper lab facebook-2010 --seed 7 --out fb', 'one scenario on another seed, into fb/'],
  ],
  run: (scenarios, values) =>
    lab(scenarios, {
      seed: parseSeed(values.seed),
      out: values.out ?? DEFAULT_OUT,
      json: values.json === true,
      series: values.series === true,
      maxCalls: parseMaxCalls(values['max-calls'], DEFAULT_MAX_CALLS),
      ...damperConfigOf(values['damper-config']),
      stacks: (values.stack ?? []).map(parseStackSpec),
    }),
};

async function lab(scenarios: readonly string[], args: { seed: number; out: string; json: boolean; series: boolean; maxCalls: number; damperConfig?: string; stacks: readonly StackSpec[] }): Promise<number> {
  const dir = await writableDir(args.out);
  const elapsed = stopwatch();
  const bar = progressBar(process.stderr);
  // Wall time per variant run, for the speed column: when each one started and ended.
  const wall = new Map<string, { from: number; to: number }>();
  const run = await runLab(scenarios, {
    seed: args.seed,
    maxCalls: args.maxCalls,
    stacks: args.stacks,
    ...(args.damperConfig === undefined ? {} : { damperConfig: args.damperConfig }),
    onProgress: ({ scenario, variant, fraction }) => {
      const id = `${scenario}/${variant}`;
      const now = elapsed();
      const span = wall.get(id);
      if (span === undefined) wall.set(id, { from: now, to: now });
      else span.to = now;
      bar.update(fraction, `${scenario} · ${variant}`);
    },
  });
  bar.done();
  const results = resultsJson(run);
  const files: Record<string, string> = { 'results.json': results, 'report.html': renderReport(run) };
  if (args.series) for (const s of run.scenarios) for (const { name } of columnsOf(s)) files[seriesFile(s, name)] = seriesCsv(s, name);
  await writeFiles(dir, files);
  const speed = (scenario: string, variant: string, requests: number): number => {
    const span = wall.get(`${scenario}/${variant}`);
    return span === undefined || span.to <= span.from ? 0 : requests / ((span.to - span.from) / 1000);
  };
  if (args.json) process.stdout.write(results);
  else process.stdout.write(`${formatSummary(run, speed)}\n\nwrote ${join(dir, 'report.html')} and ${join(dir, 'results.json')} in ${(elapsed() / 1000).toFixed(1)} s\n`);
  return 0;
}
