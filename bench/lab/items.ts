import { type SweepGrid } from '../../lab/src/lab/sweep/sweep.js';

/** What `npm run bench:lab` times: a scenario run to its horizon (both variants, as `damper lab` runs it), or a sweep. */
export type BenchItem =
  | { readonly name: string; readonly kind: 'scenario'; readonly ref: string; readonly seed: number; readonly config?: string }
  | { readonly name: string; readonly kind: 'sweep'; readonly ref: string; readonly seed: number; readonly grid: SweepGrid };

/** One variant's run: simulated requests (`summary.simulatedRequests`) over its wall time. */
export interface VariantFigures {
  readonly requests: number;
  readonly wallS: number;
  readonly requestsPerS: number;
}

/** What one measurement reports (bench/lab/measure.ts). */
export interface Measured {
  readonly wallS: number;
  /** A scenario's variants. */
  readonly variants?: Readonly<Record<'naive' | 'damper', VariantFigures>>;
  /** A sweep's cells, run one after the other in one thread. */
  readonly cells?: number;
  /** The verdicts, so that a faster run is seen to be the same run. */
  readonly verdicts: string;
  /** A hash of the whole result: the same on every Node for the same build. */
  readonly digest: string;
}

/** The fixed set: every shipped scenario at seed 1, the two examples, the production scenario with the lab's settings and a careless configuration, and a small sweep. */
export const ITEMS: readonly BenchItem[] = [
  { name: 'facebook-2010', kind: 'scenario', ref: 'facebook-2010', seed: 1 },
  { name: 'discord-2019', kind: 'scenario', ref: 'discord-2019', seed: 1 },
  { name: 'missourian-2010', kind: 'scenario', ref: 'missourian-2010', seed: 1 },
  { name: 'retry-storm', kind: 'scenario', ref: 'retry-storm', seed: 1 },
  { name: 'checkout', kind: 'scenario', ref: 'lab/examples/checkout.json', seed: 1 },
  { name: 'profile', kind: 'scenario', ref: 'lab/examples/profile.json', seed: 1 },
  { name: 'production', kind: 'scenario', ref: 'bench/lab/production.json', seed: 1 },
  { name: 'production, careless', kind: 'scenario', ref: 'bench/lab/production.json', seed: 1, config: 'bench/lab/careless.config.mjs' },
  {
    name: 'sweep retry-storm 3×3',
    kind: 'sweep',
    ref: 'retry-storm',
    seed: 1,
    grid: { across: { axis: { kind: 'load' }, from: 0.5, to: 1.5 }, up: { axis: { kind: 'trigger' }, from: 5, to: 55 }, steps: 3 },
  },
];
