import { type SharedBackend } from 'damper';
import { Fifo } from './fifo.js';

/**
 * A client's pool of `size` connections to the cache tier (node-redis's
 * isolation pool, a memcached client's `poolSize`): a command takes a free
 * connection or waits for one, first come first served, and holds it until
 * the node answers, even when its caller has given up (a command sent is
 * not recalled). A slow node so keeps the pool dry, and reads queue in the
 * client before they ever reach the node: the wait a pool adds in an
 * outage. The database's pool is `ConnectionPool`.
 */
export class CommandPool {
  private free: number;
  private readonly waiting = new Fifo<() => void>();

  constructor(size: number) {
    if (!(Number.isInteger(size) && size >= 1)) throw new Error(`a command pool needs at least one connection, got ${size}`);
    this.free = size;
  }

  /** Commands waiting for a connection. */
  get queued(): number {
    return this.waiting.size;
  }

  /** Runs `command` on a connection, once one is free. */
  run<T>(command: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const send = (): void => {
        this.free--;
        command().then(
          (value) => (this.release(), resolve(value)),
          (error: unknown) => (this.release(), reject(error)),
        );
      };
      if (this.free > 0) send();
      else this.waiting.push(send);
    });
  }

  private release(): void {
    this.free++;
    const next = this.waiting.shift();
    if (next !== undefined) next();
  }
}

/**
 * A shared-tier backend reached through a {@link CommandPool}: every command
 * waits for a connection; a subscription has a connection of its own, as
 * Redis clients keep one for subscriber mode.
 */
export class PooledBackend implements SharedBackend {
  constructor(
    private readonly inner: SharedBackend,
    private readonly pool: CommandPool,
  ) {}

  read(...args: Parameters<SharedBackend['read']>): ReturnType<SharedBackend['read']> {
    return this.pool.run(() => this.inner.read(...args));
  }

  acquire(...args: Parameters<SharedBackend['acquire']>): ReturnType<SharedBackend['acquire']> {
    return this.pool.run(() => this.inner.acquire(...args));
  }

  fill(...args: Parameters<SharedBackend['fill']>): ReturnType<SharedBackend['fill']> {
    return this.pool.run(() => this.inner.fill(...args));
  }

  fail(...args: Parameters<SharedBackend['fail']>): ReturnType<SharedBackend['fail']> {
    return this.pool.run(() => this.inner.fail(...args));
  }

  release(...args: Parameters<SharedBackend['release']>): ReturnType<SharedBackend['release']> {
    return this.pool.run(() => this.inner.release(...args));
  }

  write(...args: Parameters<SharedBackend['write']>): ReturnType<SharedBackend['write']> {
    return this.pool.run(() => this.inner.write(...args));
  }

  remove(...args: Parameters<SharedBackend['remove']>): ReturnType<SharedBackend['remove']> {
    return this.pool.run(() => this.inner.remove(...args));
  }

  markTag(...args: Parameters<SharedBackend['markTag']>): ReturnType<SharedBackend['markTag']> {
    return this.pool.run(() => this.inner.markTag(...args));
  }

  tagAge(...args: Parameters<SharedBackend['tagAge']>): ReturnType<SharedBackend['tagAge']> {
    return this.pool.run(() => this.inner.tagAge(...args));
  }

  publish(...args: Parameters<SharedBackend['publish']>): ReturnType<SharedBackend['publish']> {
    return this.pool.run(() => this.inner.publish(...args));
  }

  subscribe(...args: Parameters<SharedBackend['subscribe']>): ReturnType<SharedBackend['subscribe']> {
    return this.inner.subscribe(...args);
  }
}
