import { type SlotCost } from './database-calibration.js';
import { type Scenario } from '../world/worlds.js';
import { type JudgedRun, type VariantName } from '../judge/results.js';

/**
 * What `damper lab real` produces (issue 30): a scenario run on real
 * processes on loopback, judged by the same rules as its simulation, with
 * the host's own load beside it, so a reader can tell the modelled
 * capacity's limits from the machine's.
 */

/** One process of a real run and what it took of the host, one sample per second of the run (index i covers [i s, i+1 s)). */
export interface HostSeries {
  /** The process's role, unique in the run: `users`, `tier1`, `server0`, `redis0`, `postgres`… */
  readonly name: string;
  /** CPU it used in that second (user + system), in cores: 1 is one whole core. */
  readonly cpu: readonly number[];
  /** Its event loop's delay in that second, p99, ms (null: not a Node process, or no sample). */
  readonly lagP99Ms: readonly (number | null)[];
  /** Its event loop's longest delay in that second, ms (null as above). */
  readonly lagMaxMs: readonly (number | null)[];
}

/** One real run of one variant: judged as a simulated run is, with the host's series beside it. */
export interface RealRun extends JudgedRun {
  readonly host: readonly HostSeries[];
  /** With a database: what a query was measured to hold its slot beyond its sleep, taken off the sleep (database-calibration.ts). */
  readonly database?: SlotCost;
}

/** How the scenario was fitted to the machine (the simulation runs the same fitted scenario). */
export interface Fitting {
  /** Rates × this, and worker counts and capacities with them (utilisation kept). */
  readonly scale: number;
  /** Every duration ÷ this, and rates × this. */
  readonly timeScale: number;
  /** The whole numbers the fitting rounded to keep them whole (fit.ts, `MAX_ROUNDING`), when it rounded any. */
  readonly rounded?: readonly FitRounding[];
}

/** A whole number of the scenario that the fitting rounded: `fitted` is what scale and time-scale made of `value`, `rounded` what the fitted scenario holds. */
export interface FitRounding {
  readonly field: string;
  readonly value: number;
  readonly fitted: number;
  readonly rounded: number;
}

/** One variant both ways: its simulation at the seed, and its real runs (three by default: the machine is noisy). */
export interface FidelityVariant {
  readonly simulated: JudgedRun;
  readonly real: readonly RealRun[];
}

/** A scenario run both ways: what the fidelity page and `fidelity.json` are made of. */
export interface Fidelity {
  /** The scenario as run (fitted: scaled and time-scaled), both ways. */
  readonly scenario: Scenario;
  readonly fitting: Fitting;
  readonly seed: number;
  /** The host's cores, for reading the host series. */
  readonly cores: number;
  readonly variants: Partial<Record<VariantName, FidelityVariant>>;
}
