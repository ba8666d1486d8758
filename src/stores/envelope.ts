/**
 * The shared tier's envelope: one value with the freshness facts every process
 * needs to treat it alike, in one string, versioned so a future layout can be
 * told apart from this one (a process of another version reads it as a miss,
 * never as garbage).
 *
 *     d1|<staleFor ms>|<load ms>|<JSON of the value, or empty for "absent">
 *
 * No instant is stored: the backend's time to live (Redis `PTTL`) gives how
 * much of `fresh + staleFor` remains, so freshness is read off one clock (the
 * backend's) and processes with skewed clocks still agree on it.
 *
 * The bytes in a shared store are untrusted: another version, another service,
 * or an attacker with write access may have put them there. Decoding never
 * throws, bounds the size before parsing, and drops `__proto__` keys (and
 * `constructor` objects carrying a `prototype`), so a value merged later with
 * `Object.assign` or a spread cannot reach `Object.prototype`.
 */

const TAG = 'd1|';

/** The decoded envelope. `value` is `undefined` for a cached "absent". */
export interface Envelope {
  readonly value: unknown;
  /** The stale window the writer used, ms. */
  readonly staleFor: number;
  /** How long the load that produced the value took, ms (early refresh's delta). */
  readonly loadMs: number;
}

/** Why a stored string was not a usable envelope. */
export type CorruptReason = 'oversize' | 'version' | 'header' | 'json';

/** Encodes a value. Throws (a `TypeError` from JSON) only for values JSON cannot hold, such as a BigInt or a cycle. */
export function encodeEnvelope(value: unknown, staleFor: number, loadMs: number): string {
  const body = value === undefined ? '' : JSON.stringify(value);
  // JSON.stringify returns undefined for a function or a symbol: no value a reader could get back.
  if (body === undefined) throw new TypeError(`a ${typeof value} cannot be stored in the shared tier`);
  return `${TAG}${Math.round(staleFor)}|${Math.round(loadMs)}|${body}`;
}

/** Decodes a stored string; a bad one is reported, never thrown. `maxChars` bounds what is parsed. */
export function decodeEnvelope(raw: string, maxChars: number): { ok: true; envelope: Envelope } | { ok: false; reason: CorruptReason } {
  if (raw.length > maxChars) return { ok: false, reason: 'oversize' };
  if (!raw.startsWith(TAG)) return { ok: false, reason: 'version' };
  const a = raw.indexOf('|', TAG.length);
  const b = a < 0 ? -1 : raw.indexOf('|', a + 1);
  if (b < 0) return { ok: false, reason: 'header' };
  const staleFor = header(raw, TAG.length, a);
  const loadMs = header(raw, a + 1, b);
  if (staleFor === undefined || loadMs === undefined) return { ok: false, reason: 'header' };
  if (b + 1 === raw.length) return { ok: true, envelope: { value: undefined, staleFor, loadMs } };
  const body = raw.slice(b + 1);
  try {
    return { ok: true, envelope: { value: safeParse(body), staleFor, loadMs } };
  } catch {
    return { ok: false, reason: 'json' };
  }
}

/** A non-negative integer header field, or undefined. */
function header(raw: string, from: number, to: number): number | undefined {
  if (to === from || to - from > 15) return undefined;
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = raw.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return undefined;
    n = n * 10 + c;
  }
  return n;
}

/**
 * `JSON.parse`, with the reviver that strips dangerous keys run only when the
 * text could hold one: the reviver visits every node and would cost the common
 * case several times the parse itself (the approach of fastify's
 * secure-json-parse). A key can hold one spelled with escapes
 * (`"\u005f_proto__"`): of JSON's escapes only `\u` makes a letter or an
 * underscore, so any `\u` in the text takes the careful path too. Untrusted
 * bytes are untrusted however they are spelled; `JSON.stringify` writes `\u`
 * only for control characters, so a value damper wrote rarely pays for it.
 */
function safeParse(text: string): unknown {
  if (!text.includes('__proto__') && !text.includes('constructor') && !text.includes('\\u')) return JSON.parse(text);
  return JSON.parse(text, strip);
}

function strip(this: unknown, key: string, value: unknown): unknown {
  if (key === '__proto__') return undefined;
  if (key === 'constructor' && typeof value === 'object' && value !== null && Object.prototype.hasOwnProperty.call(value, 'prototype')) return undefined;
  return value;
}
