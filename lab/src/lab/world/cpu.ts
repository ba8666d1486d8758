import { type Clock, type Timer } from 'damper';

/**
 * A web server's processors, shared by every request being served
 * (processor sharing): with `n` requests running on `cores` cores, each
 * progresses at `min(1, cores / n)` of full speed. Throughput stays at what
 * the cores can do, but every request in service slows down with each one
 * added: response time grows with load, and a server with hundreds of
 * workers and no admission control, once overloaded, takes so long over
 * every request that few finish before their client gives up.
 *
 * Exact and cheap: a shared "virtual work" counter advances at the current
 * per-request rate; a request finishes when the counter has advanced by its
 * work. One timer per CPU, re-armed when the set of requests changes.
 */
export class Cpu {
  /** Work, ms, every request running since the start has received so far. */
  private work = 0;
  private since: number;
  // A binary min-heap of (finish work, callback), kept in two parallel arrays.
  private readonly finish: number[] = [];
  private readonly done: (() => void)[] = [];
  private timer: Timer | undefined;

  constructor(
    private readonly clock: Clock,
    private cores: number,
  ) {
    this.since = clock.now();
  }

  /** Requests running now. */
  get running(): number {
    return this.finish.length;
  }

  /** Runs `ms` of work; calls `then` when it is done. */
  run(ms: number, then: () => void): void {
    this.advance();
    this.push(this.work + ms, then);
    this.arm();
  }

  /**
   * The processors change (a capacity drop, or its end): work done so far is
   * kept, the rest goes at the new rate. Fractional cores are a share of a
   * machine; a request never runs faster than one core.
   */
  setCores(cores: number): void {
    this.advance();
    this.cores = cores;
    this.arm();
  }

  private rate(): number {
    const n = this.finish.length;
    return n <= this.cores ? 1 : this.cores / n;
  }

  private advance(): void {
    const now = this.clock.now();
    if (this.finish.length > 0) this.work += (now - this.since) * this.rate();
    this.since = now;
  }

  private arm(): void {
    this.timer?.cancel();
    this.timer = undefined;
    if (this.finish.length === 0) return;
    const wait = Math.max(0, (this.finish[0]! - this.work) / this.rate());
    // Whole milliseconds keep completions on the engine's steps; the counter uses the real elapsed time.
    this.timer = this.clock.setTimer(() => this.tick(), Math.ceil(wait - 1e-9));
  }

  private tick(): void {
    this.timer = undefined;
    this.advance();
    const ready: (() => void)[] = [];
    while (this.finish.length > 0 && this.finish[0]! <= this.work + 1e-6) ready.push(this.pop());
    this.arm();
    for (const then of ready) then();
  }

  private push(f: number, then: () => void): void {
    const h = this.finish;
    const d = this.done;
    let i = h.length;
    h.push(f);
    d.push(then);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p]! <= f) break;
      h[i] = h[p]!;
      d[i] = d[p]!;
      i = p;
    }
    h[i] = f;
    d[i] = then;
  }

  private pop(): () => void {
    const h = this.finish;
    const d = this.done;
    const top = d[0]!;
    const lastF = h.pop()!;
    const lastD = d.pop()!;
    const n = h.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const c = r < n && h[r]! < h[l]! ? r : l;
        if (h[c]! >= lastF) break;
        h[i] = h[c]!;
        d[i] = d[c]!;
        i = c;
      }
      h[i] = lastF;
      d[i] = lastD;
    }
    return top;
  }
}
