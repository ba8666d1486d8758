import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
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
    await mkdir(dir, { recursive: true });
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
      await mkdir(join(dir, name, '..'), { recursive: true });
      await writeFile(join(dir, name), content);
    }
  } catch (error) {
    throw new InputError(`cannot write to ${dir}: ${fileProblem(error)}`);
  }
}
