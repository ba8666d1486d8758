/**
 * `npm run bench:lab`: the lab's benchmark (issue 29, part 6). Times a fixed
 * set (bench/lab/items.ts): every shipped scenario at seed 1, the two
 * examples, the issue's production scenario (bench/lab/production.json) with
 * the lab's settings and with a careless configuration, and a 3 × 3 sweep.
 * Per variant it prints the simulated requests per second
 * (`summary.simulatedRequests` ÷ the wall seconds of that variant's run) and
 * the wall time; it writes bench/lab/results.json and prints a Markdown table
 * for docs/benchmarks.md. A benchmark, not a test: it asserts nothing.
 *
 * The lab and the library are their builds' JavaScript as they ship: tsx
 * loads this script and bench/lab/measure.ts only (see `measureOnce`).
 *
 * Each measurement runs in a fresh process (bench/lab/measure.ts), one at a
 * time, so that one item's heap and compiled code never speed up or slow down
 * another's. Several lab builds and several Node binaries make one run, each
 * item on each in turn, so that a before/after or Node 20/24 comparison is
 * made within one run, on the same machine in the same minutes:
 *
 *   npm run bench:lab -- [--dist DIR]… [--node PATH]… [--only NAME]… [--rounds N] [--cpu-prof DIR]
 *
 * --dist: a built lab (`lab/dist` of a worktree after `npm run build:lab`;
 * default this tree's); --node: a Node binary (default the one running this);
 * --only: an item by its name, or the items whose name holds this text; --rounds: each measurement
 * repeated, the fastest kept (default 1); --cpu-prof: each process writes a
 * V8 CPU profile into DIR (bench/lab/profile-top.ts summarises one), and
 * results.json is left as it was.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ITEMS, type Measured } from './items.js';
import { machine, table } from '../report.js';

const options = parseArgs(process.argv.slice(2));
const HERE = fileURLToPath(new URL('.', import.meta.url));

const fmt = (x: number, digits = 1): string => x.toFixed(digits);
const k = (x: number): string => `${Math.round(x / 1000).toLocaleString('en-US')}k`;

interface Setup {
  readonly node: string;
  readonly nodeVersion: string;
  readonly dist: string;
  /** The build's commit, `*` when its tree had changes. */
  readonly build: string;
}

const setups: Setup[] = options.nodes.flatMap((node) =>
  options.dists.map((dist) => ({ node, nodeVersion: execFileSync(node, ['--version'], { encoding: 'utf8' }).trim(), dist: resolve(dist), build: buildOf(dist) })),
);
// An item's exact name picks it alone (`production`, not `production, careless`); other text, every item whose name holds it.
const picks = (o: string, name: string): boolean => (ITEMS.some((i) => i.name === o) ? name === o : name.includes(o));
const items = ITEMS.filter((item) => options.only.length === 0 || options.only.some((o) => picks(o, item.name)));

const host = machine();
const loadBefore = os.loadavg();
console.log(`damper lab benchmark, ${new Date().toISOString().slice(0, 10)}: ${host.nproc} cores (${host.cpuModel}), ${host.platform} ${host.arch}; load average ${loadBefore.map((l) => l.toFixed(1)).join(' ')}`);
for (const s of setups) console.log(`  ${s.nodeVersion}, lab ${s.build} (${s.dist})`);

interface Row {
  readonly item: string;
  readonly node: string;
  readonly build: string;
  readonly measured: Measured;
}
const rows: Row[] = [];
for (const item of items) {
  for (const setup of setups) {
    let best: Measured | undefined;
    for (let round = 0; round < options.rounds; round++) {
      const measured = measureOnce(setup, JSON.stringify(item), `${item.name}-${setup.nodeVersion}-${setup.build}`.replace(/[^\w.-]+/g, '_'));
      if (best === undefined || measured.wallS < best.wallS) best = measured;
    }
    rows.push({ item: item.name, node: setup.nodeVersion, build: setup.build, measured: best! });
    console.log(`${item.name}, ${setup.nodeVersion}, lab ${setup.build}: ${describe(best!)}`);
  }
}
const loadAfter = os.loadavg();

