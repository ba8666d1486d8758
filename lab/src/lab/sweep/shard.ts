import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DamperError } from 'damper';
import { packageRoot } from '../lab.js';
import { type Scenario } from '../world/worlds.js';
import { type CheckPlan } from './check-plan.js';
import { isSweepVariant, type SweepCell, type SweepResult } from './sweep.js';

/**
 * A sweep spread over machines (issue 29, part 5): `--shard i/n` runs the
 * i-th of n shares of the grid's cells and writes them as a *part*;
 * `damper lab merge` puts the n parts together into the `SweepResult` one
 * run gives, so the same `sweep.json` and `sweep.html` bytes.
 *
 * The partition: cell k of the row-major list goes to shard (k mod n) + 1,
 * dealt like cards rather than cut into blocks, because a grid's cost is
 * not even: the stuck cells, the costliest to simulate, gather where load
 * and trigger are highest, the last rows, and blocks would hand them all to
 * the last shards. Dealt, every shard takes cells of every row, and the
 * shards' sizes differ by one cell at most. A shard with no cell (n above
 * the grid's cells) writes a part with none.
 */

export interface Shard {
  /** From 1. */
  readonly index: number;
  readonly count: number;
}

/** The whole grid: what a run without `--shard` runs. */
export const WHOLE: Shard = { index: 1, count: 1 };

/** The indices (row-major) of the cells of a `total`-cell grid that `shard` runs. */
export function shardCells(total: number, shard: Shard): number[] {
  const cells: number[] = [];
  for (let k = shard.index - 1; k < total; k += shard.count) cells.push(k);
  return cells;
}

/** A sweep without its cells: what every part of it carries alike. */
export type SweepHeading = Omit<SweepResult, 'cells'>;

/** What `lab check`'s parts carry besides: what its verdict and its screen need. */
export interface CheckOfPart {
  readonly margins: CheckPlan['margins'];
  readonly origin: CheckPlan['origin'];
  /** The configuration module in use, as the screen names it; undefined: the lab's own settings. */
  readonly config?: string;
}

/** What a part file says it is: a merge refuses any other file. */
export const PART_FORMAT = 'damper-sweep-part/1';

export interface SweepPart {
  readonly format: typeof PART_FORMAT;
  readonly shard: Shard;
  /**
   * The grid's identity: a hash of everything its cells' results depend on
   * (the lab's version, the heading, every cell's scenario with its
   * configuration module's contents, not its path, which differs between
   * machines). Parts of two grids never merge.
   */
  readonly grid: string;
  readonly sweep: SweepHeading;
  /** Present in `lab check`'s parts only. */
  readonly check?: CheckOfPart;
  /** This shard's cells, each with its index in the whole grid's row-major list; copied whole by a merge, whatever fields a cell has. */
  readonly cells: readonly { readonly index: number; readonly cell: SweepCell }[];
}

/** `sweep.part-2-of-4.json`. */
export function partFileName(shard: Shard): string {
  return `sweep.part-${shard.index}-of-${shard.count}.json`;
}

/** The names of part files in a folder given to `damper lab merge`. */
export const PART_FILE = /^sweep\.part-\d+-of-\d+\.json$/;

export function partJson(part: SweepPart): string {
  return `${JSON.stringify(part, null, 2)}\n`;
}

/** The sweep from its heading and its cells in row-major order: the one place a `SweepResult` is put together, so a merged sweep has the keys of a whole one in the same order. */
export function assemble(sweep: SweepHeading, cells: readonly SweepCell[]): SweepResult {
  return { ...sweep, cells };
}

let labVersion: string | undefined;

function version(): string {
  labVersion ??= (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
  return labVersion;
}

function sha256(text: string | Buffer): string {
  return createHash('sha256').update(text).digest('hex');
}

/** A configuration module by its contents; one that cannot be read is left to the run, whose DamperConfigError names it and why. */
function contentHash(file: string): string {
  try {
    return sha256(readFileSync(file));
  } catch {
    return `unread: ${file}`;
  }
}

/** The identity of the grid of `sweep` whose cells are `scenarios` (every cell's, not only a shard's). */
export function gridIdentity(sweep: SweepHeading, scenarios: readonly Scenario[]): string {
  const contents = new Map<string, string>();
  const byContent = (file: string): string => {
    if (!contents.has(file)) contents.set(file, contentHash(file));
    return contents.get(file)!;
  };
  const cells = scenarios.map((s) => (s.damper?.config === undefined ? s : { ...s, damper: { config: byContent(s.damper.config) } }));
  return sha256(JSON.stringify({ lab: version(), sweep, cells }));
}

/** Parts that do not make one whole sweep, or a file that is not a part: one line naming what is wrong (exit 2). */
export class SweepMergeError extends DamperError {
  constructor(message: string) {
    super('SWEEP_MERGE', message);
  }
}

const isShard = (s: unknown): s is Shard => {
  const { index, count } = (s ?? {}) as Record<string, unknown>;
  return Number.isSafeInteger(index) && Number.isSafeInteger(count) && (index as number) >= 1 && (index as number) <= (count as number);
};

/** A part file's text, checked for what a merge reads; `where` names the file. */
export function readPart(text: string, where: string): SweepPart {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new SweepMergeError(`${where}: not a part of a sweep (not JSON); parts are written by damper lab sweep or check with --shard I/N`);
  }
  const part = doc as Partial<SweepPart> | null;
  if (part === null || typeof part !== 'object' || part.format !== PART_FORMAT) {
    throw new SweepMergeError(`${where}: not a part of a sweep (no "format": "${PART_FORMAT}"); parts are written by damper lab sweep or check with --shard I/N`);
  }
  if (!isShard(part.shard) || typeof part.grid !== 'string' || typeof part.sweep !== 'object' || part.sweep === null || !Array.isArray(part.cells)) throw new SweepMergeError(`${where}: a part of a sweep with fields missing or of the wrong type`);
  // A variant's name reaches the page and the terminal: only names a sweep can have run.
  const variants: unknown = part.sweep.variants;
  const unknown = Array.isArray(variants) ? variants.find((v) => !isSweepVariant(v)) : variants;
  if (!Array.isArray(variants) || unknown !== undefined) throw new SweepMergeError(`${where}: a part of a sweep whose variants are not what a sweep runs (${JSON.stringify(unknown)}): naive, damper, damper-lab or a peer stack`);
  return part as SweepPart;
}

