import { type VirtualClock } from 'damper';
import { sampleMs } from './delay.js';
import { type Delay } from '../schema/common.js';
import { stream, STREAMS } from './streams.js';

/**
 * The network between a world's tiers: each one-way hop a request or its
 * answer makes costs a delay drawn from the scenario's `network.hopDelay`
 * (from a source of its own: the traffic stays the same whatever the
 * network does), rounded up to whole ms to stay on the engine's steps. A
 * constant 0, the default, costs nothing at all: no draw and no timer, the
 * hop is a plain call, so a scenario without a network runs as it did.
 */
export class Network {
  private readonly random: () => number;

  constructor(
    private readonly clock: VirtualClock,
    private readonly delay: Delay,
    seed: number,
  ) {
    this.random = stream(seed, STREAMS.network);
  }

  /** True when every hop costs 0 (a constant 0): callers skip the hop machinery altogether. */
  get free(): boolean {
    return this.delay.kind === 'constant' && this.delay.ms <= 0;
  }

  /** The cost of one hop, whole ms. */
  hopMs(): number {
    return Math.ceil(sampleMs(this.delay, this.random));
  }

  /** Runs `then` one hop from now: at once, in this call, when the hop costs 0. */
  hop(then: () => void): void {
    const ms = this.hopMs();
    if (ms === 0) then();
    else this.clock.setTimer(then, ms);
  }
}
