import { ArgumentError } from '../errors.js';
import { MAX_TAG_CHARS, MAX_TAGS } from '../stores/envelope.js';

/**
 * Checks a list of tags given at the boundary (`set`, `get`'s options, a
 * loader's `setTags`, `invalidateTags`) and returns it without repeats, or
 * `undefined` for an empty list: an untagged value costs the read path
 * nothing. Tags are untrusted input like keys: a typed error here, before
 * anything is stored.
 * @throws ArgumentError (or what `refuse` makes) for anything but an array of non-empty strings within the limits.
 */
export function checkTags(what: string, tags: unknown, max = MAX_TAGS, refuse: (message: string) => Error = (m) => new ArgumentError(m)): readonly string[] | undefined {
  if (!Array.isArray(tags)) throw refuse(`${what} must be an array of strings, got ${tags === null ? 'null' : typeof tags}`);
  if (tags.length > max) throw refuse(`${what} holds ${tags.length} tags; at most ${max}`);
  for (const [i, tag] of tags.entries()) {
    if (typeof tag !== 'string' || tag.length === 0 || tag.length > MAX_TAG_CHARS) {
      throw refuse(`${what}[${i}] must be a non-empty string of at most ${MAX_TAG_CHARS} characters, got ${typeof tag === 'string' ? `${tag.length} characters` : typeof tag}`);
    }
  }
  if (tags.length === 0) return undefined;
  const unique = [...new Set(tags as string[])];
  return Object.freeze(unique);
}

/**
 * Which keys in this process carry which tag, so `invalidateTags` finds the
 * values it makes stale without a scan of memory, and the hit path (tagged or
 * not) pays nothing: staleness is written into the entries at invalidation,
 * never checked per read.
 *
 * The index follows the memory store: a key is added when a tagged value is
 * stored and removed when the value is replaced, deleted or evicted. A stray
 * key (a value replaced without a removal) is harmless: `invalidateTags`
 * checks each entry's own tags before it touches it.
 */
export class TagIndex {
  private readonly byTag = new Map<string, Set<string>>();

  /** Tags with at least one key. */
  get size(): number {
    return this.byTag.size;
  }

  /** `key` now holds a value with `tags` (and no longer one with `before`). */
  replace(key: string, before: readonly string[] | undefined, tags: readonly string[] | undefined): void {
    if (before === tags) return;
    if (before !== undefined) this.remove(key, before);
    if (tags === undefined) return;
    for (const tag of tags) {
      let keys = this.byTag.get(tag);
      if (keys === undefined) this.byTag.set(tag, (keys = new Set()));
      keys.add(key);
    }
  }

  /** `key`'s value with `tags` left memory. */
  remove(key: string, tags: readonly string[] | undefined): void {
    if (tags === undefined) return;
    for (const tag of tags) {
      const keys = this.byTag.get(tag);
      if (keys === undefined) continue;
      keys.delete(key);
      if (keys.size === 0) this.byTag.delete(tag);
    }
  }

  /** The keys that may carry `tag`. */
  keysOf(tag: string): Iterable<string> {
    return this.byTag.get(tag) ?? [];
  }

  clear(): void {
    this.byTag.clear();
  }
}

/** Whether two tag lists meet. Lists are short (at most {@link MAX_TAGS}). */
export function sharesTag(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  if (a === undefined || b === undefined) return false;
  for (const tag of a) if (b.includes(tag)) return true;
  return false;
}
