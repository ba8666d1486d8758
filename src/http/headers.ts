import { ConfigError, describe, HeaderError } from '../errors.js';
import { type Priority } from '../guard/priority.js';
import { MAX_TIMER_MS } from '../time/clock.js';

/**
 * The two headers damper carries between services, and the `Retry-After` it
 * reads. Every value here comes off the wire, so each is untrusted bytes: read
 * character by character, bounded, and refused with a {@link HeaderError} that
 * names the header, never coerced (`Number(" 1e3 ")` is 1000).
 *
 * The deadline travels as the time *left*, in ms, when the request was sent,
 * not as an instant: two machines' clocks disagree, and an absolute instant
 * would carry that skew into every hop (gRPC's `grpc-timeout` and Envoy's
 * `x-envoy-expected-rq-timeout-ms` do the same). The time on the wire between
 * the hops is not subtracted; it is small against any deadline worth setting.
 */

/** Default name of the header that carries the time left before the caller's deadline, ms. */
export const DEADLINE_HEADER = 'x-damper-deadline-ms';
/** Default name of the header that carries the call's priority. */
export const PRIORITY_HEADER = 'x-damper-priority';

/** Most digits a header's number may have: 10 digits of ms is 115 days, far past any timer. */
const MAX_DIGITS = 10;
const NAMED = ['critical', 'normal', 'low', 'background'] as const;
/** RFC 9110's preferred date form, `Sun, 06 Nov 1994 08:49:37 GMT`. */
const IMF_FIXDATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;
/** A numeric priority on the wire is an integer in ±this, which every rank comparison handles exactly. */
const MAX_NUMERIC_PRIORITY = 1_000_000;

/** An RFC 9110 token, as header names are. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** The option `name` naming a header: a token, returned in lower case (how node:http and undici hand names over), else a {@link ConfigError}. */
export function headerNameOption(name: string, value: unknown): string {
  if (typeof value !== 'string' || !TOKEN.test(value)) throw new ConfigError(`${name} must be a header name (an RFC 9110 token), got ${typeof value === 'string' ? JSON.stringify(value.slice(0, 40)) : describe(value)}`);
  return value.toLowerCase();
}

/** The one value of a header node:http or undici hands over (a string, or an array when repeated). */
function single(name: string, value: string | readonly string[] | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value;
  if (value.length === 0) return undefined;
  if (value.length > 1) throw new HeaderError(name, `sent ${value.length} times; it must be sent once`);
  return value[0];
}

/** A run of ASCII digits, at most {@link MAX_DIGITS}, as a number; undefined if `text` is anything else. */
function digits(text: string): number | undefined {
  if (text.length === 0 || text.length > MAX_DIGITS) return undefined;
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return undefined;
    n = n * 10 + c;
  }
  return n;
}

/**
 * The time left before the caller's deadline, from the header's value: ms, a
 * plain non-negative integer. Undefined when the header is absent (no
 * deadline); a {@link HeaderError} for anything else. Capped at the longest
 * timer, so a caller cannot make this process hold a timer that Node would
 * fire at once.
 */
export function readRemainingMs(name: string, value: string | readonly string[] | undefined): number | undefined {
  const text = single(name, value);
  if (text === undefined) return undefined;
  const ms = digits(text.trim());
  if (ms === undefined) throw new HeaderError(name, `must be the time left in ms, a whole number of at most ${MAX_DIGITS} digits, got ${JSON.stringify(text.slice(0, 40))}`);
  return Math.min(ms, MAX_TIMER_MS);
}

/** The header's value for `ms` left: a whole number of ms, never negative. */
export function writeRemainingMs(ms: number): string {
  return String(Math.max(0, Math.floor(ms)));
}

/**
 * The priority in the header's value: `critical`, `normal`, `low`,
 * `background`, or an integer within ±1 000 000 (higher is more important).
 * Undefined when absent; a {@link HeaderError} for anything else.
 */
export function readPriority(name: string, value: string | readonly string[] | undefined): Priority | undefined {
  const text = single(name, value);
  if (text === undefined) return undefined;
  const word = text.trim().toLowerCase();
  for (const level of NAMED) if (word === level) return level;
  const negative = word.startsWith('-');
  const n = digits(negative ? word.slice(1) : word);
  if (n === undefined || n > MAX_NUMERIC_PRIORITY) throw new HeaderError(name, `must be critical, normal, low, background or an integer within ±${MAX_NUMERIC_PRIORITY}, got ${JSON.stringify(text.slice(0, 40))}`);
  return negative ? -n : n;
}

