import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * A full garbage collection, which mitata runs before each measurement so no
 * contender pays for the previous one's garbage. `npm run bench` does not pass
 * --expose-gc, so the flag is set at run time and `gc` taken from a fresh context.
 */
function exposeGc(): () => void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as unknown;
  if (typeof gc !== 'function') throw new Error('could not expose the garbage collector');
  return gc as () => void;
}

export const collect = exposeGc();
