import { DamperError } from 'damper';

/**
 * A DamperError across the thread boundary. A worker's uncaught error reaches
 * the host as a plain Error (structured cloning keeps no class), which the
 * command line would report as an internal error with a stack. A user's
 * mistake found inside a worker (a configuration module that cannot be
 * imported or reads the real clock: DamperConfigError; a scenario a world
 * refuses: ScenarioError) is the user's to fix, so it must arrive as what it
 * is: a DamperError, with its code, its class's name and its message.
 */
export interface PostedDamperError {
  readonly code: string;
  readonly name: string;
  readonly message: string;
}

/** What a worker posts back: its result, or the DamperError it met. */
export type WorkerReply<T> = { readonly ok: T } | { readonly damperError: PostedDamperError };

/** The worker's side: a DamperError as data. */
export function postedError(error: DamperError): PostedDamperError {
  return { code: error.code, name: error.name, message: error.message };
}

/** The host's side: the DamperError again, its code and message and its class's name kept (`ScenarioError: …`). */
export function revivedError(posted: PostedDamperError): DamperError {
  const error = new DamperError(posted.code, posted.message);
  error.name = posted.name;
  return error;
}