const markdown = table(
  ['item', 'node', 'lab', 'naive req/s', 'naive s', 'damper req/s', 'damper s', 'wall s', 'verdicts'],
  rows.map(({ item, node, build, measured: m }) => [
    item,
    node,
    build,
    m.variants === undefined ? '' : k(m.variants.naive.requestsPerS),
    m.variants === undefined ? '' : fmt(m.variants.naive.wallS),
    m.variants === undefined ? '' : k(m.variants.damper.requestsPerS),
    m.variants === undefined ? '' : fmt(m.variants.damper.wallS),
    m.cells === undefined ? fmt(m.wallS) : `${fmt(m.wallS)} (${fmt(m.wallS / m.cells)} per cell)`,
    m.verdicts,
  ]),
  [false, false, false, true, true, true, true, true, false],
);
console.log(`\n${markdown}\n\nload average before ${loadBefore.map((l) => l.toFixed(1)).join(' ')}, after ${loadAfter.map((l) => l.toFixed(1)).join(' ')}`);
// A profiled run is slower than the benchmark's: its figures are not written over the benchmark's.
if (options.cpuProf === undefined) writeFileSync(join(HERE, 'results.json'), `${JSON.stringify({ date: new Date().toISOString(), machine: host, loadAverage: { before: loadBefore, after: loadAfter }, setups, rows }, null, 2)}\n`);

function measureOnce(setup: Setup, item: string, profileName: string): Measured {
  const prof = options.cpuProf === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', options.cpuProf, '--cpu-prof-name', `${profileName}.cpuprofile`];
  if (options.cpuProf !== undefined) mkdirSync(options.cpuProf, { recursive: true });
  // tsx maps the bare `damper` to ../src/index.ts by the root tsconfig's paths, even from
  // a built .js file, and its keep-names wrapping slows the library's code (docs/benchmarks.md);
  // lab/tsconfig.build.json has no paths, so `damper` is the built package, as users run it.
  const env = { ...process.env, TSX_TSCONFIG_PATH: join(HERE, '../../lab/tsconfig.build.json') };
  const child = spawnSync(setup.node, [...prof, '--import', 'tsx', join(HERE, 'measure.ts'), setup.dist, item], { encoding: 'utf8', env, stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 24 });
  if (child.status !== 0) throw new Error(`measure.ts exited ${child.status} for ${item} on ${setup.nodeVersion}, lab ${setup.build}`);
  return JSON.parse(child.stdout.trim().split('\n').pop()!) as Measured;
}

function describe(m: Measured): string {
  const variants = m.variants === undefined ? '' : `naive ${k(m.variants.naive.requestsPerS)} req/s (${fmt(m.variants.naive.wallS)} s), damper ${k(m.variants.damper.requestsPerS)} req/s (${fmt(m.variants.damper.wallS)} s), `;
  return `${variants}${fmt(m.wallS)} s${m.cells === undefined ? '' : ` for ${m.cells} cells`}; ${m.verdicts}; result ${m.digest}`;
}

function buildOf(dist: string): string {
  const git = (...args: string[]): string => execFileSync('git', ['-C', dist, ...args], { encoding: 'utf8' }).trim();
  return `${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain', '--', '.', '../src', '../../src').length > 0 ? '*' : ''}`;
}

function parseArgs(args: readonly string[]): { dists: string[]; nodes: string[]; only: string[]; rounds: number; cpuProf: string | undefined } {
  const o = { dists: [] as string[], nodes: [] as string[], only: [] as string[], rounds: 1, cpuProf: undefined as string | undefined };
  for (let i = 0; i < args.length; i += 2) {
    const [flag, value] = [args[i], args[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === '--dist') o.dists.push(value);
    else if (flag === '--node') o.nodes.push(value);
    else if (flag === '--only') o.only.push(value);
    else if (flag === '--rounds') o.rounds = Number(value);
    else if (flag === '--cpu-prof') o.cpuProf = resolve(value);
    else throw new Error(`unknown option ${flag} (see the head of bench/lab/run.ts)`);
  }
  if (o.dists.length === 0) o.dists.push('lab/dist');
  if (o.nodes.length === 0) o.nodes.push(process.execPath);
  if (!(Number.isInteger(o.rounds) && o.rounds >= 1)) throw new Error('--rounds takes a whole number from 1');
  return o;
}
