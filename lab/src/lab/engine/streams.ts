import { seededRandom } from 'damper';

/**
 * The seeded sources of a run, one per purpose, each derived from the run's
 * seed. A source belongs to one thing only (the arrivals, the steady state,
 * the front door's admission…), so the naive and damper variants, which make
 * different calls to the library's clock, still see exactly the same traffic
 * and the same starting state. The constants are the ones the worlds used
 * before the client driver was written once: changing one changes every
 * result.
 */
export const STREAMS = {
  /** Arrivals per step and the key each one reads. */
  traffic: 0x7a3f_19c5,
  /** The steady state's remaining freshness per cached value. */
  prewarm: 0x2c1b_3c6d,
  /** Which requests a front door that lets traffic back in gradually admits. */
  admission: 0x51ed_270b,
  /** The naive clients' full-jitter retry delays. */
  retryJitter: 0x6c8e_9cf5,
  /** What each network hop between tiers costs, when `network.hopDelay` is random. */
  network: 0x1f83_d9ab,
  /** The keys a process holds in memory when it holds fewer than there are (xor'ed with the process's own constant). */
  processKeys: 0x5bd1_e995,
  /** Closed-loop users' keys and think times: apart from the open-loop traffic, which stays the same whatever the system does. */
  closedLoop: 0x2f6b_84d3,
  /** The service world's service times, when `servers.service` is random. */
  serviceTime: 0x4a7c_15e9,
  /** The service world's cache nodes' round trips, when `cache.nodes.latency` is random. */
  cacheLatency: 0x7e3d_52b1,
  /** The service world's renders of a loaded value (`servers.missService`), when random. */
  renderTime: 0x3c6e_f372,
  /** The service times of the servers client tiers run on (`tiers.each[t].servers`), when random: apart from the servers', which stay the same. */
  tierServiceTime: 0x9e37_79b9,
} as const;

/** The source `stream` of the run seeded `seed`. */
export function stream(seed: number, constant: number): () => number {
  return seededRandom((seed ^ constant) >>> 0);
}

/**
 * The steady state a run starts from: a system that has served for a long
 * time holds each value with a remaining freshness spread evenly over the
 * ttl. (A cold start would line all expiries up into a herd that is no part
 * of any incident.) Each call draws one value's remaining freshness, whole
 * ms, at least 1, from the run's prewarm source.
 */
export function remainingFreshness(seed: number, ttlMs: number): () => number {
  const random = stream(seed, STREAMS.prewarm);
  return () => Math.max(1, Math.ceil(random() * ttlMs));
}
