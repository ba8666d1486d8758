import { type Delay } from '../schema/common.js';

/**
 * A scenario's `Delay` drawn once, in ms, unrounded: a network hop, a think
 * time, a service time. A constant draws nothing from `random`, so a
 * scenario that never asks for a random delay leaves its source untouched.
 */
export function sampleMs(delay: Delay, random: () => number): number {
  switch (delay.kind) {
    case 'constant':
      return delay.ms;
    case 'exponential':
      return -delay.meanMs * Math.log(1 - random());
    case 'lognormal':
      return delay.medianMs * Math.exp(delay.sigma * normal(random));
  }
}

/** The mean of `delay`, ms: what a capacity bound reads (a lognormal's mean is its median × e^(σ²/2)). */
export function meanMs(delay: Delay): number {
  switch (delay.kind) {
    case 'constant':
      return delay.ms;
    case 'exponential':
      return delay.meanMs;
    case 'lognormal':
      return delay.medianMs * Math.exp((delay.sigma * delay.sigma) / 2);
  }
}

/** A standard normal draw (Box–Muller). */
function normal(random: () => number): number {
  const u = 1 - random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}
