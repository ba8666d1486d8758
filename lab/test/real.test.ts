import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadScenario } from '../src/lab/lab.js';
import { compareVariant } from '../src/lab/judge/fidelity.js';
import { fitScenario } from '../src/lab/real/fit.js';
import { runFidelity } from '../src/lab/real/fidelity-run.js';
import { RealRunError } from '../src/lab/real/real-error.js';
import { checkRealPlan, realPlanProblems } from '../src/lab/real/real-plan.js';
import { verdictClass } from '../src/lab/judge/fidelity.js';
import { type ServiceScenario } from '../src/lab/schema/service.js';

/**
 * The lab against real processes (issue 30): one scenario run in virtual
 * time and for real on this machine, and the two must agree by the bars the
 * fidelity page judges with (item 4). A retry storm in 30 seconds
 * (test/fixtures/real-storm.json: retry-storm fitted with --scale 0.25
 * --time-scale 2, its timeline shortened), one real run per variant; a
 * hung server behind a balancer is real-balancer.test.ts's.
 */
describe('a real run agrees with its simulation: the same verdict, goodput during the trigger within 10 points, recovery within max(3 s, 25 %), amplification within 25 %', () => {
  test('real-storm: naive stuck and damper recovered, both ways, each figure within its bar', async () => {
    const scenario = await loadScenario('test/fixtures/real-storm.json');
    const fidelity = await runFidelity(scenario, { scale: 1, timeScale: 1 }, { seed: 1, runs: 1 });
    for (const variant of ['naive', 'damper'] as const) {
      const v = fidelity.variants[variant]!;
      const row = compareVariant(scenario, v);
      const words = row.figures.map((f) => `${f.figure}: simulated ${JSON.stringify(f.simulated)}, real ${JSON.stringify(f.real)}, ${f.agrees === false ? 'DISAGREES' : 'agrees'}`).join('; ');
      assert.equal(verdictClass(scenario, v.simulated), variant === 'naive' ? 'stuck' : 'recovered', `${variant}'s simulation: ${words}`);
      assert.ok(row.agrees, `${variant}: ${words}`);
    }
  });
});

describe('what the real runner does not build yet is refused before anything starts, in one line naming it', () => {
  test('the shipped incidents with cache nodes, the examples with the tier’s one cache, an operator’s conditional action, and a horizon past 180 s', async () => {
    const discord = (await loadScenario('discord-2019')) as ServiceScenario;
    // Its cache nodes (redis-servers on the ring), its populations' own keys, the degraded nodes and the operators'
    // ejection are built: only its length is refused, and its one fitting passes.
    assert.deepEqual(realPlanProblems(discord), ['discord-2019: runs 960 s, and a real run is at most 180 s: cut it (--duration) or shorten it (--time-scale)']);
    assert.deepEqual(realPlanProblems(fitScenario(discord, { scale: 1, timeScale: 2.5, durationS: 180 })), []);
    // What the cache nodes do not build yet.
    const nodes = { ...discord.cache!.nodes!, connections: 4, latency: { kind: 'exponential' as const, meanMs: 1 } };
    const faults = [...discord.faults, { kind: 'hang-cache', nodes: [0], startS: 200, endS: 210 }, { ...discord.faults[1]!, when: 'unhealthy' }] as ServiceScenario['faults'];
    assert.deepEqual(realPlanProblems({ ...discord, durationS: 180, cache: { ...discord.cache!, nodes }, faults }), [
      'discord-2019: a pool of connections to the cache nodes (cache.nodes.connections) is not run on real processes yet',
      'discord-2019: a cache node round trip drawn per call (cache.nodes.latency: the real round trip stands for a constant one) is not run on real processes yet',
      'discord-2019: the fault faults[2] (hang-cache) is not run on real processes yet',
      "discord-2019: an operator's conditional action (faults[3] (eject-cache).when) is not run on real processes yet",
    ]);
    // checkout's three servers read through the tier's one cache, a process of its own: built, once cut to 180 s. A row's
    // render is a server's work, which that process cannot do for it.
    const checkout = fitScenario(await loadScenario('examples/checkout.json'), { scale: 1, timeScale: 1, durationS: 180 });
    assert.deepEqual(realPlanProblems(checkout), []);
    assert.deepEqual(realPlanProblems({ ...checkout, servers: { ...checkout.servers, missService: { kind: 'constant', ms: 20 } } }), [
      'checkout: the render of a loaded row (servers.missService) behind the tier’s one cache (cache.scope tier without cache.nodes) is not run on real processes yet',
    ]);
    // Two servers on one database, each rendering the pages it loads: built, once fitted to 180 s.
    assert.deepEqual(realPlanProblems(await loadScenario('missourian-2010')), ['missourian-2010: runs 1080 s, and a real run is at most 180 s: cut it (--duration) or shorten it (--time-scale)']);
    const facebook = await loadScenario('facebook-2010');
    assert.match(realPlanProblems(facebook).join('\n'), /facebook-2010: an operator's conditional action \(faults\[1\] \(cut-traffic\)\.when\) is not run on real processes yet/);
    assert.throws(() => checkRealPlan(facebook), (e) => e instanceof RealRunError && /^lab real: facebook-2010: runs 960 s, and a real run is at most 180 s/.test(e.message));
    // Cut to 180 s at time-scale 2, the operator's action (at 400 s) falls outside the run: nothing is refused.
    assert.deepEqual(realPlanProblems(fitScenario(facebook, { scale: 1, timeScale: 2, durationS: 180 })), []);
    const storm = fitScenario(await loadScenario('retry-storm'), { scale: 0.25, timeScale: 2, durationS: 150 });
    assert.deepEqual(realPlanProblems(storm), []);
  });
});

/** The pids whose parent is `pid`, read from /proc. */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .flatMap((d) => {
      try {
        // The field after the command (which may hold spaces, in parentheses) is the state, then the parent's pid.
        const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid ? [Number(d)] : [];
      } catch {
        return [];
      }
    });
}

describe('nothing a real run starts outlives it', () => {
  test('Ctrl-C in the middle of damper lab real: exit 130, and every process it started is gone', async () => {
    const main = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
    const out = mkdtempSync(join(tmpdir(), 'damper-real-cli-'));
    const cli = spawn(process.execPath, [main, 'lab', 'real', 'test/fixtures/real-storm.json', '--runs', '1', '--out', out], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    // The progress line says a real run has begun: its server, tier and users are up.
    await new Promise<void>((resolve, reject) => {
      cli.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        if (/real run 1 of 1 · naive · \d+ of 30 s/.test(stderr)) resolve();
      });
      cli.once('exit', (code) => reject(new Error(`the CLI exited (${code}) before its run began: ${stderr}`)));
    });
    const started = childrenOf(cli.pid!);
    assert.ok(started.length >= 3, `a server, a tier and the users at least, got ${started.length}`);
    const exited = new Promise<number | null>((resolve) => cli.once('exit', (code) => resolve(code)));
    cli.kill('SIGINT');
    assert.equal(await exited, 130, stderr);
    // The group waited for each process to exit before the lab did: none is left, not even as a zombie of ours.
    const left = started.filter((pid) => existsSync(`/proc/${pid}`));
    assert.deepEqual(left, [], 'every process the run started is gone');
  });
});
