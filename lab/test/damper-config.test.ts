import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { InMemorySharedStore, VirtualClock } from 'damper';
import { cacheOptions, DamperConfigError, resolveDamperConfig, withDamperConfig } from '../src/lab/damper-config.js';
import { loadScenario, runScenario } from '../src/lab/lab.js';
import { type Scenario } from '../src/lab/world/worlds.js';

/** A fixture's absolute path: tests run from build/test, fixtures stay in test/fixtures. */
const fixture = (name: string): string => fileURLToPath(new URL(`../../test/fixtures/${name}`, import.meta.url));

/**
 * A shipped scenario cut to 40 s with its first trigger from 15 to 20 s: long
 * enough for every part of the damper variant to be built and used, short
 * enough to run in this thread (the roles' calls are counted here).
 */
async function short(name: string): Promise<Scenario> {
  const s = await loadScenario(name);
  const trigger = s.faults.find((f) => f.trigger)!;
  return { ...s, durationS: 40, baseline: { fromS: 0, toS: 10 }, faults: [{ ...trigger, startS: 15, endS: 20 }] } as Scenario;
}

const roles = (): string[] => ((globalThis as { damperRoles?: string[] }).damperRoles ??= []);

describe('a damper configuration module builds the damper variant (issue 12, part 1)', () => {
  const expected: Record<string, string[]> = {
    'retry-storm': ['admission(0)', 'dependency(0)', 'dependency(1)'],
    'facebook-2010': ['admission(0)', 'cache(0)', 'dependency(0)'],
    'discord-2019': ['admission(0)', 'admission(1)', 'admission(2)', 'admission(3)', 'cache(0)', 'cache(1)', 'cache(2)', 'cache(3)', 'dependency(0)'],
    'missourian-2010': ['admission(0)', 'admission(1)', 'cache(0)', 'cache(1)', 'dependency(0)'],
  };
  for (const [name, calls] of Object.entries(expected)) {
    test(`${name}: the world asks the module for the roles it has`, async () => {
      roles().length = 0;
      const run = await runScenario(withDamperConfig(await short(name), fixture('config/roles.config.mjs')), 1);
      // A restart asks again (a new process builds its guards anew): count each role once.
      assert.deepEqual([...new Set(roles())].sort(), calls);
      assert.ok(run.variants.damper.summary.goodputRatio > 0.5, 'settings close to the lab’s own keep the short run serving');
    });
  }

  test('a scenario file’s damper.config is relative to the file; --damper-config to the working directory', () => {
    const s = { damper: { config: './my.config.mjs' } } as unknown as Scenario;
    assert.equal(resolveDamperConfig(s, '/srv/scenarios/mine.json').damper?.config, '/srv/scenarios/my.config.mjs');
    assert.equal(withDamperConfig(s, 'conf/d.mjs').damper?.config, join(process.cwd(), 'conf/d.mjs'));
  });
});

describe('time and randomness stay virtual in the user’s code too (principle 8)', () => {
  const fails = async (config: string, pattern: RegExp): Promise<void> => {
    const scenario = withDamperConfig(await short('retry-storm'), fixture(config));
    await assert.rejects(runScenario(scenario, 1), (error: unknown) => {
      assert.ok(error instanceof DamperConfigError, `a DamperConfigError, got ${String(error)}`);
      assert.equal(error.file, fixture(config));
      assert.match(error.message, new RegExp(`^damper config ${fixture(config).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: `));
      assert.match(error.message, pattern);
      return true;
    });
  };
  test('Math.random() in a guard of the module, during the run: the error names the module and the line', () => fails('config/math-random.config.mjs', /Math\.random\(\) was called inside a simulated run.*math-random\.config\.mjs:\d+/s));
  test('a damper object built without the clock it was given', () => fails('config/no-clock.config.mjs', /(Date|performance)\.now\(\) was called inside a simulated run.*no-clock\.config\.mjs:4:/s));
  test('the real clock read while building the settings', async () => {
    const scenario = withDamperConfig(await short('facebook-2010'), fixture('config/reads-clock.config.mjs'));
    await assert.rejects(runScenario(scenario, 1), (error: unknown) => error instanceof DamperConfigError && /Date\.now\(\).*reads-clock\.config\.mjs/s.test(error.message));
  });
});

describe('a module that cannot be used is a typed error naming its file', () => {
  const cases: [string, RegExp][] = [
    ['config/throws.config.mjs', /its default export threw: no settings today/],
    ['config/not-options.config.mjs', /admission\(0\) must return an object of AdmissionOptions, got a number/],
    ['config/unknown-role.config.mjs', /unknown role "clients" \(known: dependency, admission, cache\)/],
    ['config/no-default.config.mjs', /its default export must be a function/],
    ['config/missing.config.mjs', /cannot be imported/],
  ];
  for (const [config, pattern] of cases) {
    test(config, async () => {
      const scenario = withDamperConfig(await short('retry-storm'), fixture(config));
      await assert.rejects(runScenario(scenario, 1), (error: unknown) => error instanceof DamperConfigError && error.file === fixture(config) && pattern.test(error.message));
    });
  }
  test('a role that is not a function', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'damper-config-'));
    const file = join(dir, 'role.config.mjs');
    writeFileSync(file, 'export default () => ({ dependency: 3 });\n');
    await assert.rejects(runScenario(withDamperConfig(await short('retry-storm'), file), 1), /damper config .*role\.config\.mjs: dependency must be a function, got a number/);
  });
  test("a role of an earlier release (client, balancer) is named, with what took its place", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'damper-config-'));
    const file = join(dir, 'old.config.mjs');
    writeFileSync(file, 'export default () => ({ client: () => null });\n');
    await assert.rejects(runScenario(withDamperConfig(await short('retry-storm'), file), 1), /role "client" is gone: .*dependency\(tier\)/);
  });
});

describe('cacheOptions: the user’s settings over the lab’s, the world’s over both', () => {
  const store = new InMemorySharedStore({ clock: new VirtualClock() });
  const settings = { cache: () => ({ ttl: 5, shared: { timeout: 50, namespace: 'theirs', store: new InMemorySharedStore({ clock: new VirtualClock() }) } }) };
  test('where the world has a shared tier, the user’s timeout applies to it; its store and namespace stay the world’s', () => {
    const clock = new VirtualClock();
    const o = cacheOptions(settings, 0, { ttl: 1 }, { clock, shared: { store, namespace: 'lab' } });
    assert.equal(o.ttl, 5);
    assert.equal(o.clock, clock);
    assert.equal(o.shared?.timeout, 50);
    assert.equal(o.shared?.store, store);
    assert.equal(o.shared?.namespace, 'lab');
  });
  test('where it has none, the user’s shared tier has no place', () => {
    assert.equal(cacheOptions(settings, 0, { ttl: 1 }, { clock: new VirtualClock() }).shared, undefined);
  });
});
