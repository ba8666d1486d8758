import assert from 'node:assert/strict';
import { type Clock, type Timer } from '../time/clock.js';
import { type Called } from './shared-tier.js';

/**
 * Why a cache's `bus` event fired:
 * - `heartbeat`: this process stopped hearing its own heartbeat for
 *   `busTimeout` (`up: false`), or hears it again (`up: true`);
 * - `disconnect`: the store reported this process's subscription
 *   interrupted (its connection closed; Redis re-subscribes on reconnect),
 *   so messages sent meanwhile are lost (`up: false` until the next heartbeat
 *   is heard);
 * - `missed`: a sender's numbered invalidations arrived with a hole in them
 *   (`missed` of them never came: a re-subscription, a Cluster failover, a
 *   client dropped by Redis's output buffer limit, or the sender's own
 *   `PUBLISH` failing), though the bus carries messages (`up` unchanged).
 *
 * On `disconnect` and `missed` every value in memory is made stale: it is
 * served while it is checked against the shared tier, never as fresh.
 */
export type BusCause = 'heartbeat' | 'disconnect' | 'missed';

/** What the bus reports to the shared tier. */
export interface BusHooks {
  /**
   * Another process's message about `key`: filled (`f`), set (`s`), deleted
   * (`d`) or failed (`x`); or tags invalidated (`t`, and `key` is their JSON).
   */
  message(kind: MessageKind, key: string): void;
  /**
   * The bus went down or up (`heartbeat`, `disconnect`), or messages were lost
   * (`disconnect`, `missed`: `missed` is how many, when known).
   */
  changed(up: boolean, cause: BusCause, missed: number | undefined): void;
}

/** The store's publish and subscribe on this cache's channel, each through its breaker and time limit. */
export interface BusTransport {
  publish(message: string): Promise<Called<void>>;
  subscribe(listener: (message: string) => void, interrupted: () => void): Promise<Called<() => Promise<void>>>;
}

/** How the bus is timed: `SharedTierOptions.heartbeat` and `busTimeout`. */
export interface BusSettings {
  /** This process's name on the bus. */
  readonly id: string;
  readonly heartbeatMs: number;
  readonly busTimeout: number;
}

/** What this process knows of another sender: the number of its last invalidation heard, and when it was last heard. */
interface Sender {
  seq: number;
  heardAt: number;
}

/** Senders not heard for this many bus timeouts are forgotten (a process that stopped or left). */
const FORGET_AFTER_TIMEOUTS = 10;

/** What a bus message says: a fill, a set, a delete, a failure, tags invalidated. */
export type MessageKind = 'f' | 's' | 'd' | 'x' | 't';

/** The message kinds that change another process's memory and are numbered: a set (`s`), a delete (`d`), tags invalidated (`t`). */
const NUMBERED = new Set(['s', 'd', 't']);

/**
 * The invalidation bus of one cache: heartbeats, numbered invalidations, and
 * the judgement of whether what other processes said reached this one.
 *
 * Redis pub/sub delivers at most once: a message sent while a subscriber's
 * connection is down (a reconnect, a re-subscribe after a Cluster failover,
 * a client Redis dropped for a full output buffer) is lost without trace,
 * and the deleted value would stay fresh in that process to its ttl. So
 * every sender numbers its sets, deletes and tag invalidations, and every message it sends,
 * heartbeats included, carries the number of its last one: a receiver that
 * sees a number jump knows it missed some, whatever the cause, by the
 * sender's next message at the latest (one heartbeat), and makes every value
 * in memory stale until checked against the shared tier. A subscription the
 * store reports interrupted is treated the same, at once. A heartbeat this
 * process does not hear back for `busTimeout` means the bus is down: values
 * are then fresh for at most `freshWithoutBus` (the cache's rule).
 *
 * Messages: `<kind><id>:<seq>|<key>` (for `t`, the tags' JSON in place of the key). A message without `:<seq>` (an older
 * damper) is applied, and its sender not tracked.
 */
export class InvalidationBus {
  private readonly clock: Clock;
  private readonly transport: BusTransport;
  private readonly hooks: BusHooks;
  private readonly settings: BusSettings;
  private readonly senders = new Map<string, Sender>();
  private up = false;
  private lastHeard = Number.NEGATIVE_INFINITY;
  /** Set and delete messages numbered so far (sent or not). */
  private sent = 0;
  private gapCount = 0;
  private lastGap = Number.NEGATIVE_INFINITY;
  private unsubscribe: (() => Promise<void>) | undefined;
  private subscribing = false;
  private ticker: Timer | undefined;
  private closed = false;

  constructor(clock: Clock, transport: BusTransport, hooks: BusHooks, settings: BusSettings) {
    this.clock = clock;
    this.transport = transport;
    this.hooks = hooks;
    this.settings = settings;
  }

  /** True while this process hears its own heartbeats: invalidations from other processes reach it. */
  get isUp(): boolean {
    return this.up;
  }

