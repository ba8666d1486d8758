import type * as IoRedis from 'ioredis';
import type { Cluster, ClusterNode, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import { clockOption, hasMethods, oneOf, optionsObject } from '../config.js';
import { ArgumentError, ConfigError, DamperError, describe } from '../errors.js';
import { systemClock } from '../time/system.js';
import { type Clock } from '../time/clock.js';
import { type LeaseGrant, type SharedBackend, type SharedRead } from './backend.js';
import { ServerClock } from './server-clock.js';
import { requirePeer } from '../peer.js';

// Loaded here, not imported: without ioredis installed (an optional peer), importing damper/redis says so in one line.
const ioredis = requirePeer<typeof IoRedis>('damper/redis', 'ioredis');

/** Options for {@link RedisStore}. Give exactly one of `client` and `connection`. */
export interface RedisStoreOptions {
  /**
   * A client you own (standalone or Cluster). `close()` leaves it open: only
   * the subscriber connection RedisStore duplicated from it is closed.
   */
  client?: Redis | Cluster | undefined;
  /**
   * How to connect: ioredis options for one server, or `{ cluster: nodes }`
   * for Redis Cluster. RedisStore owns the connection; `close()` quits it.
   */
  connection?: RedisOptions | { cluster: ClusterNode[]; options?: ClusterOptions | undefined } | undefined;
  /** First segment of every key and channel name, so several apps can share one Redis. Default `'damper'`. Must not contain `{` or `}`. */
  prefix?: string | undefined;
  /**
   * How a read learns a value's remaining lifetime. Both read it off Redis's
   * clock, never this process's, so processes with skewed clocks agree.
   * - `'server-clock'` (default): each value is written with its expiry
   *   instant on Redis's clock (`TIME`, inside the write's script), and read
   *   with a plain `GET`; the store keeps an estimate of Redis's clock
   *   ({@link ServerClock}, one `TIME` every 10 s) to compare it with. A read
   *   costs Redis one GET (a script costs it several), and the client one
   *   command and one reply. What it trades: the remaining lifetime is right
   *   to within half the round trip of the estimate's best sample (samples
   *   slower than 100 ms are not trusted), and a step of Redis's clock is
   *   seen at the next sync. On Redis Cluster the estimate is of whichever
   *   node answers `TIME`, so it also carries the skew between nodes.
   * - `'pttl'`: a read is a script (GET and PTTL in one round trip), exact,
   *   and values are written as earlier versions wrote them. Use it while a
   *   fleet still runs a version before this option (which reads a stamped
   *   value as corrupt), or on a Cluster whose nodes' clocks you cannot trust.
   *
   * A `'server-clock'` store reads values written either way (an unstamped
   * one costs the script read), so a fleet moves from `'pttl'` to it one
   * process at a time.
   */
  freshness?: 'server-clock' | 'pttl' | undefined;
  /** The local clock the estimate of Redis's clock is kept on. Default `systemClock`; it must advance with real time, as Redis's does. */
  clock?: Clock | undefined;
}

/**
 * What a lease key holds while a load failed and the key backs off. It must
 * never equal a token (a token equal to it is refused), or the holder of such
 * a token could fill over a failure marker.
 */
const FAILED = '!failed';

/** The failure count outlives the marker, so the next failure's backoff grows from it; at least a minute. */
const MIN_FAILURES_TTL_MS = 60_000;

type Freshness = 'server-clock' | 'pttl';

/** A stamped value starts with this, then its expiry in Redis ms and `|`. */
const STAMP = 's';
/** Digits of an expiry stamp, at most (ms since 1970 have 13 until the year 2286). */
const MAX_STAMP_DIGITS = 15;

// One script per atomic operation. Each touches only keys passed in KEYS and
// all of them share one hash tag, so Redis Cluster runs it on one node.
const SCRIPTS = {
  /**
   * KEYS: value. Returns {value, pttl} or nil: the exact read, for the
   * `'pttl'` freshness and for a value without a stamp. A script rather than
   * a GET+PTTL pipeline: one command object and one reply instead of two,
   * and no pipeline bookkeeping (measured in docs/benchmarks.md).
   */
  damperRead: {
    numberOfKeys: 1,
    lua: `local v = redis.call('GET', KEYS[1])
if not v then return false end
return {v, redis.call('PTTL', KEYS[1])}`,
  },
  /** KEYS: lease, failures. ARGV: token, ttl. Returns {granted, isFailed, pttl, failures}. */
  damperAcquire: {
    numberOfKeys: 2,
    lua: `local held = redis.call('GET', KEYS[1])
local failures = tonumber(redis.call('GET', KEYS[2])) or 0
if held then
  return {0, held == '${FAILED}' and 1 or 0, redis.call('PTTL', KEYS[1]), failures}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, 0, 0, failures}`,
  },
  /** KEYS: lease, failures. ARGV: token, backoff, failures, failures ttl. Returns 1 if recorded. */
  damperFail: {
    numberOfKeys: 2,
    lua: `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], '${FAILED}', 'PX', ARGV[2])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
return 1`,
  },
  /** KEYS: lease. ARGV: token. */
  damperRelease: {
    numberOfKeys: 1,
    lua: `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0`,
  },
  /**
   * KEYS: tag mark. ARGV: retention. The mark is the instant on Redis's own
   * clock (TIME, so effects replication, as in {@link setValue}).
   */
  damperMarkTag: {
    numberOfKeys: 1,
    lua: `if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
redis.call('SET', KEYS[1], string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)), 'PX', ARGV[1])
return 1`,
  },
  /** KEYS: tag mark. Returns ms since the mark on Redis's clock, or -1 when there is none (or it is not a number: untrusted bytes). */
  damperTagAge: {
    numberOfKeys: 1,
    lua: `local at = tonumber(redis.call('GET', KEYS[1]))
if not at then return -1 end
local t = redis.call('TIME')
local age = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - at
if age < 0 then return 0 end
return age`,
  },
  damperFill: fillScript('pttl'),
  damperFillStamped: fillScript('server-clock'),
  damperWrite: writeScript('pttl'),
  damperWriteStamped: writeScript('server-clock'),
} as const;

/** KEYS: value, lease, failures. ARGV: token, value, ttl. Returns 1 if stored. */
function fillScript(freshness: Freshness): { numberOfKeys: number; lua: string } {
  return {
    numberOfKeys: 3,
    lua: `if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
${setValue(freshness, 'ARGV[2]', 'ARGV[3]')}
redis.call('DEL', KEYS[2], KEYS[3])
return 1`,
  };
}

/** KEYS: value, lease, failures. ARGV: value, ttl. */
function writeScript(freshness: Freshness): { numberOfKeys: number; lua: string } {
  return {
    numberOfKeys: 3,
    lua: `${setValue(freshness, 'ARGV[1]', 'ARGV[2]')}
redis.call('DEL', KEYS[2], KEYS[3])
return 1`,
  };
}

/**
 * Lua that sets KEYS[1] to `value` for `ttl` ms; with `'server-clock'`,
 * prefixed with {@link STAMP} and its expiry instant on Redis's own clock, the
 * same instant PX sets. TIME in a script that writes needs effects
 * replication: the default since Redis 5, asked for explicitly before it.
 */
function setValue(freshness: Freshness, value: string, ttl: string): string {
  if (freshness === 'pttl') return `redis.call('SET', KEYS[1], ${value}, 'PX', ${ttl})`;
  return `if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local at = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(${ttl}))
redis.call('SET', KEYS[1], '${STAMP}' .. at .. '|' .. ${value}, 'PX', ${ttl})`;
}

/**
 * The expiry instant and the body of a stamped value, or undefined when it is
 * not one (written by `'pttl'`, by an earlier version, or not by damper).
 * Bytes from Redis are untrusted: the stamp is parsed digit by digit and
 * bounded, and anything else is left for the envelope to judge.
 */
function unstamp(raw: string): { expiresAt: number; body: string } | undefined {
  if (raw.charCodeAt(0) !== 115 /* s */) return undefined;
  const end = raw.indexOf('|', 1);
  if (end < 2 || end > MAX_STAMP_DIGITS + 1) return undefined;
  let at = 0;
  for (let i = 1; i < end; i++) {
    const d = raw.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return undefined;
    at = at * 10 + d;
  }
  return { expiresAt: at, body: raw.slice(end + 1) };
}

type ScriptName = keyof typeof SCRIPTS;
type ScriptCall = (...args: (string | number)[]) => Promise<unknown>;

const NEEDS_ESCAPE = /[%{}]/;
const ESCAPES = /[%{}]/g;
const escapeChar = (c: string): string => (c === '%' ? '%25' : c === '{' ? '%7B' : '%7D');

const ignore = (): void => {};

/**
 * The shared tier over Redis or Redis Cluster, through ioredis 5.
 *
 * Each key K lives in three Redis keys, `prefix:{tag}:v` (value), `:l`
 * (lease or failure marker) and `:f` (failure count), where `tag` is K with
 * `%`, `{`, `}` percent-encoded. The braces make `tag` the Redis Cluster hash
 * tag, so the three keys of one K always share a slot: the Lua scripts that
 * update them together are legal on a cluster (no CROSSSLOT) and stay atomic.
 * The encoding keeps the tag brace-free (a brace in K would otherwise end the
 * tag early and split the keys across slots) and injective (two keys never
 * share state).
 *
 * Every operation is one round trip: a script registered with ioredis
 * `defineCommand` (EVALSHA, falling back to EVAL on NOSCRIPT, also per node of
 * a cluster), or a single DEL. Tokens come from the caller; nothing here draws
 * randomness or reads time (principle 8), and nothing sets a timeout: the
 * shared tier above bounds every call with its own timeout and breaker.
 */
export class RedisStore implements SharedBackend {
  private readonly client: Redis | Cluster;
  private readonly ownsClient: boolean;
  private readonly prefix: string;
  private readonly scripts: Record<ScriptName, ScriptCall>;
  /** The fill and write scripts of this store's freshness. */
  private readonly fillScript: ScriptCall;
  private readonly writeScript: ScriptCall;
  /** Lazily created by the first `subscribe`: a connection in subscriber mode can run nothing else. */
  private sub: Redis | Cluster | undefined;
  /** Full channel name → its listeners and the SUBSCRIBE that made it live. */
  private readonly channels = new Map<string, { listeners: Set<(message: string) => void>; interrupted: Set<() => void>; live: Promise<unknown> }>();
  private closing: Promise<void> | undefined;
  /** Redis's clock as this process estimates it; undefined with the `'pttl'` freshness. */
  private readonly serverClock: ServerClock | undefined;

  constructor(storeOptions: RedisStoreOptions) {
    if (storeOptions === undefined) throw new ConfigError('RedisStore needs options: `client` or `connection`');
    const options = optionsObject('RedisStore options', storeOptions);
    const { client, connection } = options;
    if ((client === undefined) === (connection === undefined)) {
      throw new ConfigError('RedisStore needs exactly one of `client` (a Redis or Cluster you own) and `connection` (options to connect with)');
    }
    if (client !== undefined && !hasMethods(client, ['defineCommand', 'on'])) throw new ConfigError('RedisStore `client` must be an ioredis Redis or Cluster');
    if (connection !== undefined) optionsObject('RedisStore `connection`', connection);
    const prefix = options.prefix ?? 'damper';
    if (typeof prefix !== 'string' || prefix.includes('{') || prefix.includes('}')) {
      throw new ConfigError('RedisStore `prefix` must be a string without `{` or `}` (braces would change the Redis Cluster hash tag)');
    }
    this.prefix = prefix;
    const freshness = options.freshness === undefined ? 'server-clock' : oneOf('RedisStore `freshness`', options.freshness, ['server-clock', 'pttl'] as const);
    const clock = options.clock === undefined ? systemClock : clockOption('RedisStore `clock`', options.clock);
    if (client !== undefined) {
      this.client = client;
      this.ownsClient = false;
    } else if (connection !== undefined && 'cluster' in connection) {
      this.client = new ioredis.Cluster(connection.cluster, connection.options);
      this.ownsClient = true;
    } else {
      this.client = new ioredis.Redis(connection ?? {});
      this.ownsClient = true;
    }
    // Connection errors of a client we own reach the shared tier as rejected
    // calls (counted by its breaker); ioredis would also print each reconnect
    // attempt to the console when no 'error' listener exists.
    if (this.ownsClient) this.client.on('error', ignore);

    const scripts: Partial<Record<ScriptName, ScriptCall>> = {};
    for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
      this.client.defineCommand(name, SCRIPTS[name]);
      // defineCommand adds a method ioredis's types cannot know of.
      const call = (this.client as unknown as Record<string, ScriptCall>)[name];
      if (typeof call !== 'function') throw new ConfigError(`ioredis did not define the ${name} command`);
      scripts[name] = call.bind(this.client);
    }
    this.scripts = scripts as Record<ScriptName, ScriptCall>;
    this.fillScript = freshness === 'pttl' ? this.scripts.damperFill : this.scripts.damperFillStamped;
    this.writeScript = freshness === 'pttl' ? this.scripts.damperWrite : this.scripts.damperWriteStamped;
    this.serverClock = freshness === 'pttl' ? undefined : new ServerClock(clock, () => this.client.time().then(timeReply));
  }

  /**
   * One `GET` when the value is stamped and Redis's clock is estimated (the
   * common case with the default freshness); else the exact read script.
   */
  async read(key: string): Promise<SharedRead | undefined> {
    const valueKey = this.keyOf(key, 'v');
    if (this.serverClock === undefined) return this.exactRead(valueKey);
    const raw = await this.client.get(valueKey);
    if (raw === null) return undefined;
    const stamped = unstamp(raw);
    const serverNow = stamped === undefined ? undefined : this.serverClock.now();
    if (stamped === undefined || serverNow === undefined) return this.exactRead(valueKey);
    const ttlMs = stamped.expiresAt - serverNow;
    return ttlMs > 0 ? { value: stamped.body, ttlMs, ttlErrorMs: this.serverClock.errorMs() ?? 0 } : undefined;
  }

  /** GET and PTTL in one script: exact, whatever the value's format. */
  private async exactRead(valueKey: string): Promise<SharedRead | undefined> {
    const reply = await this.scripts.damperRead(valueKey);
    if (!Array.isArray(reply)) return undefined;
    const [raw, pttl] = reply as [unknown, unknown];
    if (typeof raw !== 'string' || typeof pttl !== 'number') return undefined;
    const value = unstamp(raw)?.body ?? raw;
    // -1 (no expiry) cannot happen, damper always sets one; -2 or 0: gone.
    if (pttl === -1) return { value, ttlMs: Number.MAX_SAFE_INTEGER };
    return pttl > 0 ? { value, ttlMs: pttl } : undefined;
  }

  async acquire(key: string, token: string, ttlMs: number): Promise<LeaseGrant> {
    const base = this.baseOf(key);
    const reply = await this.scripts.damperAcquire(`${base}l`, `${base}f`, checkToken(token), duration('ttlMs', ttlMs));
    const [granted, failed, pttl, failures] = acquireReply(reply);
    if (granted === 1) return { granted: true, failures };
    return { granted: false, holder: failed === 1 ? 'failed' : 'loading', ttlMs: pttl === -1 ? Number.MAX_SAFE_INTEGER : Math.max(pttl, 0), failures };
  }

  async fill(key: string, token: string, value: string, ttlMs: number): Promise<boolean> {
    const base = this.baseOf(key);
    const reply = await this.fillScript(`${base}v`, `${base}l`, `${base}f`, checkToken(token), value, duration('ttlMs', ttlMs));
    return reply === 1;
  }

  async fail(key: string, token: string, failures: number, backoffMs: number): Promise<boolean> {
    if (!Number.isSafeInteger(failures) || failures < 0) throw new ArgumentError(`failures must be a non-negative integer, got ${describe(failures)}`);
    const base = this.baseOf(key);
    const backoff = duration('backoffMs', backoffMs);
    const reply = await this.scripts.damperFail(`${base}l`, `${base}f`, checkToken(token), backoff, failures, Math.max(backoff * 4, MIN_FAILURES_TTL_MS));
    return reply === 1;
  }

  async release(key: string, token: string): Promise<void> {
    await this.scripts.damperRelease(this.keyOf(key, 'l'), checkToken(token));
  }

  async write(key: string, value: string, ttlMs: number): Promise<void> {
    const base = this.baseOf(key);
    await this.writeScript(`${base}v`, `${base}l`, `${base}f`, value, duration('ttlMs', ttlMs));
  }

  async remove(key: string): Promise<void> {
    const base = this.baseOf(key);
    await this.client.del(`${base}v`, `${base}l`, `${base}f`);
  }

  async markTag(tag: string, retainMs: number): Promise<void> {
    await this.scripts.damperMarkTag(this.keyOf(tag, 't'), duration('retainMs', retainMs));
  }

  async tagAge(tag: string): Promise<number | undefined> {
    const reply = await this.scripts.damperTagAge(this.keyOf(tag, 't'));
    return typeof reply === 'number' && reply >= 0 ? reply : undefined;
  }

  /**
   * PUBLISH on the command connection. On a cluster any node will do: Redis
   * Cluster forwards a PUBLISH to the subscribers of every node.
   */
  async publish(channel: string, message: string): Promise<void> {
    await this.client.publish(this.channelOf(channel), message);
  }

  /**
   * Subscribes on this store's one subscriber connection, shared by all its
   * channels (a connection in subscriber mode can do nothing else, and one
   * per channel would multiply connections). ioredis re-subscribes every
   * channel after a reconnect, so a subscription survives a Redis restart;
   * messages published while the connection was down are lost, as with any
   * Redis pub/sub.
   *
   * A listener that throws does not stop the other listeners nor break the
   * connection; its error is reported with `process.emitWarning`.
   */
  async subscribe(channel: string, listener: (message: string) => void, interrupted?: () => void): Promise<() => Promise<void>> {
    if (this.closing !== undefined) throw new DamperError('CLOSED', 'RedisStore is closed');
    const name = this.channelOf(channel);
    const sub = this.subscriber();
    let entry = this.channels.get(name);
    if (entry === undefined) {
      entry = { listeners: new Set(), interrupted: new Set(), live: sub.subscribe(name) };
      this.channels.set(name, entry);
    }
    const current = entry;
    // Wrapped so one function subscribed twice is two subscriptions, as on Redis.
    const own = (message: string): void => listener(message);
    const cut = interrupted === undefined ? undefined : (): void => interrupted();
    current.listeners.add(own);
    if (cut !== undefined) current.interrupted.add(cut);
    const drop = async (): Promise<void> => {
      current.listeners.delete(own);
      if (cut !== undefined) current.interrupted.delete(cut);
      if (current.listeners.size > 0 || this.channels.get(name) !== current) return;
      this.channels.delete(name);
      // Commands on one connection run in order, so a later SUBSCRIBE of the
      // same channel still wins over this UNSUBSCRIBE.
      if (this.closing === undefined) await sub.unsubscribe(name);
    };
    try {
      await current.live;
    } catch (error) {
      await drop().catch(ignore);
      throw error;
    }
    let dropped = false;
    return async () => {
      if (dropped) return;
      dropped = true;
      await drop();
    };
  }

  /**
   * Closes the subscriber connection and, when RedisStore created it, the
   * command connection (QUIT: pending replies arrive first). A `client` passed
   * in is left open for its owner.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const sub = this.sub;
      this.sub = undefined;
      this.channels.clear();
      await Promise.all([sub === undefined ? undefined : quit(sub), this.ownsClient ? quit(this.client) : undefined]);
    })();
    return this.closing;
  }

  private subscriber(): Redis | Cluster {
    if (this.sub === undefined) {
      const client = this.client;
      // autoResubscribe and the offline queue are what carry subscriptions
      // across reconnects; force them even if the owner's client turned them off.
      const sub = client.isCluster ? (client as Cluster).duplicate() : (client as Redis).duplicate({ autoResubscribe: true, enableOfflineQueue: true });
      sub.on('error', ignore);
      sub.on('message', (name: string, message: string) => this.deliver(name, message));
      // A standalone connection's close is a gap in every subscription on it
      // (ioredis re-subscribes once reconnected). A Cluster's subscriber
      // connection is ioredis's own and tells nothing: the shared tier finds
      // those gaps by the messages' numbers.
      sub.on('close', () => {
        if (this.closing === undefined && this.sub === sub) this.interrupt();
      });
      this.sub = sub;
    }
    return this.sub;
  }

  /** Tells every subscription that messages may have been lost; a callback that throws is reported, as a listener's. */
  private interrupt(): void {
    for (const [name, entry] of this.channels) for (const cut of [...entry.interrupted]) this.guarded(name, () => cut());
  }

  private deliver(name: string, message: string): void {
    const entry = this.channels.get(name);
    if (entry === undefined) return;
    for (const listener of entry.listeners) this.guarded(name, () => listener(message));
  }

  /** Runs a subscriber's callback: one that throws stops neither the others nor the connection; its error becomes a warning. */
  private guarded(name: string, callback: () => void): void {
    try {
      callback();
    } catch (error) {
      const stack = error instanceof Error ? error.stack : undefined;
      process.emitWarning(`a listener of ${name} threw: ${error instanceof Error ? error.message : String(error)}`, {
        type: 'DamperWarning',
        code: 'DAMPER_LISTENER_ERROR',
        ...(stack === undefined ? {} : { detail: stack }),
      });
    }
  }

  /** `prefix:{tag}:` for `key`; the Redis keys append `v`, `l` or `f` (a key's), or `t` (a tag's mark). */
  private baseOf(key: string): string {
    if (typeof key !== 'string' || key.length === 0) throw new ArgumentError('key must be a non-empty string');
    // Hot path: most keys need no escaping, and a test is cheaper than a replace.
    const tag = NEEDS_ESCAPE.test(key) ? key.replace(ESCAPES, escapeChar) : key;
    return `${this.prefix}:{${tag}}:`;
  }

  private keyOf(key: string, part: 'v' | 'l' | 't'): string {
    return this.baseOf(key) + part;
  }

  private channelOf(channel: string): string {
    return `${this.prefix}:bus:${channel}`;
  }
}