/** How part `b`'s sweep differs from part `a`'s, in words, for a refusal. */
function difference(a: SweepPart, b: SweepPart): string {
  const command = (p: SweepPart): string => (p.check === undefined ? 'lab sweep' : 'lab check');
  if (command(a) !== command(b)) return `it is from ${command(b)}, that from ${command(a)}`;
  const fields = ['scenario', 'seed', 'variants', 'operators', 'across', 'up'] as const;
  const differs = fields.filter((f) => JSON.stringify(a.sweep[f]) !== JSON.stringify(b.sweep[f]));
  if (differs.length > 0) return differs.map((f) => `${f} ${JSON.stringify(b.sweep[f])}, not ${JSON.stringify(a.sweep[f])}`).join('; ');
  if (a.grid !== b.grid) return 'the scenario file, its damper configuration or the lab’s version differ';
  return `check margins ${JSON.stringify(b.check?.margins)}, not ${JSON.stringify(a.check?.margins)}`;
}

const checkKey = (p: SweepPart): string => JSON.stringify(p.check === undefined ? null : [p.check.margins, p.check.origin]);

/**
 * Puts the parts of one sweep together: all n parts of one sharding, each
 * once, of the same grid (and, for `lab check`, the same margins), else a
 * SweepMergeError naming the file at fault, the parts given twice or the
 * parts missing. The cells are copied whole, in row-major order.
 */
export function mergeParts(parts: readonly { readonly where: string; readonly part: SweepPart }[]): { result: SweepResult; check?: CheckOfPart } {
  const [first, ...rest] = parts;
  if (first === undefined) throw new SweepMergeError('no parts to merge: give the part files (sweep.part-I-of-N.json) or the folders that hold them');
  const n = first.part.shard.count;
  for (const { where, part } of rest) {
    if (part.grid !== first.part.grid || checkKey(part) !== checkKey(first.part)) throw new SweepMergeError(`${where} is not a part of the same sweep as ${first.where}: ${difference(first.part, part)}`);
    if (part.shard.count !== n) throw new SweepMergeError(`${where} is part ${part.shard.index} of ${part.shard.count}, ${first.where} part ${first.part.shard.index} of ${n}: parts of two shardings of the grid`);
  }
  const byIndex = new Map<number, string[]>();
  for (const { where, part } of parts) byIndex.set(part.shard.index, [...(byIndex.get(part.shard.index) ?? []), where]);
  const twice = [...byIndex].filter(([, files]) => files.length > 1).sort(([a], [b]) => a - b);
  if (twice.length > 0) throw new SweepMergeError(`${twice.map(([i, files]) => `part ${i} of ${n} given ${files.length} times (${files.join(', ')})`).join('; ')}`);
  const missing: number[] = [];
  for (let i = 1; i <= n; i++) if (!byIndex.has(i)) missing.push(i);
  if (missing.length > 0) throw new SweepMergeError(`missing ${missing.length === 1 ? 'part' : 'parts'} ${missing.join(', ')} of ${n} (from --shard ${missing.map((i) => `${i}/${n}`).join(', ')}); given: ${[...byIndex.keys()].sort((a, b) => a - b).join(', ')}`);
  const { sweep } = first.part;
  const total = sweep.across.values.length * sweep.up.values.length;
  const cells = new Array<SweepCell | undefined>(total);
  for (const { where, part } of parts) {
    const expected = shardCells(total, part.shard);
    if (JSON.stringify(part.cells.map((c) => c.index)) !== JSON.stringify(expected)) throw new SweepMergeError(`${where}: part ${part.shard.index} of ${n} holds cells ${part.cells.map((c) => c.index).join(', ') || 'none'}, not its share ${expected.join(', ') || '(none)'}`);
    for (const { index, cell } of part.cells) cells[index] = cell;
  }
  return { result: assemble(sweep, cells as SweepCell[]), ...(first.part.check === undefined ? {} : { check: first.part.check }) };
}
