/**
 * One measurement of `npm run bench:lab` (bench/lab/run.ts), in a process of
 * its own so that none inherits another's heap or compiled code: runs one
 * item on the lab built in DIST and prints what it measured as one JSON line.
 *
 *   node --import tsx bench/lab/measure.ts DIST ITEM_JSON
 */
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { labDist } from './lab-dist.js';
import { type BenchItem, type Measured, type VariantFigures } from './items.js';

const [dir, itemJson] = process.argv.slice(2);
if (dir === undefined || itemJson === undefined) throw new Error('usage: measure.ts DIST ITEM_JSON');
const item = JSON.parse(itemJson) as BenchItem;
const d = await labDist(dir);
// Bound before any run: a run forbids real time (performance.now throws inside it), and the
// split between the variants is read from inside one, in the progress callback.
const wallNow = performance.now.bind(performance);
const digest = (value: unknown): string => createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 12);

async function measure(): Promise<Measured> {
  if (item.kind === 'scenario') {
    const loaded = await d.lab.loadScenario(item.ref);
    const scenario = item.config === undefined ? loaded : d.damperConfig.withDamperConfig(loaded, item.config);
    const started = wallNow();
    // A run is naive, then damper: the first progress report of damper's run ends naive's time.
    let split: number | undefined;
    const run = await d.lab.runScenario(scenario, item.seed, (variant) => {
      if (variant === 'damper') split ??= wallNow();
    });
    const ended = wallNow();
    const figures = (requests: number, ms: number): VariantFigures => ({ requests, wallS: ms / 1000, requestsPerS: requests / (ms / 1000) });
    return {
      wallS: (ended - started) / 1000,
      variants: {
        naive: figures(run.variants.naive.summary.simulatedRequests, split! - started),
        damper: figures(run.variants.damper.summary.simulatedRequests, ended - split!),
      },
      verdicts: `naive ${run.variants.naive.summary.recoverySeconds ?? 'stuck'}, damper ${run.variants.damper.summary.recoverySeconds ?? 'stuck'}`,
      digest: digest(run),
    };
  }
  const source = await d.lab.loadScenarioSource(item.ref);
  const started = wallNow();
  const result = await d.sweep.runSweep(source, item.grid, { seed: item.seed, runner: 'serial' });
  const wallS = (wallNow() - started) / 1000;
  const stuck = d.results.VARIANTS.map((v) => `${v} ${d.sweep.vulnerableCells(result, v).length} of ${result.cells.length} stuck`).join(', ');
  return { wallS, cells: result.cells.length, verdicts: stuck, digest: digest(result.cells.map((c) => Object.values(c.variants).map((s) => s?.recoverySeconds))) };
}

process.stdout.write(`${JSON.stringify(await measure())}\n`);
