import { type CharacteristicGauge, type CharacteristicSeries, SAMPLE_MS } from './characteristic.js';

/**
 * When a shipped alert rule would have fired on a variant's sampled gauges,
 * evaluated as Prometheus evaluates `expr: gauge > above` with `for: forMs`
 * at each sample: the condition becomes active at the first sample where it
 * holds, the alert fires at the first sample at least `forMs` after that
 * while it still holds at every sample between, and any sample where it does
 * not hold (or the series is absent) resets it. Each series of a gauge (one
 * per instrumented object) is an alert instance of its own, as each label
 * set is in Prometheus.
 */

/** What of a rule the evaluation needs (damper/otel's `CharacteristicAlert` has it). */
export interface AlertRule {
  readonly alert: string;
  readonly metric: string;
  readonly above: number;
  readonly forMs: number;
}

/** A rule's fate over a run: when it first fired (s from the run's start), and whether it was still firing at the last sample. */
export interface AlertState {
  readonly firstFiredSeconds: number | null;
  readonly firingAtEnd: boolean;
}

/** The rule on one series; value `i` is the gauge at `i × stepMs`. */
export function evaluateAlert(rule: Pick<AlertRule, 'above' | 'forMs'>, values: readonly (number | null)[], stepMs = SAMPLE_MS): AlertState {
  let activeAt: number | null = null;
  let firing = false;
  let first: number | null = null;
  for (let i = 0; i < values.length; i++) {
    const t = i * stepMs;
    const v = values[i];
    if (v === null || v === undefined || !(v > rule.above)) {
      activeAt = null;
      firing = false;
      continue;
    }
    activeAt ??= t;
    if (t - activeAt >= rule.forMs) {
      firing = true;
      first ??= t;
    }
  }
  return { firstFiredSeconds: first === null ? null : first / 1000, firingAtEnd: firing };
}

/**
 * Every rule whose gauge the variant has, over all its series: first fired
 * when its earliest instance did, firing at the end when any instance was.
 * A rule whose gauge the variant does not have is left out: it was not
 * measured, which is not the same as quiet.
 */
export function alertStates(rules: readonly AlertRule[], characteristics: CharacteristicSeries): Record<string, AlertState> {
  const states: Record<string, AlertState> = {};
  for (const rule of rules) {
    const series = characteristics[rule.metric as CharacteristicGauge];
    if (series === undefined) continue;
    let first: number | null = null;
    let firingAtEnd = false;
    for (const values of Object.values(series)) {
      const s = evaluateAlert(rule, values);
      if (s.firstFiredSeconds !== null && (first === null || s.firstFiredSeconds < first)) first = s.firstFiredSeconds;
      firingAtEnd ||= s.firingAtEnd;
    }
    states[rule.alert] = { firstFiredSeconds: first, firingAtEnd };
  }
  return states;
}
