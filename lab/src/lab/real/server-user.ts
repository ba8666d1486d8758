import { execFile } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { RealRunError } from './real-error.js';

/**
 * The user a real run's database binaries run as. PostgreSQL refuses to
 * run as root, and so does pgbouncer: as root, they run as Debian's
 * `postgres` user (`setpriv`, which execs them: the keeper's pid is the
 * binary's), in directories of the run's temp dir that user owns.
 */
export const SERVER_USER = 'postgres';

const asRoot = process.getuid?.() === 0;

/** `binary args` as PostgreSQL and pgbouncer accept to be run: as {@link SERVER_USER} when we are root. */
export function asServerUser(binary: string, args: readonly string[]): { readonly command: string; readonly args: readonly string[] } {
  return asRoot ? { command: 'setpriv', args: [`--reuid=${SERVER_USER}`, `--regid=${SERVER_USER}`, '--clear-groups', '--', binary, ...args] } : { command: binary, args };
}

/** The server user's uid and gid, for the directories it must own. */
function serverUserIds(): Promise<{ uid: number; gid: number }> {
  const id = (flag: string): Promise<number> =>
    new Promise((resolve, reject) => execFile('id', [flag, SERVER_USER], (error, out) => (error ? reject(new RealRunError(`running as root, and there is no ${SERVER_USER} user to run the database as`)) : resolve(Number(out.trim())))));
  return Promise.all([id('-u'), id('-g')]).then(([uid, gid]) => ({ uid, gid }));
}

/** Makes `runDir/name`, a directory of the server user's (when we are root), and returns its path. */
export async function serverUserDir(runDir: string, name: string): Promise<string> {
  const dir = join(runDir, name);
  mkdirSync(dir);
  if (asRoot) {
    const { uid, gid } = await serverUserIds();
    // The server user passes through the run's dir (not reads it) to its own.
    chmodSync(runDir, 0o711);
    chownSync(dir, uid, gid);
  }
  return dir;
}
