/**
 * Where a lab run spends its time: the functions of a V8 CPU profile
 * (`node --cpu-prof`, e.g. `npm run bench:lab -- --only production --cpu-prof DIR`)
 * with the most self time, summed by function and place, each with its share
 * of the profile's samples.
 *
 *   node --import tsx bench/lab/profile-top.ts FILE.cpuprofile [N]
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const [file, count = '20'] = process.argv.slice(2);
if (file === undefined) throw new Error('usage: profile-top.ts FILE.cpuprofile [N]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const place = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
const self = new Map<string, number>();
let total = 0;
profile.samples.forEach((id, i) => {
  // A sample's time is the delta to the next one's.
  const us = profile.timeDeltas[i + 1] ?? 0;
  const f = place.get(id)!;
  const name = `${f.functionName || '(anonymous)'} ${f.url === '' ? '' : `${basename(f.url)}:${f.lineNumber + 1}`}`.trim();
  self.set(name, (self.get(name) ?? 0) + us);
  total += us;
});
console.log(`${basename(file)}: ${(total / 1e6).toFixed(1)} s sampled`);
for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(count))) {
  console.log(`${((us / total) * 100).toFixed(1).padStart(5)} %  ${(us / 1e6).toFixed(2).padStart(6)} s  ${name}`);
}
