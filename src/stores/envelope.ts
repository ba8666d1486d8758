/**
 * The shared tier's envelope: one value with the freshness facts every process
 * needs to treat it alike, in one string, versioned so a future layout can be
 * told apart from this one (a process of another version reads it as a miss,
 * never as garbage).
 *
 *     d1|<staleFor ms>|<load ms>|<JSON of the value, or empty for "absent">
 *
 * A value with tags carries them, and its whole lifetime in the store, so a
 * reader can tell how long ago its data was read from the origin (lifetime
 * minus remaining lifetime, plus the load's time) and compare that with how
 * long ago each tag was invalidated, both durations on the store's clock:
 *
 *     d2|<staleFor ms>|<load ms>|<lifetime ms>|<length of the tags' JSON>|<tags' JSON><value's JSON>
 *
 * An untagged value keeps the `d1` layout, so the processes of an earlier
 * version still read it; they read a `d2` value as a miss of another version.
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
const TAGGED = 'd2|';
/**
 * Most tags one value may carry: each costs a read from the shared tier one
 * more look. The cache refuses more at its boundary; a stored envelope with
 * more is untrusted bytes, and corrupt.
 */
export const MAX_TAGS = 32;
/** Longest tag, in UTF-16 code units. */
export const MAX_TAG_CHARS = 1_024;

/** The decoded envelope. `value` is `undefined` for a cached "absent". */
export interface Envelope {
  readonly value: unknown;
  /** The stale window the writer used, ms. */
  readonly staleFor: number;
  /** How long the load that produced the value took, ms (early refresh's delta). */
  readonly loadMs: number;
  /** The value's tags, or undefined when it has none. */
  readonly tags: readonly string[] | undefined;
  /** With tags: the lifetime the value was stored for, ms (`fresh + staleFor`); 0 without. */
  readonly lifeMs: number;
}

/** The tags of a value to share, and the lifetime it is stored for. */
export interface TaggedLife {
  readonly tags: readonly string[];
  readonly lifeMs: number;
}

/** Why a stored string was not a usable envelope. */
export type CorruptReason = 'oversize' | 'version' | 'header' | 'json';

/** Encodes a value. Throws (a `TypeError` from JSON) only for values JSON cannot hold, such as a BigInt or a cycle. */
export function encodeEnvelope(value: unknown, staleFor: number, loadMs: number, tagged?: TaggedLife): string {
  const body = value === undefined ? '' : JSON.stringify(value);
  // JSON.stringify returns undefined for a function or a symbol: no value a reader could get back.
  if (body === undefined) throw new TypeError(`a ${typeof value} cannot be stored in the shared tier`);
  if (tagged === undefined) return `${TAG}${Math.round(staleFor)}|${Math.round(loadMs)}|${body}`;
  const tags = JSON.stringify(tagged.tags);
  // Load time rounded up: a reader's "how long ago was this read" must never come out short.
  return `${TAGGED}${Math.round(staleFor)}|${Math.ceil(loadMs)}|${Math.round(tagged.lifeMs)}|${tags.length}|${tags}${body}`;
}

/** Decodes a stored string; a bad one is reported, never thrown. `maxChars` bounds what is parsed. */
export function decodeEnvelope(raw: string, maxChars: number): { ok: true; envelope: Envelope } | { ok: false; reason: CorruptReason } {
  if (raw.length > maxChars) return { ok: false, reason: 'oversize' };
  if (raw.startsWith(TAGGED)) return decodeTagged(raw);
  if (!raw.startsWith(TAG)) return { ok: false, reason: 'version' };
  const a = raw.indexOf('|', TAG.length);
  const b = a < 0 ? -1 : raw.indexOf('|', a + 1);
  if (b < 0) return { ok: false, reason: 'header' };
  const staleFor = header(raw, TAG.length, a);
  const loadMs = header(raw, a + 1, b);
  if (staleFor === undefined || loadMs === undefined) return { ok: false, reason: 'header' };
  return body(raw, b + 1, staleFor, loadMs, undefined, 0);
}

/** The value's JSON from `from` on, or empty for "absent". */
function body(raw: string, from: number, staleFor: number, loadMs: number, tags: readonly string[] | undefined, lifeMs: number): { ok: true; envelope: Envelope } | { ok: false; reason: CorruptReason } {
  if (from === raw.length) return { ok: true, envelope: { value: undefined, staleFor, loadMs, tags, lifeMs } };
  try {
    return { ok: true, envelope: { value: safeParse(raw.slice(from)), staleFor, loadMs, tags, lifeMs } };
  } catch {
    return { ok: false, reason: 'json' };
  }
}

/** A `d2` envelope: four header fields, then the tags' JSON of the stated length, then the value. */
function decodeTagged(raw: string): { ok: true; envelope: Envelope } | { ok: false; reason: CorruptReason } {
  const fields: number[] = [];
  let from = TAGGED.length;
  for (let i = 0; i < 4; i++) {
    const bar = raw.indexOf('|', from);
    const n = bar < 0 ? undefined : header(raw, from, bar);
    if (n === undefined) return { ok: false, reason: 'header' };
    fields.push(n);
    from = bar + 1;
  }
  const [staleFor, loadMs, lifeMs, length] = fields as [number, number, number, number];
  if (from + length > raw.length) return { ok: false, reason: 'header' };
  const tags = parseTags(raw.slice(from, from + length), MAX_TAGS);
  if (tags === undefined) return { ok: false, reason: 'header' };
  return body(raw, from + length, staleFor, loadMs, tags, lifeMs);
}

/**
 * A tag list from untrusted bytes (a stored envelope, a bus message): a JSON
 * array of 1 to `max` non-empty strings of at most {@link MAX_TAG_CHARS},
 * else undefined. Never throws.
 */
export function parseTags(text: string, max: number): readonly string[] | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed.length === 0 || parsed.length > max) return undefined;
  for (const tag of parsed) if (typeof tag !== 'string' || tag.length === 0 || tag.length > MAX_TAG_CHARS) return undefined;
  return parsed as string[];
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
