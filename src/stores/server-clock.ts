import { type Clock, preciseNow } from '../time/clock.js';

/** How often the estimate is refreshed, ms: bounds how long a step of the server's clock goes unseen. */
export const SERVER_CLOCK_SYNC_MS = 10_000;
/** A sample whose round trip took longer is not trusted: its error could be half of it. */
export const SERVER_CLOCK_MAX_RTT_MS = 100;
/** Samples kept; the one with the shortest round trip is used (NTP's clock filter, in small). */
const SAMPLES = 4;

interface Sample {
  /** Server ms minus local ms at the sample's midpoint. */
  readonly offset: number;
  /** Its round trip, ms: the offset is right to within half of it. */
  readonly rtt: number;
}

/**
 * This process's estimate of a store server's clock (Redis `TIME`), so a
 * value the server stamped with its own expiry instant can be judged with a
 * plain read, without asking the server how long the key has left.
 *
 * Why an estimate and not the local clock: processes on different machines do
 * not share a clock, and a cache whose freshness depended on each one's would
 * let a skewed process serve a value long after the others dropped it. Every
 * process here compares against the one server clock, so local skew cancels
 * out; what is left is the estimate's error, at most half the round trip of
 * the sample it rests on (under a millisecond on a LAN), plus whatever the
 * server's clock does between syncs.
 *
 * A sync is one request every {@link SERVER_CLOCK_SYNC_MS}, started by a read
 * that finds the estimate due (no timer: a store nobody reads asks nothing).
 * Of the last four samples the one with the shortest round trip is used;
 * samples that disagree with the newest by more than their combined error
 * are dropped, because the server's clock stepped. Until a trusted sample
 * exists, {@link now} answers `undefined` and the caller asks the server.
 */
export class ServerClock {
  private samples: Sample[] = [];
  /** The sample with the shortest round trip. Derived from `samples`, kept because `now()` is on the read path. */
  private best: Sample | undefined;
  private lastSync = Number.NEGATIVE_INFINITY;
  private syncing = false;

  /** `ask` resolves with the server's time in ms (it may reject: the sync is then skipped). */
  constructor(
    private readonly clock: Clock,
    private readonly ask: () => Promise<number>,
  ) {}

  /** The server's time now, ms, or `undefined` when there is no trusted sample yet. Starts a sync when one is due. */
  now(): number | undefined {
    const local = this.clock.now();
    if (!this.syncing && local - this.lastSync >= SERVER_CLOCK_SYNC_MS) this.sync(local);
    return this.best === undefined ? undefined : local + this.best.offset;
  }

  /**
   * How far {@link now} may be from the server's clock, ms: half the round
   * trip of the sample it rests on (the server read its clock somewhere in
   * that trip), plus 1 for the ms resolution; `undefined` with no sample.
   */
  errorMs(): number | undefined {
    return this.best === undefined ? undefined : this.best.rtt / 2 + 1;
  }

  private sync(local: number): void {
    this.syncing = true;
    this.lastSync = local;
    const sent = preciseNow(this.clock);
    this.ask().then(
      (server) => {
        this.syncing = false;
        const received = preciseNow(this.clock);
        this.record(server, sent, received);
      },
      () => {
        // A failed sync keeps the estimate: the server's clock did not move because a request failed.
        this.syncing = false;
      },
    );
  }

  private record(server: number, sent: number, received: number): void {
    const rtt = received - sent;
    if (!Number.isFinite(server) || !(rtt >= 0) || rtt > SERVER_CLOCK_MAX_RTT_MS) return;
    const newest: Sample = { offset: server - (sent + received) / 2, rtt };
    // Agreeing samples overlap within their errors (+1 ms for the server's ms resolution).
    const agrees = (s: Sample): boolean => Math.abs(s.offset - newest.offset) <= (s.rtt + newest.rtt) / 2 + 1;
    this.samples = [...this.samples.filter(agrees).slice(-(SAMPLES - 1)), newest];
    this.best = this.samples.reduce((a, b) => (b.rtt < a.rtt ? b : a));
  }
}
