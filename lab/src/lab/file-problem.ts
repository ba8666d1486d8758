/**
 * Why a file or folder could not be used, in a few words from the error's
 * code: node's message leads with the code and repeats the path the caller
 * has already named.
 */
const REASONS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file or folder',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EISDIR: 'it is a folder, not a file',
  ENOTDIR: 'a part of the path is a file, not a folder',
  // What mkdir says of a path that a file already holds.
  EEXIST: 'it is a file, not a folder',
  EROFS: 'the file system is read-only',
  ENOSPC: 'no space left on the device',
  ENAMETOOLONG: 'the name is too long',
  ELOOP: 'too many symbolic links',
};

/** The reason for a failed read, write or mkdir: `permission denied`; node's own message for a code not listed. */
export function fileProblem(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && Object.hasOwn(REASONS, code)) return REASONS[code]!;
  return error instanceof Error ? error.message : String(error);
}
