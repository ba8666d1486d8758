import { type Recorder } from './metrics.js';
import { triggerEndS } from '../scenario.js';
import { type ScenarioCommon } from '../schema/common.js';

/**
 * Whether a run's verdict is decided while it goes on: what lets a sweep's
 * cell end there instead of at the scenario's horizon (issue 29, part 2).
 *
 * The verdict is the summary's: recovered at the first second after the
 * trigger's end that starts `holdS` healthy seconds in a row, else stuck.
 * Both are decided before the horizon, and nothing later can change them:
 * - recovered, once such a streak has been seen (the summary takes the first);
 * - stuck, once the seconds left could not hold a streak of `holdS` even if
 *   every one of them were healthy (which saves at most `holdS` seconds of a
 *   stuck cell: a rule that guessed more would be a guess).
 * A second is read only once it is settled (over, and every request sent in
 * it or before has ended: a request counts in the second it was sent, see
 * {@link Recorder}), and never before the trigger window is settled, which
 * the judgement reads whole. So a run ended here reports the same recovery
 * second, to the second, as the run to its horizon; its other figures
 * (origin peak, goodput) cover the part that ran.
 */
export class VerdictWatch {
  /** The whole second the trigger ends in: recovery is counted from it. */
  private readonly from: number;
  /** The first whole second after the trigger window. */
  private readonly triggerOverAt: number;
  /** The next whole second to read. */
  private next: number;
  /** Healthy seconds in a row, up to `next`. */
  private streak = 0;

  constructor(
    private readonly recorder: Recorder,
    private readonly scenario: ScenarioCommon,
  ) {
    this.from = Math.floor(triggerEndS(scenario));
    this.triggerOverAt = Math.ceil(triggerEndS(scenario));
    this.next = this.from;
  }

  /**
   * Seconds from the trigger's end to the recovery, once it has been seen;
   * null before (and for good once {@link decided} says stuck). The summary
   * reads it after the whole run, so the rule is written once.
   */
  get recoverySeconds(): number | null {
    const { holdS } = this.scenario.objective;
    return this.streak >= holdS ? this.next - holdS - this.from : null;
  }

  /** True when nothing after the first `overS` whole seconds of the run can change its verdict. */
  decided(overS: number): boolean {
    const settled = this.recorder.settledBefore(overS);
    if (settled < this.triggerOverAt) return false;
    const { holdS } = this.scenario.objective;
    for (; this.next < settled && this.streak < holdS; this.next++) this.streak = this.recorder.healthy(this.scenario.objective, this.next) ? this.streak + 1 : 0;
    if (this.streak >= holdS) return true;
    // The seconds not read yet could not hold the streak even if every one were healthy.
    return this.streak + (this.recorder.seconds - this.next) < holdS;
  }
}
