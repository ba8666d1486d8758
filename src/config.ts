import { ConfigError } from './errors.js';
import { MAX_TIMER_MS } from './time/clock.js';

/**
 * Checks on option values, run once at construction (or once per call for
 * per-call overrides) so a typo becomes a {@link ConfigError} naming the
 * option, instead of a NaN that silently disables expiry or a negative timeout
 * that fires at once.
 */

/** A duration in ms: finite and ≥ 0. Timer-backed durations are also capped to what a timer can hold. */
export function duration(name: string, value: unknown, opts: { timer?: boolean; positive?: boolean } = {}): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || (opts.positive === true && value === 0)) {
    throw new ConfigError(`${name} must be a finite number of milliseconds ${opts.positive === true ? '> 0' : '≥ 0'}, got ${show(value)}`);
  }
  if (opts.timer === true && value > MAX_TIMER_MS) {
    throw new ConfigError(`${name} must be at most ${MAX_TIMER_MS} ms (the longest timer Node can hold), got ${value}`);
  }
  return value;
}

/** An integer ≥ `min`. */
export function integer(name: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new ConfigError(`${name} must be an integer ≥ ${min}, got ${show(value)}`);
  }
  return value;
}

/** A finite number in [lo, hi]. */
export function between(name: string, value: unknown, lo: number, hi: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < lo || value > hi) {
    throw new ConfigError(`${name} must be a number from ${lo} to ${hi}, got ${show(value)}`);
  }
  return value;
}

/** An optional callback: undefined, or a function. */
export function optionalFunction<F>(name: string, value: F | undefined): F | undefined {
  if (value !== undefined && typeof value !== 'function') throw new ConfigError(`${name} must be a function, got ${show(value)}`);
  return value;
}

/** An optional AbortSignal. */
export function optionalSignal(name: string, value: unknown): AbortSignal | undefined {
  if (value !== undefined && !(value instanceof AbortSignal)) throw new ConfigError(`${name} must be an AbortSignal, got ${show(value)}`);
  return value;
}

/** A finite number > 0 (a rate, a weight, a factor without an upper bound). */
export function positive(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) throw new ConfigError(`${name} must be a finite number > 0, got ${show(value)}`);
  return value;
}

/** Checks that a range's two ends are in order: `lo ≤ hi`. */
export function ordered(loName: string, lo: number, hiName: string, hi: number): void {
  if (hi < lo) throw new ConfigError(`${hiName} (${hi}) must be ≥ ${loName} (${lo})`);
}

/** Returns `value` when it is defined, else `fallback`: the one place defaults meet checks. */
export function or<T>(value: T | undefined, fallback: T): T {
  return value === undefined ? fallback : value;
}

function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'object' && v !== null) return Object.prototype.toString.call(v);
  return String(v);
}
