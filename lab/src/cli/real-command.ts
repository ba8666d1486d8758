import { join } from 'node:path';
import { loadScenarioSource, scenarioRun } from '../lab/lab.js';
import { resultsJson } from '../lab/judge/results.js';
import { renderReport } from '../lab/report/report.js';
import { withDamperConfig } from '../lab/damper-config.js';
import { fitRoundings, fitScenario } from '../lab/real/fit.js';
import { DEFAULT_REAL_RUNS, hostNotes, runFidelity } from '../lab/real/fidelity-run.js';
import { checkRealPlan } from '../lab/real/real-plan.js';
import { type Fidelity } from '../lab/real/real-run.js';
import { fidelityJson } from '../lab/judge/fidelity.js';
import { fidelityLines } from '../lab/judge/fidelity-words.js';
import { renderFidelity } from '../lab/report/fidelity-page.js';
import { damperConfigOf, oneScenario, parseDuration, parseFactor, parseRuns, parseSeed } from './args.js';
import { type Command } from './command.js';
import { DEFAULT_OUT, writableDir, writeFiles } from './out-dir.js';
import { stopwatch } from './stopwatch.js';

/**
 * `damper lab real SCENARIO`: the scenario on real processes on loopback
 * (its users, client tiers and servers as node:http and undici processes,
 * damper's variant through damper/http), fitted to the machine, beside its
 * simulation of the same fitted scenario; writes the fidelity page.
 */
export const realCommand: Command = {
  name: 'lab real',
  summary: 'runs a scenario on real processes beside its simulation',
  usage: 'lab real SCENARIO [options]',
  about:
    'Runs the scenario on real processes on this machine, loopback only (a load generator, node:http client tiers and servers; naive through undici’s retry interceptor, damper through damper/http), and in the simulation, both fitted to the machine the same way, and compares them: verdict, goodput during the trigger, recovery, origin amplification, per second and as a table. Every process it starts is stopped when it ends, fails or is interrupted. Writes DIR/fidelity.html and DIR/fidelity.json, and DIR/simulated/ and DIR/real-N/ (each a results.json and report.html as damper lab writes them).',
  operands: [['SCENARIO', 'a shipped scenario or the path to a scenario file (the parts the real runner builds: docs/lab.md, "Real runs")']],
  options: [
    ['scale', 'rates × S, and worker counts, queues and capacities with them, so utilisation is kept; a count that lands within 1 % of a whole number is rounded, and said (default 1)'],
    ['time-scale', 'every duration ÷ K and every rate × K (default 1)'],
    ['duration', 'cut the horizon to this many seconds (after --time-scale); a real run is at most 180 s'],
    ['runs', `real runs per variant, the spread shown (default ${DEFAULT_REAL_RUNS})`],
    ['seed', 'the simulation’s seed and the real load generator’s (default 1)'],
    ['damper-config', 'the damper variant’s configuration module, over the scenario’s own damper.config'],
    ['out', 'the folder to write into (default lab-out)'],
    ['json', 'also prints fidelity.json on standard output'],
  ],
  examples: [
    ['damper lab real retry-storm --scale 0.25 --time-scale 2 --duration 150', 'the retry storm at a quarter of its size, twice as fast, 150 s: three real runs per variant beside the simulation'],
    ['damper lab real mine.json --runs 1 --out real-out', 'your own system, one real run per variant'],
  ],
  run: async (operands, values) =>
    real(oneScenario('lab real', operands), {
      scale: parseFactor('--scale', values.scale, 1),
      timeScale: parseFactor('--time-scale', values['time-scale'], 1),
      durationS: parseDuration(values.duration),
      runs: parseRuns(values.runs, DEFAULT_REAL_RUNS),
      seed: parseSeed(values.seed),
      out: values.out ?? DEFAULT_OUT,
      json: values.json === true,
      ...damperConfigOf(values['damper-config']),
    }),
};

interface RealArgs {
  readonly scale: number;
  readonly timeScale: number;
  readonly durationS: number | undefined;
  readonly runs: number;
  readonly seed: number;
  readonly out: string;
  readonly json: boolean;
  readonly damperConfig?: string;
}

async function real(ref: string, args: RealArgs): Promise<number> {
  const source = await loadScenarioSource(ref);
  const own = args.damperConfig === undefined ? source.scenario : withDamperConfig(source.scenario, args.damperConfig);
  const factors = { scale: args.scale, timeScale: args.timeScale };
  // Fitted and checked before anything starts: a scenario that cannot be run for real is refused in a line, in a second.
  const scenario = fitScenario(own, { ...factors, ...(args.durationS === undefined ? {} : { durationS: args.durationS }) });
  const fitting = { ...factors, rounded: fitRoundings(own, factors) };
  checkRealPlan(scenario);
  const dir = await writableDir(args.out);
  const elapsed = stopwatch();
  const fidelity = await runFidelity(scenario, fitting, {
    seed: args.seed,
    runs: args.runs,
    onProgress: ({ variant, run, second, of }) => process.stderr.write(`\r  real run ${run} of ${args.runs} · ${variant} · ${second} of ${of} s   `),
  });
  process.stderr.write('\r\x1b[2K');
  const json = fidelityJson(fidelity);
  const notes = hostNotes(fidelity);
  await writeFiles(dir, { 'fidelity.json': json, 'fidelity.html': renderFidelity(fidelity, notes), ...runFiles(fidelity) });
  const warnings = Object.entries(notes).flatMap(([variant, lines]) => lines.map((line) => `${variant}, ${line}`));
  if (args.json) process.stdout.write(json);
  else process.stdout.write(`${[...fidelityLines(fidelity), ...(warnings.length === 0 ? [] : ['', 'The host itself:', ...warnings.map((w) => `  ${w}`)])].join('\n')}\n\nwrote ${join(dir, 'fidelity.html')} and ${join(dir, 'fidelity.json')} in ${(elapsed() / 1000).toFixed(0)} s\n`);
  return 0;
}

/** The simulation's and each real run's results.json and report.html, as `damper lab` writes them. */
function runFiles(f: Fidelity): Record<string, string> {
  const files: Record<string, string> = {};
  const naive = f.variants.naive!;
  const damper = f.variants.damper!;
  const write = (folder: string, variants: Parameters<typeof scenarioRun>[1]): void => {
    const run = { seed: f.seed, scenarios: [scenarioRun(f.scenario, variants)] };
    files[join(folder, 'results.json')] = resultsJson(run);
    files[join(folder, 'report.html')] = renderReport(run);
  };
  write('simulated', { naive: naive.simulated, damper: damper.simulated });
  naive.real.forEach((run, i) => write(`real-${i + 1}`, { naive: run, damper: damper.real[i]! }));
  return files;
}
