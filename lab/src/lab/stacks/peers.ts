import { DamperError } from 'damper';
import { ScenarioError } from '../scenario.js';
import { type Knobs, type PeerName, type PolicyPeer, specName, STACKS, type Stack, type StackSpec } from './stack.js';

/**
 * The peer libraries are the lab's dev dependencies, not the library's nor
 * the lab's own (issue 31: a user who installs damper gets none of them),
 * so a peer's module is loaded when a run asks for it, and its absence is
 * said in a line: which package to install.
 */

/** The npm package each policy peer's module needs, at the versions that run on Node 20 and 24. */
const PACKAGES: Readonly<Record<Exclude<PeerName, 'undici'>, string>> = { cockatiel: 'cockatiel@3', opossum: 'opossum@9' };

/** A peer whose policies wrap a call (cockatiel, opossum), loaded; undici's stack is naive's with its own backoff (undici-stack.ts). */
export async function loadPolicyPeer(name: Exclude<PeerName, 'undici'>): Promise<PolicyPeer> {
  try {
    if (name === 'cockatiel') return (await import('./cockatiel-stack.js')).cockatiel;
    return (await import('./opossum-stack.js')).opossum;
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND') {
      throw new StackError(`the ${name} stack needs the ${PACKAGES[name]} package, a dev dependency of the lab: npm install --no-save ${PACKAGES[name]}`);
    }
    throw error;
  }
}

/** A stack named wrong, a knob it does not have, or a peer library that is not installed: one line, naming what. */
export class StackError extends DamperError {
  constructor(problem: string) {
    super('LAB_STACK', `lab stacks: ${problem}`);
  }
}

/** Each policy peer's knobs and their defaults (none for naive, damper and undici). */
const KNOBS: Readonly<Record<Stack, Knobs>> = { naive: {}, damper: {}, undici: {}, cockatiel: { bulkhead: 0 }, opossum: { capacity: 0 } };

/**
 * `cockatiel`, `cockatiel:bulkhead=24`, `opossum:capacity=32`: a stack and
 * its knobs, each a whole number ≥ 0 (0: the library's own default, none).
 */
export function parseStackSpec(text: string): StackSpec {
  const [name = '', ...pairs] = text.split(':');
  if (!(STACKS as readonly string[]).includes(name)) throw new StackError(`unknown stack "${name}": one of ${STACKS.join(', ')}`);
  const stack = name as Stack;
  const knobs: Record<string, number> = {};
  for (const pair of pairs) {
    const [knob = '', value = ''] = pair.split('=');
    const known = Object.keys(KNOBS[stack]);
    if (!known.includes(knob)) throw new StackError(`${stack} has no knob "${knob}"${known.length === 0 ? '' : `: its knobs are ${known.join(', ')}`}`);
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) throw new StackError(`${stack}:${knob} must be a whole number ≥ 0, got "${value}"`);
    knobs[knob] = n;
  }
  return { stack, knobs };
}

/** Refuses two rows of the same name: a table's rows are told apart by it. */
export function distinctSpecs(specs: readonly StackSpec[]): readonly StackSpec[] {
  const names = specs.map(specName);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice !== undefined) throw new StackError(`the stack ${twice} is given twice`);
  return specs;
}

/** A peer that replaces client tiers needs a scenario with them; said as the scenario's problem. */
export function checkStackApplies(scenarioName: string, spec: StackSpec, hasTiers: boolean): void {
  if (spec.stack === 'naive' || spec.stack === 'damper' || hasTiers) return;
  throw new ScenarioError(scenarioName, [{ field: 'tiers', problem: `the ${spec.stack} stack replaces the client tiers, and this scenario has none (its users call the servers directly)` }]);
}
