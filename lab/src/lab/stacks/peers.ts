import { DamperError } from 'damper';
import { type ServiceScenario } from '../schema/service.js';
import { ScenarioError } from '../scenario.js';
import { type CachePeer, type CachePeerName, CACHE_PEERS, CLIENT_PEERS, type Knobs, type PeerName, PEERS, type PolicyPeer, type PolicyPeerName, specName, STACKS, type Stack, type StackSpec, TWO_LEVEL_PEERS } from './stack.js';

/**
 * The peer libraries are the lab's dev dependencies, not the library's nor
 * the lab's own (issue 31: a user who installs damper gets none of them),
 * so a peer's module is loaded when a run asks for it, and its absence is
 * said in a line: which package to install.
 */

/** The npm package each peer's module needs, at versions that run on Node 20 and 24. */
const PACKAGES: Readonly<Record<Exclude<PeerName, 'undici'>, string>> = {
  cockatiel: 'cockatiel@3',
  opossum: 'opossum@9',
  'lru-cache': 'lru-cache@11',
  bentocache: 'bentocache@1',
  'cache-manager': 'cache-manager@7 keyv@5 lru-cache@11',
};

/** Loads a peer's module, or says which package it needs. */
async function loaded<T>(name: Exclude<PeerName, 'undici'>, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND') {
      throw new StackError(`the ${name} stack needs ${PACKAGES[name]}, dev dependencies of the lab: npm install --no-save ${PACKAGES[name]}`);
    }
    throw error;
  }
}

/** A peer whose policies wrap a call (cockatiel, opossum), loaded; undici's stack is naive's with its own backoff (undici-stack.ts). */
export function loadPolicyPeer(name: PolicyPeerName): Promise<PolicyPeer> {
  return loaded(name, async () => (name === 'cockatiel' ? (await import('./cockatiel-stack.js')).cockatiel : (await import('./opossum-stack.js')).opossum));
}

/** A peer whose library makes the in-process cache, loaded. */
export function loadCachePeer(name: CachePeerName): Promise<CachePeer> {
  return loaded(name, async () => {
    switch (name) {
      case 'lru-cache':
        return (await import('./lru-cache-stack.js')).lruCache;
      case 'bentocache':
        return (await import('./bentocache-stack.js')).bentocache;
      case 'cache-manager':
        return (await import('./cache-manager-stack.js')).cacheManager;
    }
  });
}

/** A stack named wrong, a knob it does not have, or a peer library that is not installed: one line, naming what. */
export class StackError extends DamperError {
  constructor(problem: string) {
    super('LAB_STACK', problem);
  }
}

/** Each peer's knobs and their defaults (0: the library's own, none); naive, damper and undici have none. */
const KNOBS: Readonly<Record<Stack, Knobs>> = {
  naive: {},
  damper: {},
  undici: {},
  cockatiel: { bulkhead: 0 },
  opossum: { capacity: 0 },
  'lru-cache': {},
  bentocache: { l2breaker: 0, timeout: 0 },
  'cache-manager': {},
};

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

/**
 * The peer stacks `--stack` adds beside naive and damper (`damper lab`,
 * `lab sweep`): each once, and neither of the two, which always run.
 */
export function addedPeers(specs: readonly StackSpec[]): readonly StackSpec[] {
  for (const { stack } of specs) if (stack === 'naive' || stack === 'damper') throw new StackError(`--stack ${stack}: naive and damper always run; --stack adds a peer stack (${PEERS.join(', ')})`);
  return distinctSpecs(specs);
}

/** Why `stack` cannot run in `scenario` (undefined: it can): a peer needs the part of the system it replaces. */
export function stackProblem(scenario: ServiceScenario, stack: Stack): { readonly field: string; readonly problem: string } | undefined {
  if ((CLIENT_PEERS as readonly string[]).includes(stack) && scenario.tiers === undefined) {
    return { field: 'tiers', problem: `the ${stack} stack replaces the client tiers, and this scenario has none (its users call the servers directly)` };
  }
  if ((CACHE_PEERS as readonly string[]).includes(stack)) {
    if (scenario.cache === undefined) return { field: 'cache', problem: `the ${stack} stack replaces the servers' cache, and this scenario has none` };
    if (scenario.cache.nodes !== undefined && !(TWO_LEVEL_PEERS as readonly string[]).includes(stack)) return { field: 'cache.nodes', problem: `the ${stack} stack makes an in-process cache only; a cache on nodes takes a peer with a second level there (${TWO_LEVEL_PEERS.join(', ')})` };
  }
  return undefined;
}

/** A stack that cannot run in the scenario, refused as the scenario's problem. */
export function checkStackApplies(scenario: ServiceScenario, stack: Stack): void {
  const problem = stackProblem(scenario, stack);
  if (problem !== undefined) throw new ScenarioError(scenario.name, [problem]);
}

/** The stacks that can run in `scenario`, in the table's order: `lab stacks`' default. */
export function applicableStacks(scenario: ServiceScenario): readonly StackSpec[] {
  return STACKS.filter((stack) => stackProblem(scenario, stack) === undefined).map((stack) => ({ stack, knobs: {} }));
}
