import { type VariantName } from '../judge/results.js';
import { type Backoff } from '../schema/common.js';

/**
 * The stacks the lab can put in one system (issue 31): its own two variants
 * (`naive`, the outage's behaviour; `damper`, the library as a user deploys
 * it), and the peer stacks users run today in place of damper's client side.
 * A peer keeps the rest of the system naive (servers that admit every
 * request, no cache of damper's): only what the peer library replaces
 * changes, so a row of the table answers "would my stack have survived
 * this?" for that library alone. docs/lab.md ("Other stacks") gives every
 * peer setting and the page it comes from.
 */
export const PEERS = ['undici', 'cockatiel', 'opossum'] as const;
export type PeerName = (typeof PEERS)[number];

/** What a run of a system is made with: one of the lab's variants, or a peer stack. */
export type Stack = VariantName | PeerName;

/** Every stack, in a table's order: naive first, damper last. */
export const STACKS: readonly Stack[] = ['naive', ...PEERS, 'damper'];

/** A peer's knob as a command line may set it (`cockatiel:bulkhead=24`): a name and a number. */
export type Knobs = Readonly<Record<string, number>>;

/** A stack and the knobs its peer was given (none for naive and damper): what a table's row names. */
export interface StackSpec {
  readonly stack: Stack;
  readonly knobs: Knobs;
}

/** The system a stack runs in: damper's, or the naive one (a peer replaces only its client side). */
export function systemOf(stack: Stack): VariantName {
  return stack === 'damper' ? 'damper' : 'naive';
}

export function isPeer(stack: Stack): stack is PeerName {
  return (PEERS as readonly string[]).includes(stack);
}

/** A row's name: the stack, and its knobs as given (`cockatiel:bulkhead=24`). */
export function specName(spec: StackSpec): string {
  const knobs = Object.entries(spec.knobs).map(([k, v]) => `${k}=${v}`);
  return [spec.stack, ...knobs].join(':');
}

/**
 * What a peer's tier is told of the system, from the scenario: how many
 * times the tier retries and how it waits (the system's own choice, kept for
 * every stack; a peer with a backoff of its own uses its own), the timeout
 * of each attempt when the scenario gives one, and the knobs the command
 * line set.
 */
export interface TierPlan {
  readonly tier: number;
  readonly retries: number;
  readonly backoff: Backoff;
  readonly attemptTimeoutMs: number | undefined;
  readonly knobs: Knobs;
  /**
   * The fitting's time scale (`--time-scale K`, 1 unfitted): a peer's own
   * durations (a backoff, a breaker's wait) are divided by it, as the
   * scenario's are, so a fitted run is the same system K times faster.
   */
  readonly timeScale: number;
}

/** How a peer's own rejection ended an attempt: its timeout, or a refusal (an open breaker, a full bulkhead). */
export type PeerRejection = 'timeout' | 'refused';

/**
 * A peer library's policies around one client tier's calls, shared by every
 * call the tier makes (one breaker, one bulkhead per tier, as a service
 * that builds its policies once at start-up). `attempt` is one call to the
 * tier below; the policy decides how often and when to make it. Built
 * inside the run it serves: in a simulation the platform's clock and
 * timers are virtual by then (`installVirtualTime`).
 */
export interface PeerPolicy {
  execute<T>(attempt: (signal: AbortSignal) => Promise<T>, signal?: AbortSignal): Promise<T>;
  /** How a rejection of the peer's own ended (undefined: the attempt's own failure, passed on). */
  rejection(error: unknown): PeerRejection | undefined;
  /** Stops the peer's own timers (opossum's rolling window). */
  close(): void;
}

/** One setting of a peer, as the docs and the page give it: its value and where the library documents it. */
export interface PeerSetting {
  readonly name: string;
  readonly value: string;
  readonly source: string;
}

/** A peer stack whose policies wrap a promise-returning call (cockatiel, opossum). */
export interface PolicyPeer {
  readonly name: PeerName;
  settings(plan: TierPlan): readonly PeerSetting[];
  tier(plan: TierPlan): PeerPolicy;
}
