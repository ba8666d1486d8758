import { type AlertState } from './alerts.js';
import { num } from '../format.js';
import { type ScenarioRun, VARIANTS, type VariantName } from './results.js';

/**
 * The sentence under a scenario's characteristic metrics: per variant, which
 * shipped alerts fired, when, and how long after the trigger began; "no
 * alert fired" for a variant whose gauges stayed quiet, and "no
 * characteristic metric recorded" for one that has none (which is not
 * quiet). Seconds are whole: the gauges are sampled once a second.
 */
export function alertSentence(s: ScenarioRun): string {
  return `${VARIANTS.map((v) => `${v}: ${variantWords(s, v)}`).join('; ')}.`;
}

function variantWords(s: ScenarioRun, variant: VariantName): string {
  const run = s.variants[variant];
  if (Object.keys(run.characteristics).length === 0) return 'no characteristic metric recorded';
  const fired = Object.entries(run.summary.alerts)
    .filter((e): e is [string, AlertState & { firstFiredSeconds: number }] => e[1].firstFiredSeconds !== null)
    .sort((a, b) => a[1].firstFiredSeconds - b[1].firstFiredSeconds || (a[0] < b[0] ? -1 : 1));
  if (fired.length === 0) return 'no alert fired';
  return fired.map(([name, state]) => `${name} fired at ${num(state.firstFiredSeconds, 0)} s, ${relative(state.firstFiredSeconds - s.triggerStartS)}${state.firingAtEnd ? ' (still firing at the end)' : ''}`).join(', ');
}

/** "8 s after the trigger began", "as the trigger began", "3 s before the trigger began". */
function relative(d: number): string {
  if (d === 0) return 'as the trigger began';
  return `${num(Math.abs(d), 0)} s ${d > 0 ? 'after' : 'before'} the trigger began`;
}
