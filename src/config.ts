import { ConfigError, describe } from './errors.js';
import { type Clock, MAX_TIMER_MS } from './time/clock.js';
import { systemClock } from './time/system.js';

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

/**
 * An options argument, read once: `undefined` (every default) or an object,
 * copied so that a later change to the caller's object changes nothing here.
 * `null`, a number or an array is a slip that would otherwise surface as a
 * TypeError far from its cause, and `backoff: 5` would silently mean "the
 * defaults". An object whose properties cannot be read (a revoked Proxy, a
 * getter that throws) is refused here too, so a constructor only ever throws
 * a {@link ConfigError}.
 */
export function optionsObject<T extends object>(name: string, value: T | null | undefined): Partial<T> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null) throw new ConfigError(`${name} must be an object, got ${show(value)}`);
  let copy: Partial<T>;
  try {
    if (Array.isArray(value)) throw new ConfigError(`${name} must be an object, got an array`);
    copy = { ...value };
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    throw new ConfigError(`${name} cannot be read: ${describe(error)}`);
  }
  return copy;
}

/**
 * The `clock` option: the system clock by default, else an object with the
 * three functions of a {@link Clock}. Checked at construction: a `clock: {}`
 * used to fail at its first timer, as an unhandled rejection that ended the
 * process.
 */
export function clockOption(name: string, value: unknown): Clock {
  if (value === undefined) return systemClock;
  if (!hasMethods(value, ['now', 'setTimer', 'random'])) throw new ConfigError(`${name} must be a Clock (an object with now, setTimer and random functions), got ${show(value)}`);
  return value as Clock;
}

/** Whether `value` is an object with a function under each name; false (not a TypeError) for one that cannot be read. */
export function hasMethods(value: unknown, names: readonly string[]): boolean {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false;
  try {
    return names.every((n) => typeof (value as Record<string, unknown>)[n] === 'function');
  } catch {
    return false;
  }
}

/** `value instanceof type`, false (not a TypeError) for a value whose prototype cannot be read. */
export function isInstance<C>(value: unknown, type: abstract new (...args: never[]) => C): value is C {
  try {
    return value instanceof type;
  } catch {
    return false;
  }
}

/** A list, copied: an array, or a {@link ConfigError} (not a TypeError) for anything else, a revoked Proxy included. */
export function arrayOption<T>(name: string, value: readonly T[] | undefined, what: string): T[] {
  try {
    if (Array.isArray(value)) return value.slice();
  } catch {
    // a revoked Proxy: Array.isArray itself throws
  }
  throw new ConfigError(`${name} must be ${what}, got ${show(value)}`);
}

/** One of a few words (an order, a mode). */
export function oneOf<W extends string>(name: string, value: unknown, words: readonly W[]): W {
  if (!words.includes(value as W)) throw new ConfigError(`${name} must be ${words.map((w) => `"${w}"`).join(' or ')}, got ${show(value)}`);
  return value as W;
}

/** A boolean, spelled as one (`"false"` is a string, and truthy). */
export function boolean(name: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new ConfigError(`${name} must be a boolean, got ${show(value)}`);
  return value;
}

function show(v: unknown): string {
  if (typeof v === 'string') return v.length > 80 ? `${JSON.stringify(v.slice(0, 80))}… (${v.length} characters)` : JSON.stringify(v);
  if (typeof v === 'function') return 'a function';
  if (typeof v === 'object' && v !== null) {
    try {
      return Array.isArray(v) ? 'an array' : Object.prototype.toString.call(v);
    } catch {
      return 'an object that cannot be read';
    }
  }
  return describe(v);
}
