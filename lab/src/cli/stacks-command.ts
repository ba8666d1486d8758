import { join } from 'node:path';
import { loadScenarioSource } from '../lab/lab.js';
import { fitRoundings, fitScenario } from '../lab/real/fit.js';
import { DEFAULT_REAL_RUNS } from '../lab/real/fidelity-run.js';
import { checkRealPlan } from '../lab/real/real-plan.js';
import { renderStacks } from '../lab/report/stacks-page.js';
import { applicableStacks, distinctSpecs, parseStackSpec } from '../lab/stacks/peers.js';
import { STACKS, type StackSpec } from '../lab/stacks/stack.js';
import { runStacks, stacksJson } from '../lab/stacks/stacks-run.js';
import { hostLines, realTable, settingLines, simulatedTable } from '../lab/stacks/stacks-table.js';
import { oneScenario, parseDuration, parseFactor, parseRuns, parseSeed, UsageError } from './args.js';
import { type Command } from './command.js';
import { DEFAULT_OUT, writableDir, writeFiles } from './out-dir.js';
import { stopwatch } from './stopwatch.js';

/**
 * `damper lab stacks SCENARIO`: the same outage under naive, the stacks
 * users run today (undici's retry interceptor, cockatiel, opossum) and
 * damper, side by side (issue 31): simulated, and with `--real` on real
 * processes too, fitted as `lab real` fits.
 */
export const stacksCommand: Command = {
  name: 'lab stacks',
  summary: 'runs a scenario under naive, the peer stacks and damper',
  usage: 'lab stacks SCENARIO [options]',
  about: `Runs the scenario under each stack that applies to it: naive; in place of its client tiers undici (its retry interceptor's own backoff), cockatiel (retry, breaker, timeout, bulkhead) and opossum (breaker, timeout); in place of its servers' cache lru-cache (fetch, stale on rejection), bentocache (grace period; on a ring of cache nodes its memory in front of them, a bus and its L2 circuit breaker) and cache-manager (wrap; on a ring, its memory layer in front of Keyv over the nodes); and damper. Each peer is set up as its documentation recommends, the rest of the system naive's. Peers run in the simulation's virtual time, reproducibly from the seed; with --real, each also runs on real processes, fitted to the machine (--scale, --time-scale, --duration as lab real), the stacks taking turns. Prints one table per way, and writes DIR/stacks.html (every stack's goodput per second on one chart, the tables, each peer setting with its source) and DIR/stacks.json. The peers are the lab's dev dependencies.`,
  operands: [['SCENARIO', 'a shipped scenario or a scenario file (a client peer needs client tiers, a cache peer a cache in the servers’ memory)']],
  options: [
    ['stack', `a stack to run, repeatable, in the table's order (default: every one of ${STACKS.join(', ')} that applies); a peer's knob after a colon: cockatiel:bulkhead=N, opossum:capacity=N, bentocache:l2breaker=MS (0: off), bentocache:timeout=MS (its soft timeout)`],
    ['real', 'also run each stack on real processes on loopback'],
    ['runs', `real runs per stack (default ${DEFAULT_REAL_RUNS}; with --real)`],
    ['scale', 'as lab real (with --real)'],
    ['time-scale', 'as lab real (with --real): a peer’s own durations are divided by it too'],
    ['duration', 'as lab real (with --real)'],
    ['seed', 'the simulation’s seed and the real load generator’s (default 1)'],
    ['out', 'the folder to write into (default lab-out)'],
    ['json', 'also prints stacks.json on standard output'],
  ],
  examples: [
    ['damper lab stacks retry-storm', 'the retry storm under every stack, simulated'],
    ['damper lab stacks retry-storm --stack naive --stack cockatiel:bulkhead=32 --stack damper --real --scale 0.25 --time-scale 2 --duration 150', 'three stacks, each simulated and run three times for real'],
  ],
  run: async (operands, values) => {
    const real = values.real === true;
    if (!real) for (const option of ['runs', 'scale', 'time-scale', 'duration'] as const) if (values[option] !== undefined) throw new UsageError(`--${option} is for real runs: add --real`);
    return stacks(oneScenario('lab stacks', operands), {
      specs: values.stack === undefined ? undefined : distinctSpecs(values.stack.map(parseStackSpec)),
      real: real
        ? { scale: parseFactor('--scale', values.scale, 1), timeScale: parseFactor('--time-scale', values['time-scale'], 1), durationS: parseDuration(values.duration), runs: parseRuns(values.runs, DEFAULT_REAL_RUNS) }
        : undefined,
      seed: parseSeed(values.seed),
      out: values.out ?? DEFAULT_OUT,
      json: values.json === true,
    });
  },
};

interface StacksArgs {
  /** As given; undefined: every stack that applies to the scenario. */
  readonly specs: readonly StackSpec[] | undefined;
  readonly real: { readonly scale: number; readonly timeScale: number; readonly durationS: number | undefined; readonly runs: number } | undefined;
  readonly seed: number;
  readonly out: string;
  readonly json: boolean;
}

async function stacks(ref: string, args: StacksArgs): Promise<number> {
  const source = await loadScenarioSource(ref);
  const factors = args.real === undefined ? undefined : { scale: args.real.scale, timeScale: args.real.timeScale };
  // Fitted and checked before anything runs, as lab real does.
  const scenario = factors === undefined ? source.scenario : fitScenario(source.scenario, { ...factors, ...(args.real?.durationS === undefined ? {} : { durationS: args.real.durationS }) });
  if (factors !== undefined) checkRealPlan(scenario);
  const dir = await writableDir(args.out);
  const elapsed = stopwatch();
  const run = await runStacks(scenario, {
    seed: args.seed,
    specs: args.specs ?? applicableStacks(scenario),
    ...(args.real === undefined || factors === undefined ? {} : { real: { runs: args.real.runs, fitting: { ...factors, rounded: fitRoundings(source.scenario, factors) } } }),
    onProgress: ({ stack, run: n, second, of }) => process.stderr.write(`\r  ${n === 0 ? 'simulating' : `real run ${n}`} · ${stack}${second === undefined ? '' : ` · ${second} of ${of} s`}   `),
  });
  process.stderr.write('\r\x1b[2K');
  const json = stacksJson(run);
  await writeFiles(dir, { 'stacks.json': json, 'stacks.html': renderStacks(run) });
  if (args.json) process.stdout.write(json);
  else {
    const real = realTable(run);
    const host = hostLines(run);
    const lines = [
      `${scenario.name}, seed ${args.seed}: simulated`,
      ...simulatedTable(run),
      ...(real.length === 0 ? [] : ['', 'real: median [lowest–highest]', ...real]),
      ...(host.length === 0 ? [] : ['', 'The host itself:', ...host.map((h) => `  ${h}`)]),
      '',
      ...settingLines(run),
    ];
    process.stdout.write(`${lines.join('\n')}\n\nwrote ${join(dir, 'stacks.html')} and ${join(dir, 'stacks.json')} in ${(elapsed() / 1000).toFixed(0)} s\n`);
  }
  return 0;
}
