import { type Cache } from 'damper';
import { type Row } from './database.js';

/**
 * Which reads of a damper `Cache` were answered with a stale value at once:
 * the cache serves a value past its ttl inside `get` itself, synchronously
 * (stale-while-revalidate, or while the key backs off after a failure), and
 * says so by its `stale` event, so a read that saw the event during its own
 * `get` call was answered stale. An operator's dashboard does not count
 * those as hits. A stale value served after a load failed or a wait timed
 * out comes later, at the load's end: that read waited, and is counted so
 * (`OriginWaits`).
 */
export class StaleAnswers {
  private served = 0;

  constructor(cache: Pick<Cache<Row>, 'on'>) {
    cache.on('stale', (e) => {
      if (e.reason === 'revalidate' || e.reason === 'backoff') this.served++;
    });
  }

  /** Runs `get` (one `cache.get` call); whether it answered stale at once. */
  read<T>(get: () => T): { readonly result: T; readonly stale: boolean } {
    const before = this.served;
    const result = get();
    return { result, stale: this.served !== before };
  }
}
