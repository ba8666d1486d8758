import { DamperError } from '../../errors.js';

/** The `code` of an {@link UpstreamStatusError}: how HttpDependency's judge knows one, from any copy of damper. @internal */
export const UPSTREAM_STATUS = 'UPSTREAM_STATUS';

/**
 * An upstream answered with a status that counts as its failure (a 503, say):
 * how an attempt's answer reaches `Retry`, the breaker, the throttle and the
 * balancer, which all judge errors. It carries `retryAfterMs` (the response's
 * `Retry-After`), which `Retry` waits for. The caller never receives it as an
 * exception: when no retry follows, the response itself is delivered, because
 * a 503 is an answer the caller may want to read. Listeners of a `Retry`'s
 * events see it.
 */
export class UpstreamStatusError extends DamperError {
  readonly status: number;
  /** The upstream that answered, by id. */
  readonly upstream: string;
  /** From `Retry-After`, ms; undefined when absent or unreadable. */
  readonly retryAfterMs: number | undefined;
  constructor(status: number, upstream: string, retryAfterMs: number | undefined) {
    super(UPSTREAM_STATUS, `upstream ${upstream} answered ${status}`);
    this.status = status;
    this.upstream = upstream;
    this.retryAfterMs = retryAfterMs;
  }
}