/** Redis `TIME` ([seconds, microseconds], as strings) in ms; a reply of another shape rejects, and the sync is skipped. */
function timeReply(reply: unknown): number {
  if (Array.isArray(reply) && reply.length === 2) {
    const [seconds, micros] = reply.map(Number) as [number, number];
    if (Number.isSafeInteger(seconds) && Number.isSafeInteger(micros) && seconds > 0 && micros >= 0 && micros < 1e6) return seconds * 1000 + micros / 1000;
  }
  throw new Error(`unexpected reply from Redis to TIME: ${JSON.stringify(reply)}`);
}

/** QUIT, or drop the connection if QUIT itself fails (already closed, or never connected). */
async function quit(client: Redis | Cluster): Promise<void> {
  try {
    await client.quit();
  } catch {
    client.disconnect();
  }
}

function checkToken(token: string): string {
  if (typeof token !== 'string' || token.length === 0 || token === FAILED) {
    throw new ArgumentError(`lease token must be a non-empty string other than ${JSON.stringify(FAILED)}`);
  }
  return token;
}

/** A duration for PX: positive and finite; fractions round up, since PX takes whole ms. */
function duration(name: string, ms: number): number {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0) throw new ArgumentError(`${name} must be a positive number of ms, got ${describe(ms)}`);
  return Math.ceil(ms);
}

/** The `{granted, isFailed, pttl, failures}` reply of the acquire script, checked. */
function acquireReply(reply: unknown): [number, number, number, number] {
  if (!Array.isArray(reply) || reply.length !== 4 || !reply.every((n) => typeof n === 'number')) {
    throw new Error(`unexpected reply from Redis to acquire: ${JSON.stringify(reply)}`);
  }
  return reply as [number, number, number, number];
}
