import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileProblem } from '../lab/file-problem.js';
import { InputError } from './args.js';

/** Where every command writes when `--out` is not given: `damper lab` and a sweep of the same scenario share it. */
export const DEFAULT_OUT = 'lab-out';

/**
 * The output folder, made and proven writable before any simulation: a
 * sweep of minutes must not lose its work to a typo in `--out`. A probe file
 * is written and removed, since permission bits say nothing to root and a
 * path below a regular file fails only when something is written.
 */
export async function writableDir(out: string): Promise<string> {
  const dir = resolve(out);
  const probe = join(dir, `.damper-write-test-${process.pid}`);
  try {
    await makeDirs(dir);
    await writeFile(probe, '');
    await rm(probe);
  } catch (error) {
    throw new InputError(`cannot write to ${dir} (--out): ${fileProblem(error)}`);
  }
  return dir;
}

/** Writes `files` (name → content) into `dir`; a failure is an InputError naming the folder. */
export async function writeFiles(dir: string, files: Readonly<Record<string, string>>): Promise<void> {
  try {
    for (const [name, content] of Object.entries(files)) {
      await makeDirs(join(dir, name, '..'));
      await writeFile(join(dir, name), content);
    }
  } catch (error) {
    throw new InputError(`cannot write to ${dir}: ${fileProblem(error)}`);
  }
}

/**
 * `mkdir -p`, one folder at a time from the deepest one that exists. Node's
 * own `mkdir(…, { recursive: true })` never settles below some mounts (Node
 * 20: under `/proc`, it loops for ever), and `--out /proc/foo` hung the lab
 * for good (issue 29). A path that a file holds fails as mkdir says it
 * (`EEXIST`); a file on the way, as `ENOTDIR`.
 */
async function makeDirs(dir: string): Promise<void> {
  const missing: string[] = [];
  for (let d = dir; ; d = dirname(d)) {
    const found = await stat(d).catch((error: unknown) => {
      if ((error as { code?: unknown }).code === 'ENOENT') return undefined;
      throw error;
    });
    if (found !== undefined) {
      if (d === dir && !found.isDirectory()) throw Object.assign(new Error(`${dir} is a file`), { code: 'EEXIST' });
      break;
    }
    missing.push(d);
    if (dirname(d) === d) break;
  }
  for (const d of missing.reverse()) {
    await mkdir(d).catch((error: unknown) => {
      // Made meanwhile by someone else: what was wanted.
      if ((error as { code?: unknown }).code !== 'EEXIST') throw error;
    });
  }
}
