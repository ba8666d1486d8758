/**
 * How the lab writes numbers for people (the terminal, the report, the
 * verdicts): one notation per kind, so `1.2×` never stands beside `×1.25`.
 * Nothing here reads the locale: the same run prints the same text.
 */

/** A ratio to a reference, as `1.2×`, and whole from 10 on (`65×`): a tenth of 65 says nothing; `—` without a reference (a zero baseline). */
export function times(x: number): string {
  if (!Number.isFinite(x)) return '—';
  return `${x >= 10 ? x.toFixed(0) : x.toFixed(1)}×`;
}

/** A share in [0, 1] as a percentage: `99.7%`, `100%`, `0%`, and `<0.1%` or `>99.9%` rather than a rounded 0 or 100 that is not. */
export function percent(ratio: number): string {
  if (ratio <= 0) return '0%';
  if (ratio >= 1) return '100%';
  if (ratio < 0.001) return '<0.1%';
  if (ratio > 0.999) return '>99.9%';
  return `${(ratio * 100).toFixed(1)}%`;
}

/** A latency in ms as measured: the engine steps whole ms, so 0 means "within the same millisecond", written `<1`. */
export function millis(ms: number): string {
  return ms < 1 ? '<1' : String(Math.round(ms));
}

/** A setting as someone chose it (a sweep's axis values): up to 3 decimals, no trailing zeros: `0.75`, `60`. */
export function exact(v: number): string {
  return trimmed(num(v, 3));
}

/**
 * A factor someone chose (a sweep's offered load), the way `times` writes a
 * measured one: `0.75×`, `1×`, and at most 2 decimals: a grid's steps give
 * `0.833333`, and a hundredth of the offered load is as fine as anyone reads.
 */
export function factor(x: number): string {
  return `${trimmed(num(x, 2))}×`;
}

/** `0.750` → `0.75`, `60.000` → `60`. */
function trimmed(fixed: string): string {
  return fixed.includes('.') ? fixed.replace(/\.?0+$/, '') : fixed;
}

/** A number with `digits` decimals and thousands grouped (`1,029`), a real minus sign, `—` when not finite. */
export function num(v: number, digits: number): string {
  if (!Number.isFinite(v)) return '—';
  const [int = '', frac] = Math.abs(v).toFixed(digits).split('.');
  const grouped = int.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const sign = v < 0 && Number(int + (frac ?? '')) !== 0 ? '−' : '';
  return `${sign}${grouped}${frac === undefined ? '' : `.${frac}`}`;
}