  /** Interruptions seen: subscriptions the store reported cut, and holes in a sender's numbering. */
  get gaps(): number {
    return this.gapCount;
  }

  /**
   * When the last interruption was seen, on the clock. A value read from the
   * shared tier by a call that started before it may predate an invalidation
   * this process never got: it is stored stale.
   */
  get lastGapAt(): number {
    return this.lastGap;
  }

  /** Subscribes and starts the heartbeat. */
  start(): void {
    this.tick();
  }

  /** Stops the heartbeat and leaves the bus. */
  async close(): Promise<void> {
    this.closed = true;
    this.ticker?.cancel();
    const unsubscribe = this.unsubscribe;
    this.unsubscribe = undefined;
    if (unsubscribe !== undefined) await unsubscribe().catch(() => {});
  }

  /**
   * Sends `kind` for `key`. A set, delete or tag invalidation takes the next number, sent or
   * not: if it is lost, the receivers see the hole at this process's next
   * message. Resolves to whether the store took it.
   */
  send(kind: MessageKind, key: string): Promise<Called<void>> {
    if (NUMBERED.has(kind)) this.sent++;
    return this.transport.publish(`${kind}${this.settings.id}:${this.sent}|${key}`);
  }

  private onMessage(message: string): void {
    const bar = message.indexOf('|');
    if (bar < 1) return;
    const kind = message[0]!;
    const colon = message.lastIndexOf(':', bar);
    const numbered = colon > 1;
    const origin = message.slice(1, numbered ? colon : bar);
    if (origin === this.settings.id) {
      if (kind === 'h') this.heard();
      return;
    }
    if (numbered) {
      const seq = Number(message.slice(colon + 1, bar));
      if (Number.isSafeInteger(seq) && seq >= 0) this.follow(origin, kind, seq);
    }
    if (kind === 'h') return;
    const key = message.slice(bar + 1);
    if (key.length === 0 || !(kind === 'f' || kind === 's' || kind === 'd' || kind === 'x' || kind === 't')) return;
    this.hooks.message(kind, key);
  }

  /**
   * Checks a sender's numbering: a numbered message (set, delete, tags) should be its last one plus
   * one, any other message its last one. More is a hole: messages lost. A
   * sender first heard sets where its numbering starts here (what it sent
   * before cannot be told from what came before this process listened).
   */
  private follow(origin: string, kind: string, seq: number): void {
    const now = this.clock.now();
    const known = this.senders.get(origin);
    if (known === undefined) {
      this.senders.set(origin, { seq, heardAt: now });
      return;
    }
    known.heardAt = now;
    const expected = NUMBERED.has(kind) ? known.seq + 1 : known.seq;
    // Behind: a message overtaken by a later one (Cluster nodes forward PUBLISH independently). It is applied; it is no hole.
    if (seq <= known.seq) return;
    const missed = seq - expected;
    known.seq = seq;
    if (missed > 0) this.gap('missed', missed);
  }

  /** Messages were lost: every value in memory is stale from now, and reads that began before now store stale. */
  private gap(cause: 'disconnect' | 'missed', missed: number | undefined): void {
    this.gapCount++;
    this.lastGap = this.clock.now();
    if (cause === 'disconnect') this.up = false;
    this.hooks.changed(this.up, cause, missed);
  }

  private heard(): void {
    this.lastHeard = this.clock.now();
    if (!this.up) {
      this.up = true;
      this.hooks.changed(true, 'heartbeat', undefined);
    }
  }

  /** Heartbeat: subscribe if not yet, publish, judge the bus by when our own last heartbeat came back, forget senders long gone. */
  private tick(): void {
    if (this.closed) return;
    const { heartbeatMs, busTimeout } = this.settings;
    this.ticker = this.clock.setTimer(() => this.tick(), heartbeatMs);
    const now = this.clock.now();
    if (this.up && now - this.lastHeard > busTimeout) {
      this.up = false;
      this.hooks.changed(false, 'heartbeat', undefined);
    }
    for (const [origin, sender] of this.senders) if (now - sender.heardAt > FORGET_AFTER_TIMEOUTS * busTimeout) this.senders.delete(origin);
    if (this.unsubscribe === undefined) {
      if (this.subscribing) return;
      this.subscribing = true;
      void this.subscribe();
      return;
    }
    void this.heartbeat();
  }

  private async subscribe(): Promise<void> {
    const done = await this.transport.subscribe(
      (m) => this.onMessage(m),
      () => {
        if (!this.closed) this.gap('disconnect', undefined);
      },
    );
    this.subscribing = false;
    if (!done.ok) return;
    if (this.closed) {
      await done.value().catch(() => {});
      return;
    }
    assert(this.unsubscribe === undefined, 'one subscription per bus');
    this.unsubscribe = done.value;
    await this.heartbeat();
  }

  /** A heartbeat: heard back, it tells this process its subscription works; with its number, it shows others any numbered message of ours they missed. */
  private heartbeat(): Promise<Called<void>> {
    return this.transport.publish(`h${this.settings.id}:${this.sent}|`);
  }
}
