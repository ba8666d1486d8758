import { createRequire } from 'node:module';
import { MissingPeerError } from './errors.js';

/**
 * The optional peer dependencies an entry point loads at run time, with the
 * versions supported: package.json's `peerDependencies` says the same
 * (test/package.test.ts checks they agree). fastify, pg and better-sqlite3
 * are not here: damper uses their types only, and the user hands it their
 * objects.
 */
export const PEERS = {
  ioredis: '^5.3.0',
  undici: '^7.0.0',
  '@opentelemetry/api': '^1.3.0',
} as const;

export type Peer = keyof typeof PEERS;

const require = createRequire(import.meta.url);

/**
 * Loads `peer` for `entry`, synchronously, so the entry keeps working for
 * `require` (a module with top-level await cannot be required) and an
 * absent package is a {@link MissingPeerError} in one line. Each of these
 * peers ships CommonJS, so `require` finds it whoever imports the entry.
 */
export function requirePeer<T>(entry: string, peer: Peer): T {
  try {
    return require(peer) as T;
  } catch (error) {
    throw missingPeer(error, entry, peer);
  }
}

/** `error` as a {@link MissingPeerError} when it says `peer` itself cannot be found (not a file inside it), else as it is. */
export function missingPeer(error: unknown, entry: string, peer: Peer): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : '';
  const notFound = (code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND') && (message.includes(`'${peer}'`) || message.includes(`"${peer}"`));
  return notFound ? new MissingPeerError(entry, peer, PEERS[peer], error) : error;
}
