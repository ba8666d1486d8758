import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { UsageError } from './args.js';

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
    throw new UsageError(`cannot write to ${dir} (--out): ${(error as Error).message}`);
  }
  return dir;
}

/** Writes `files` (name → content) into `dir`; a failure is a UsageError naming the folder. */
export async function writeFiles(dir: string, files: Readonly<Record<string, string>>): Promise<void> {
  try {
    for (const [name, content] of Object.entries(files)) {
      await mkdir(join(dir, name, '..'), { recursive: true });
      await writeFile(join(dir, name), content);
    }
  } catch (error) {
    throw new UsageError(`cannot write to ${dir}: ${(error as Error).message}`);
  }
}
