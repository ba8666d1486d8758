import { every, wallNowMs } from './wall-clock.js';

/**
 * How late a Node process's event loop runs, window by window: a timer
 * every `resolutionMs` notes how far past its period it came, as Node's
 * `monitorEventLoopDelay` does, but a window's reading also counts the block
 * in progress, the time since the probe last ran.
 *
 * Node's own histogram loses a block that ends a window: after it, the
 * window's reading and Node's probe come due together, and if the reading
 * runs first the histogram's reset drops the probe's pending interval (its
 * next one starts at the reset). Measured on Node 20: a loop blocked 1,085
 * ms read 10 ms in every window; a CI run on Node 24 read 24 ms for a child
 * that spun 1,080 ms. Here the reading takes the block up to its own
 * instant, and starts the probe's next interval there, so the block is
 * counted once, in the window it ends in.
 */
export class LoopProbe {
  /** The delays of this window's probes, ms past the period. */
  private delays: number[] = [];
  private last = wallNowMs();
  private readonly cancel: () => void;

  constructor(private readonly resolutionMs: number) {
    this.cancel = every(resolutionMs, () => {
      const now = wallNowMs();
      this.delays.push(Math.max(0, now - this.last - resolutionMs));
      this.last = now;
    });
  }

  /** This window's p99 and largest delay, ms, the block in progress included; starts the next window. */
  window(): { readonly p99Ms: number; readonly maxMs: number } {
    const now = wallNowMs();
    const delays = this.delays;
    delays.push(Math.max(0, now - this.last - this.resolutionMs));
    delays.sort((a, b) => a - b);
    const reading = { p99Ms: p99Of(delays), maxMs: delays[delays.length - 1]! };
    this.delays = [];
    this.last = now;
    return reading;
  }

  close(): void {
    this.cancel();
  }
}

/**
 * The p99 of `sorted` (ascending, not empty) at the rank Node's histogram
 * (HdrHistogram) reads it: of a second's ~100 probes the second worst, so a
 * single hiccup shows in the max only. Read at the worst's rank, as this
 * probe first did, one 25-ms hiccup in a second flagged it as the host's
 * (the host limits read a p99 past 20 ms), where Node's reading did not.
 */
export function p99Of(sorted: readonly number[]): number {
  return sorted[Math.max(1, Math.floor(0.99 * sorted.length + 0.5)) - 1]!;
}
