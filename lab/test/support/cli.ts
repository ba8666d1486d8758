import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { commandLine } from '../../src/cli/command-line.js';

/** The command line as built beside the tests (lab/build/src/cli/main.js): what `damper` runs, compiled from the same sources. */
export const CLI_MAIN = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

/**
 * Runs `damper ARGS…` in a process of its own, from the current folder.
 * The built file, not the source through tsx: tsx compiles every module the
 * command line loads on each start, about three times the CPU of a start
 * (2.2 against 0.7 s), and these tests spawn dozens. A command that hangs
 * (Node's recursive mkdir under /proc did) is killed and fails its test, not
 * the suite.
 */
export function damperCli(...args: string[]): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [CLI_MAIN, ...args], { encoding: 'utf8', timeout: 120_000 });
}

/**
 * `damper ARGS…` read in this process (command-line.ts, as main.ts runs it):
 * its exit code and what it wrote itself (helps, usage errors, refusals). For
 * what ends before a command runs; a process of its own (`damperCli`) for a
 * command's run, its streams and the exit code a shell sees.
 */
export async function damperHere(...args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const status = await commandLine(args, { stdout: { write: (text: string) => (stdout += text) }, stderr: { write: (text: string) => (stderr += text) } });
  return { status, stdout, stderr };
}
