import { DamperError, VirtualClock } from 'damper';
import { checkPlan } from '../lab/sweep/check-plan.js';
import { damperSettings } from '../lab/damper-config.js';
import { loadScenarioSource } from '../lab/lab.js';
import { damperConfigOf, UsageError } from './args.js';
import { type Command } from './command.js';
import { sweepSource } from './sweep-command.js';

/**
 * `damper lab validate SCENARIO…`: each scenario checked as a run would
 * check it, and not run. A scenario file written for CI (or edited by hand)
 * is then known good or bad in a second, not after the minutes its first
 * run takes: its fields by its world's schema, its `check` section (the
 * grid holds the scenario's point and its margins), and its damper
 * configuration module (it loads, and returns only known roles, each a
 * function; what a role returns is checked when a run calls it, per tier or
 * server, as the world has them).
 */
export const validateCommand: Command = {
  name: 'lab validate',
  summary: 'checks scenario files without running them',
  usage: 'lab validate SCENARIO… [options]',
  about:
    'Checks each scenario as a run would, without running it: every field against its world’s schema, its check section, and its damper configuration module (it loads, and names only known roles). Prints one line per scenario: "valid", with what it holds, or each problem with the field at fault. Exit 0: every one is valid; 2: one is not.',
  operands: [['SCENARIO…', 'a shipped scenario or the path to a scenario file; at least one']],
  options: [['damper-config', 'the damper configuration module to check with each scenario, over its own damper.config']],
  examples: [
    ['damper lab validate my-system.json', 'is my scenario file well formed? exit 0 or 2, in a second'],
    ['damper lab validate my-system.json --damper-config damper.config.mjs', 'the scenario and the configuration module a run would load'],
  ],
  run: (operands, values) => validate(operands, damperConfigOf(values['damper-config']).damperConfig),
};

async function validate(refs: readonly string[], damperConfig: string | undefined): Promise<number> {
  if (refs.length === 0) throw new UsageError('lab validate needs a SCENARIO (a shipped name such as facebook-2010, or a scenario file)');
  let failed = 0;
  for (const ref of refs) {
    try {
      process.stdout.write(`${ref}: ${await validOne(ref, damperConfig)}\n`);
    } catch (error) {
      // A bad file is this command's answer, not its failure: the next one is checked too.
      if (!(error instanceof DamperError)) throw error;
      failed++;
      process.stdout.write(`${ref}: invalid\n${error.message.split('\n').map((line) => `  ${line}`).join('\n')}\n`);
    }
  }
  return failed === 0 ? 0 : 2;
}

/** What a valid scenario holds, in a few words; throws what a run would have thrown. */
async function validOne(ref: string, damperConfig: string | undefined): Promise<string> {
  const source = damperConfig === undefined ? await loadScenarioSource(ref) : await sweepSource(ref, damperConfig);
  const { scenario } = source;
  checkPlan(source);
  const config = scenario.damper?.config;
  // Loads the module and checks its roles' shape, on a clock of its own (no run needs it).
  if (config !== undefined) await damperSettings(scenario, new VirtualClock({ seed: 1 }));
  const count = (n: number, one: string): string => `${n} ${one}${n === 1 ? '' : 's'}`;
  // A hit ratio given in place of an exponent: the exponent the lab found is what the run uses, so it is said.
  const keys = scenario.keys;
  const derived = keys?.hitRatio === undefined ? '' : `, keys: hit ratio ${keys.hitRatio} → Zipf exponent ${keys.exponent}`;
  return `valid (world ${scenario.world}, ${scenario.durationS} s, ${count(scenario.clients.length, 'population')}, ${count(scenario.faults.length, 'fault')}${derived}${config === undefined ? '' : `, damper config ${config}`})`;
}