/** The header's value for `priority`. */
export function writePriority(priority: Priority): string {
  return typeof priority === 'number' ? String(Math.trunc(priority)) : priority;
}

/**
 * A response's `Retry-After`, in ms from now: delta-seconds, or an HTTP-date
 * read against the response's own `Date` header, so the wait is the server's
 * interval on the server's clock and no skew between the machines enters it.
 * Undefined when absent, malformed (a date must be in the IMF-fixdate form),
 * or a date without a `Date` header to read it against: a hint damper cannot trust is no hint, and the call backs off
 * by its own rule. Never negative.
 */
export function readRetryAfterMs(value: string | readonly string[] | undefined, date: string | readonly string[] | undefined): number | undefined {
  const text = typeof value === 'string' ? value : value?.[0];
  if (text === undefined) return undefined;
  const trimmed = text.trim();
  const seconds = digits(trimmed);
  if (seconds !== undefined) return Math.min(seconds * 1000, MAX_TIMER_MS);
  const sent = typeof date === 'string' ? date.trim() : date?.[0]?.trim();
  // Only the IMF-fixdate form servers must send: Date.parse alone takes "-1" or "1" as a year.
  if (sent === undefined || !IMF_FIXDATE.test(trimmed) || !IMF_FIXDATE.test(sent)) return undefined;
  const at = Date.parse(trimmed);
  const now = Date.parse(sent);
  if (!Number.isFinite(at) || !Number.isFinite(now)) return undefined;
  return Math.min(Math.max(0, at - now), MAX_TIMER_MS);
}

/** The headers of an undici request, in any of the shapes its dispatch accepts. */
export type RequestHeaders = Readonly<Record<string, string | readonly string[] | undefined>> | readonly string[] | Iterable<readonly [string, string | readonly string[] | undefined]> | null | undefined;

/** Calls `each(name, value)` for every header of `headers`, whatever its shape; `name` as given. */
function forEachHeader(headers: RequestHeaders, each: (name: string, value: string | readonly string[] | undefined) => void): void {
  if (headers === null || headers === undefined) return;
  if (Array.isArray(headers)) {
    // undici's flat form: name, value, name, value…
    const flat = headers as readonly unknown[];
    if (flat.length > 0 && Array.isArray(flat[0])) {
      for (const pair of flat as readonly (readonly [string, string])[]) each(pair[0], pair[1]);
      return;
    }
    for (let i = 0; i + 1 < flat.length; i += 2) each(String(flat[i]), flat[i + 1] as string);
    return;
  }
  if (typeof (headers as Iterable<unknown>)[Symbol.iterator] === 'function') {
    for (const [name, value] of headers as Iterable<readonly [string, string | readonly string[] | undefined]>) each(name, value);
    return;
  }
  for (const name of Object.keys(headers)) each(name, (headers as Record<string, string | readonly string[] | undefined>)[name]);
}

/** The value of header `name` (lower case) in `headers`, if set. */
export function headerValue(headers: RequestHeaders, name: string): string | readonly string[] | undefined {
  return headerValues(headers, name, name)[0];
}

type HeaderValue = string | readonly string[] | undefined;

/** The values of headers `a` and `b` (lower case) in `headers`, in one pass. */
export function headerValues(headers: RequestHeaders, a: string, b: string): [HeaderValue, HeaderValue] {
  const found: [HeaderValue, HeaderValue] = [undefined, undefined];
  forEachHeader(headers, (n, v) => {
    if (v === undefined) return;
    const lower = n.toLowerCase();
    if (lower === a) found[0] = v;
    if (lower === b) found[1] = v;
  });
  return found;
}

/**
 * `headers` in undici's flat form with `set` written over them: a header of
 * the same name in any case is replaced, never sent twice (a receiver that
 * reads a repeated deadline must refuse it).
 */
export function withHeaders(headers: RequestHeaders, set: readonly (readonly [name: string, value: string])[]): string[] {
  const out: string[] = [];
  forEachHeader(headers, (name, value) => {
    if (value === undefined) return;
    const lower = name.toLowerCase();
    for (const [n] of set) if (n === lower) return;
    if (typeof value === 'string') out.push(name, value);
    else for (const v of value) out.push(name, v);
  });
  for (const [n, v] of set) out.push(n, v);
  return out;
}
