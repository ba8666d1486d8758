/**
 * The operators' hand on the front door (Facebook 2010's `cut-traffic`): it
 * lets every request in, none while operators cut traffic, and a rising
 * share of them while traffic is let back in over a ramp. Which requests of
 * a ramp get in is drawn from a source of its own, drawn only while the door
 * is not wide open.
 */
export class TrafficCut {
  /** The share of arrivals let in: 1, 0 while traffic is cut, rising during a ramp back. */
  private admitted = 1;
  private ramp: { from: number; overMs: number } | undefined;

  constructor(private readonly admission: () => number) {}

  /** Traffic is cut at `t`; with `rampS`, let back in linearly over that long from `t`. */
  cut(t: number, rampMs: number | undefined): void {
    this.admitted = 0;
    this.ramp = rampMs === undefined ? undefined : { from: t, overMs: rampMs };
  }

  /** Moves a ramp on: called once per step. */
  update(t: number): void {
    if (this.ramp === undefined) return;
    this.admitted = this.ramp.overMs === 0 ? 1 : Math.min(1, (t - this.ramp.from) / this.ramp.overMs);
    if (this.admitted === 1) this.ramp = undefined;
  }

  /** Whether the next request is turned away. */
  turnsAway(): boolean {
    return this.admitted < 1 && this.admission() >= this.admitted;
  }
}

