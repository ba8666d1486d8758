import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { loadScenario, packageRoot, shippedScenarios } from '../src/lab/lab.js';
import { runSummariesIsolated } from '../src/lab/engine/parallel.js';
import { meanMs } from '../src/lab/engine/delay.js';
import { FIELD_KINDS, fitRoundings, fitScenario, FittingError, MAX_REQUESTS_PER_S, MAX_ROUNDING, MIN_SERVICE_MS, MIN_TIMEOUT_MS, peakRequestsPerS, poolsThatNeverBind } from '../src/lab/real/fit.js';
import { type Fitting } from '../src/lab/real/real-run.js';
import { scenarioJsonSchema } from '../src/lab/schema/index.js';
import { numericFields } from '../src/lab/schema/numeric-fields.js';
import { readRate } from '../src/lab/world/key-sets.js';
import { type ServiceScenario } from '../src/lab/world/service.js';
import { checkScenario, type Scenario } from '../src/lab/world/worlds.js';
import { lookAsideHitRatio } from '../src/lab/world/zipf.js';
import { DRAWN_SEED, seedName } from './support/bars.js';
import { scenarioDoc } from './support/scenario-doc.js';

const retryStorm = (): Promise<ServiceScenario> => loadScenario('retry-storm');
const retryStormParsed = checkScenario(scenarioDoc('retry-storm'), 'retry-storm.json');
const facebookParsed = checkScenario(scenarioDoc('facebook-2010'), 'facebook-2010.json');

/** An example file (lab/examples/), as written. */
function exampleDoc(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(join(packageRoot(), 'examples', `${name}.json`), 'utf8')) as Record<string, unknown>;
}

/** A shipped scenario's or an example's document with `change` applied, parsed. */
function changed(doc: Record<string, unknown>, change: (d: Record<string, unknown> & { faults: Record<string, unknown>[] }) => void): Scenario {
  const copy = structuredClone(doc) as Record<string, unknown> & { faults: Record<string, unknown>[] };
  change(copy);
  return checkScenario(copy, `${String(copy['name'])}.json`);
}

/** The checkout example with its keys given by a hit ratio (the exponent is derived when the file is read). */
const checkoutByHitRatio = (): Scenario => changed(exampleDoc('checkout'), (d) => (d['keys'] = { count: 5000, hitRatio: 0.8 }));

/** The lines of the FittingError that `fit` throws. */
function refusal(fit: () => unknown): string[] {
  try {
    fit();
  } catch (error) {
    assert.ok(error instanceof FittingError, `a FittingError, got ${String(error)}`);
    assert.equal(error.code, 'FITTING');
    return error.message.split('\n');
  }
  assert.fail('the fitting was not refused');
}

describe('every numeric field of a scenario file is fitted by a rule of its own', () => {
  const fields = numericFields(scenarioJsonSchema('service'));

  test('each numeric field of the JSON Schema has a kind in FIELD_KINDS (a new field must say how it scales)', () => {
    const unclassified = [...fields.keys()].filter((pattern) => !Object.hasOwn(FIELD_KINDS, pattern));
    assert.deepEqual(unclassified, []);
  });

  test('each kind in FIELD_KINDS is a numeric field of the schema (no rule for a field that is gone)', () => {
    assert.deepEqual(Object.keys(FIELD_KINDS).filter((pattern) => !fields.has(pattern)), []);
  });

  test('the walk reaches fields in unions, tuples and lists: a fault kind’s factor, a ramp’s points, a tier’s servers', () => {
    for (const pattern of ['faults[].factor', 'faults[].profile[][0]', 'faults[].profile[][1]', 'tiers.each[].servers.workers', 'clients[].backoff.baseMs']) assert.ok(fields.has(pattern), pattern);
    assert.equal(fields.get('servers.workers')?.integer, true);
    assert.equal(fields.get('servers.cores')?.integer, false);
  });
});

describe('scale 1 and time-scale 1 change nothing', () => {
  test('every shipped scenario comes back deep-equal, a new object', async () => {
    for (const name of await shippedScenarios()) {
      const scenario = await loadScenario(name);
      const fitted = fitScenario(scenario, { scale: 1, timeScale: 1 });
      assert.deepStrictEqual(fitted, scenario, name);
      assert.notEqual(fitted, scenario);
    }
  });

  test('so do a closed loop, a balancer, a field axis and a hit ratio (checkout, with its keys by hit ratio)', () => {
    for (const scenario of [checkScenario(exampleDoc('checkout'), 'checkout.json'), checkoutByHitRatio()]) assert.deepStrictEqual(fitScenario(scenario, { scale: 1, timeScale: 1 }), scenario);
  });

  test('the input is left as it was', async () => {
    const scenario = await retryStorm();
    const before = structuredClone(scenario);
    fitScenario(scenario, { scale: 0.25, timeScale: 2, durationS: 150 });
    assert.deepStrictEqual(scenario, before);
  });
});

describe('scale keeps utilisation: rates, capacities and bounds × scale, topology kept', () => {
  test('checkout at scale 0.5', () => {
    const own = checkScenario(exampleDoc('checkout'), 'checkout.json');
    const fitted = fitScenario(own, { scale: 0.5, timeScale: 1 });
    assert.deepEqual(
      fitted.clients.map((c) => [c.rate, c.closed?.users, c.closed?.thinkTime, c.timeoutMs, c.retries]),
      [
        [150, undefined, undefined, 1000, 2],
        [0, 10, { kind: 'exponential', meanMs: 500 }, 2000, 2],
      ],
    );
    assert.deepEqual(fitted.servers, { ...own.servers, workers: 8, maxQueue: 100, cores: 2, slowdownPerInFlight: 0.002 });
    assert.deepEqual(fitted.database, { capacityQps: 60, workers: 2, maxQueue: 250 });
    assert.equal(fitted.keys?.count, 2500);
    assert.deepEqual([fitted.tiers, fitted.balancer, fitted.cache, fitted.faults, fitted.durationS], [own.tiers, own.balancer, own.cache, own.faults, own.durationS]);
    // Each server's cores as busy, each query as long, each key read as often.
    const busy = (s: Scenario): number => (s.clients[0]!.rate * meanMs(s.servers.service)) / (s.servers.count * s.servers.cores! * 1000);
    assert.equal(busy(fitted), busy(own));
    assert.equal(fitted.database!.workers / fitted.database!.capacityQps, own.database!.workers / own.database!.capacityQps);
    assert.equal(readRate(fitted.clients[0]!) / fitted.keys!.count, readRate(own.clients[0]!) / own.keys!.count);
  });

  test('a hit ratio is kept: its exponent is found again for the fitted keys, rates and ttl', () => {
    const own = checkoutByHitRatio();
    const fitted = fitScenario(own, { scale: 0.5, timeScale: 1 });
    const rate = (s: Scenario): number => s.clients.reduce((sum, c) => sum + readRate(c), 0);
    assert.notEqual(fitted.keys!.exponent, own.keys!.exponent);
    assert.ok(Math.abs(lookAsideHitRatio(fitted.keys!.count, fitted.keys!.exponent, rate(fitted), fitted.cache!.ttlS) - 0.8) < 1e-3);
  });
});

describe('time-scale plays the same run faster: durations ÷ k, rates × k', () => {
  test('retry-storm at scale 0.25 (one worker) and time-scale 2, cut to 150 s', async () => {
    const fitted = fitScenario(await retryStorm(), { scale: 0.25, timeScale: 2, durationS: 150 });
    assert.deepEqual([fitted.durationS, fitted.baseline, fitted.objective], [150, { fromS: 15, toS: 60 }, { p99Ms: 250, goodputRatio: 0.95, holdS: 15 }]);
    assert.deepEqual([fitted.clients[0]!.rate, fitted.clients[0]!.timeoutMs, fitted.tiers!.attemptTimeoutMs, fitted.tiers!.each], [100, 1000, 500, [{ retries: 3 }, { retries: 3 }]]);
    assert.deepEqual(fitted.servers, { count: 1, workers: 1, maxQueue: 250, service: { kind: 'constant', ms: 5 }, slowdownPerInFlight: 0.008, admissionLimit: 4 });
    assert.deepEqual(
      fitted.faults.map((f) => [f.startS, f.endS]),
      [[60, 75]],
    );
    // The check's trigger axis is in seconds; its load axis is a factor.
    assert.deepEqual(fitted.check?.axes, [
      { axis: 'load', from: 1, to: 1.5, margin: 0.25 },
      { axis: 'trigger', from: 15, to: 22.5, margin: 7.5 },
    ]);
  });

  test('a closed loop keeps its users and thinks k× shorter: each user’s own rate follows', async () => {
    const own = changed(scenarioDoc('retry-storm'), (d) => (d['clients'] = [{ name: 'users', users: 40, thinkTime: { kind: 'exponential', meanMs: 200 }, timeoutMs: 2000 }]));
    const fitted = fitScenario(own, { scale: 0.5, timeScale: 2 });
    assert.deepEqual(fitted.clients[0]!.closed, { users: 20, thinkTime: { kind: 'exponential', meanMs: 100 } });
  });

  test('at any whole scale and time-scale, the ratios the dynamics depend on are kept', async () => {
    const own = await retryStorm();
    const ratios = (s: Scenario) => ({
      // Utilisation, queueing time in service times, the slowdown at a full queue, timeouts in service times, the trigger in holds.
      load: (s.clients[0]!.rate * meanMs(s.servers.service)) / (1000 * s.servers.workers),
      queue: (s.servers.maxQueue * meanMs(s.servers.service)) / s.servers.workers / s.clients[0]!.timeoutMs,
      slowdown: s.servers.slowdownPerInFlight * s.servers.maxQueue,
      timeout: s.tiers!.attemptTimeoutMs / meanMs(s.servers.service),
      trigger: (s.faults[0]!.endS - s.faults[0]!.startS) / s.objective.holdS,
    });
    const close = (a: Record<string, number>, b: Record<string, number>): boolean => Object.keys(a).every((k) => Math.abs(a[k]! / b[k]! - 1) < 1e-12);
    fc.assert(
      fc.property(fc.constantFrom(0.25, 0.5, 0.75, 1, 1.25, 2), fc.constantFrom(0.5, 1, 2), (scale, timeScale) => {
        // Past that, the retry storm's peak is more than this machine serves (below).
        fc.pre(scale * timeScale <= MAX_REQUESTS_PER_S / peakRequestsPerS(own));
        const fitted = fitScenario(own, { scale, timeScale });
        assert.ok(close(ratios(fitted), ratios(own)), JSON.stringify([scale, timeScale, ratios(fitted), ratios(own)]));
        assert.equal(peakRequestsPerS(fitted), peakRequestsPerS(own) * scale * timeScale);
      }),
    );
  });
});

describe('the horizon is cut after the time-scale, never before the recovery can be judged', () => {
  test('a fault after the cut is dropped, one across it clipped', async () => {
    // Facebook's operators cut traffic at 800 s; Discord's ejected nodes return at 960 s.
    const facebook = fitScenario(await loadScenario('facebook-2010'), { scale: 0.5, timeScale: 1, durationS: 400 });
    assert.deepEqual([facebook.durationS, facebook.faults.map((f) => f.kind)], [400, ['invalid-value']]);
    const discord = fitScenario(await loadScenario('discord-2019'), { scale: 1, timeScale: 1, durationS: 400 });
    assert.deepEqual(
      discord.faults.map((f) => [f.kind, f.startS, f.endS]),
      [
        ['degrade-cache', 120, 300],
        ['eject-cache', 180, 400],
      ],
    );
  });

  test('a load ramp across the cut ends where it has got to', () => {
    const own = changed(scenarioDoc('retry-storm'), (d) =>
      d.faults.push({ kind: 'load-ramp', trigger: false, startS: 100, endS: 700, profile: [[0, 1], [300, 2], [500, 1]], label: 'a ramp' }),
    );
    const ramp = fitScenario(own, { scale: 0.5, timeScale: 1, durationS: 250 }).faults[1]!;
    assert.deepEqual(ramp.kind === 'load-ramp' && [ramp.endS, ramp.profile], [250, [[0, 1], [150, 1.5]]]);
  });

  test('a horizon before the last trigger’s end and a hold after it is refused, saying how long it must be', async () => {
    const lines = refusal(() => fitScenario(retryStormParsed, { scale: 0.25, timeScale: 2, durationS: 80 }));
    assert.deepEqual(lines, ['retry-storm: durationS: 80 s ends before the last trigger’s end (75 s, fitted) and objective.holdS (15 s) after it: give at least 90 s']);
  });
});

describe('whole numbers stay whole: nothing is rounded away unsaid', () => {
  test('a count a scale would split is refused, with the nearest scales that keep every count whole', () => {
    const lines = refusal(() => fitScenario(retryStormParsed, { scale: 0.3, timeScale: 1 }));
    assert.deepEqual(lines, [
      'retry-storm: servers.workers: 4 × scale 0.3 is 1.2, not a whole number: the nearest scales that keep every count whole: 0.25 or 0.5',
      'retry-storm: servers.admissionLimit: 16 × scale 0.3 is 4.8, not a whole number: the nearest scales that keep every count whole: 0.25 or 0.5',
    ]);
  });

  test('a count within MAX_ROUNDING of a whole number is rounded, and the rounding said; one further off is refused', async () => {
    const discord = await loadScenario('discord-2019');
    const third = { scale: 1 / 3, timeScale: 2.5 };
    const fitted = fitScenario(discord, { ...third, durationS: 180 }) as ServiceScenario;
    assert.equal(fitted.database!.workers, 1, 'a count the scale keeps whole is not a rounding');
    assert.equal(fitted.cache!.processEntries, 282);
    assert.equal(fitted.servers.workers, 33_333);
    assert.deepEqual(
      fitRoundings(discord, third).map((r) => [r.field, r.value, Math.round(r.fitted * 1000) / 1000, r.rounded]),
      [
        ['servers.workers', 100_000, 33_333.333, 33_333],
        ['cache.nodes.maxQueue', 1000, 333.333, 333],
        ['cache.processEntries', 845, 281.667, 282],
      ],
    );
    // Every rounding within the bound, and the fitting that keeps every count whole rounds none.
    for (const r of fitRoundings(discord, third)) assert.ok(Math.abs(r.rounded - r.fitted) <= MAX_ROUNDING * r.fitted, r.field);
    assert.deepEqual(fitRoundings(discord, { scale: 1, timeScale: 2.5 }), []);
    // 1.2 workers is 17 % from 1: refused, with the scales that keep the small counts whole.
    assert.deepEqual(refusal(() => fitScenario(discord, { scale: 0.4, timeScale: 2.5, durationS: 180 })), [
      'discord-2019: database.workers: 3 × scale 0.4 is 1.2, not a whole number: the nearest scales that keep every count whole: 0.333 or 0.667',
    ]);
    // A scale given to three figures rounds the database's 0.999 workers to 1, not below its minimum.
    assert.equal(fitScenario(discord, { scale: 0.333, timeScale: 2.5, durationS: 180 }).database!.workers, 1);
  });

  test('a whole duration a time-scale would split is refused, with the nearest time-scales that keep them whole', () => {
    const lines = refusal(() => fitScenario(retryStormParsed, { scale: 0.25, timeScale: 4 }));
    assert.ok(lines.includes('retry-storm: objective.holdS: 30 ÷ time-scale 4 is 7.5, not a whole number: the nearest time-scales that keep every whole duration whole: 2.5 or 5'), lines.join('\n'));
  });

  test('a value past its field’s range is refused', () => {
    const lines = refusal(() => fitScenario(retryStormParsed, { scale: 1, timeScale: 0.001 }));
    assert.ok(lines.includes('retry-storm: clients[0].timeoutMs: 2000 ÷ time-scale 0.001 is 2000000, above its maximum 600000'), lines.join('\n'));
  });

  test('a capacity drop that would keep another share of the workers is refused (the world keeps at least one)', () => {
    const own = changed(scenarioDoc('retry-storm'), (d) => (d.faults = [{ kind: 'capacity-drop', factor: 0.5, startS: 120, endS: 150, label: 'half the workers' }]));
    assert.deepEqual(refusal(() => fitScenario(own, { scale: 0.25, timeScale: 1 })), [
      'retry-storm: faults[0].factor: keeps 2 of 4 workers; at scale 0.25 it would keep 1 of 1, not 0.5: the trigger would not be the same',
    ]);
    assert.equal(fitScenario(own, { scale: 0.5, timeScale: 1 }).servers.workers, 2);
  });

  test('an invalid value must name a key the fitted scenario still has', () => {
    const own = changed(scenarioDoc('facebook-2010'), (d) => (d.faults[0]!['key'] = 'key:700'));
    assert.deepEqual(refusal(() => fitScenario(own, { scale: 0.5, timeScale: 1 })), [
      'facebook-2010: faults[0].key: "key:700" is not one of the fitted keys (key:0 … key:499): name a more popular one, or give a larger scale',
    ]);
  });

  test('a scale or time-scale that is not a positive number, or a horizon out of durationS’s range, is refused', () => {
    assert.deepEqual(refusal(() => fitScenario(retryStormParsed, { scale: 0, timeScale: Number.NaN } as Fitting)), ['retry-storm: scale: must be a number above 0, got 0', 'retry-storm: timeScale: must be a number above 0, got NaN']);
    assert.deepEqual(refusal(() => fitScenario(retryStormParsed, { scale: 1, timeScale: 1, durationS: 0.5 })), ['retry-storm: durationS: 0.5 s is below its minimum 1']);
  });
});

describe('loopback’s fixed costs: the limits past which a fitting is no longer faithful', () => {
  test(`a service time shortened below MIN_SERVICE_MS (${MIN_SERVICE_MS} ms) is refused, saying the largest time-scale`, () => {
    const lines = refusal(() => fitScenario(retryStormParsed, { scale: 0.25, timeScale: 2.5 }));
    assert.deepEqual(lines, [
      'retry-storm: servers.service.ms: 10 ms ÷ time-scale 2.5 is 4 ms, below MIN_SERVICE_MS (5 ms), where loopback HTTP and Node’s timers add about half a millisecond to every request: time-scale at most 2',
    ]);
  });

  test(`a timeout or latency bound shortened below MIN_TIMEOUT_MS (${MIN_TIMEOUT_MS} ms) is refused`, () => {
    const lines = refusal(() => fitScenario(retryStormParsed, { scale: 0.25, timeScale: 10 }));
    assert.ok(lines.some((l) => l.startsWith('retry-storm: objective.p99Ms: 500 ms ÷ time-scale 10 is 50 ms, below MIN_TIMEOUT_MS (100 ms)')), lines.join('\n'));
  });

  test('a scenario’s own duration below a floor is left as written, and refused only when shortened', () => {
    // A web tier of 4 workers at 1 ms: its service time is its capacity.
    const bound = changed(scenarioDoc('facebook-2010'), (d) => ((d['servers'] as Record<string, unknown>)['workers'] = 4));
    assert.deepEqual(fitScenario(bound, { scale: 0.5, timeScale: 1 }).servers.service, { kind: 'constant', ms: 1 });
    assert.match(refusal(() => fitScenario(bound, { scale: 0.5, timeScale: 1.25 })).join('\n'), /servers\.service\.ms: 1 ms ÷ time-scale 1\.25 is 0\.8 ms, below MIN_SERVICE_MS .*: time-scale at most 1$/m);
  });

  test('the service floor holds only where a pool’s workers bind: facebook-2010’s web tier of 100,000 workers at 1 ms never fills', async () => {
    const facebook = fitScenario(await loadScenario('facebook-2010'), { scale: 1, timeScale: 2, durationS: 180 });
    assert.deepEqual([facebook.servers.service, poolsThatNeverBind(facebook)], [{ kind: 'constant', ms: 0.5 }, ['servers']]);
    // 2,000 reads/s, each held at most 0.5 s by the users plus 5 s of the database's full queue: about 11,000 at once, × 2 of margin.
    const justAbove = changed(scenarioDoc('facebook-2010'), (d) => ((d['servers'] as Record<string, unknown>)['workers'] = 22_100));
    const justBelow = changed(scenarioDoc('facebook-2010'), (d) => ((d['servers'] as Record<string, unknown>)['workers'] = 21_900));
    assert.deepEqual(poolsThatNeverBind(fitScenario(justAbove, { scale: 1, timeScale: 2 })), ['servers']);
    assert.deepEqual(poolsThatNeverBind(fitScenario(justBelow, { scale: 1, timeScale: 1 })), []);
    assert.match(refusal(() => fitScenario(justBelow, { scale: 1, timeScale: 2 })).join('\n'), /servers\.service\.ms: 1 ms ÷ time-scale 2 is 0\.5 ms, below MIN_SERVICE_MS/);
  });

  test('on a pool of cores the floor holds a request’s time in service when the pool binds (work × workers ÷ cores): missourian-2010 fits at 2 ms pages', async () => {
    // 150 workers on 10 cores, 5 ms a page: at scale 0.5 and time-scale 2.5, 75 on 5 at 2 ms, 30 ms in service when every worker runs.
    const fitted = fitScenario(await loadScenario('missourian-2010'), { scale: 0.5, timeScale: 2.5, durationS: 180 });
    assert.deepEqual([fitted.servers.service, fitted.servers.workers, fitted.servers.cores], [{ kind: 'constant', ms: 2 }, 75, 5]);
    // As many workers as cores: a late timer holds a whole core, and the whole floor holds.
    const asManyAsCores = changed(scenarioDoc('missourian-2010'), (d) => ((d['servers'] as Record<string, unknown>)['workers'] = 10));
    assert.match(refusal(() => fitScenario(asManyAsCores, { scale: 0.5, timeScale: 2.5, durationS: 180 })).join('\n'), /servers\.service\.ms: 5 ms ÷ time-scale 2\.5 is 2 ms, below MIN_SERVICE_MS \(5 ms\), where .*: time-scale at most 1$/m);
    // Twice as many: half the floor, 2.5 ms, still above 2.
    const twice = changed(scenarioDoc('missourian-2010'), (d) => ((d['servers'] as Record<string, unknown>)['workers'] = 20));
    assert.match(
      refusal(() => fitScenario(twice, { scale: 0.5, timeScale: 2.5, durationS: 180 })).join('\n'),
      /servers\.service\.ms: 5 ms ÷ time-scale 2\.5 is 2 ms, below 2\.5 ms, MIN_SERVICE_MS \(5 ms\) × 0\.5, the share of the cores a request holds when the pool binds, where .*: time-scale at most 2$/m,
    );
  });

  test(`the database’s service time (workers × 1000 ÷ capacityQps) keeps the floor: its queries are its capacity`, async () => {
    // 2 workers at 100 queries/s: 20 ms a query; ÷ 5 is 4 ms.
    assert.deepEqual(refusal(() => fitScenario(facebookParsed, { scale: 1, timeScale: 5 })).filter((l) => l.includes('database')), [
      'facebook-2010: database.capacityQps: makes each query 20 ms of the database’s time, 4 ms ÷ time-scale 5, below MIN_SERVICE_MS (5 ms), where loopback HTTP and Node’s timers add about half a millisecond to every request: time-scale at most 4',
    ]);
    assert.deepEqual(fitScenario(await loadScenario('facebook-2010'), { scale: 1, timeScale: 2 }).database, { capacityQps: 200, workers: 2, maxQueue: 1000 });
  });

  test(`more than MAX_REQUESTS_PER_S (${MAX_REQUESTS_PER_S}) at the retry storm’s peak is refused, saying the largest scale`, () => {
    // 400 calls/s, each up to 4 attempts at the mid tier and 16 at the server.
    assert.deepEqual(refusal(() => fitScenario(retryStormParsed, { scale: 1, timeScale: 2 })), [
      'retry-storm: clients: would send up to 8000 requests/s over loopback HTTP at its peak (every attempt retried and hedged at every tier), above MAX_REQUESTS_PER_S (5000) that this machine serves beside the rest of a run: at time-scale 2, give scale at most 0.625',
    ]);
  });

  test('the peak counts retries through every tier, hedges, a load spike and closed loops', () => {
    const profile = checkScenario(exampleDoc('profile'), 'profile.json');
    // 400 calls/s; the app retries twice (3 attempts at the API), the API three times (12 at the service): 15 requests a call.
    assert.equal(peakRequestsPerS(profile), 400 * 15);
    const hedged = changed(exampleDoc('profile'), (d) => {
      (d['tiers'] as { each: Record<string, unknown>[] }).each[1]!['hedgeAfterMs'] = 100;
      d.faults.push({ kind: 'load-spike', factor: 1.5, startS: 200, endS: 210, trigger: false, label: 'spike' });
    });
    assert.equal(peakRequestsPerS(hedged), 400 * 1.5 * (3 + 24));
    // Checkout's back office: 20 users, each at most one call per 500 ms think and 4 ms × e^(1/8) of service, 9 + 3 requests a call.
    const checkout = checkScenario(exampleDoc('checkout'), 'checkout.json');
    const backOffice = (20 * 1000) / (500 + 4 * Math.exp(0.125));
    assert.ok(Math.abs(peakRequestsPerS(checkout) - (300 + backOffice) * 12) < 1e-9);
  });
});

describe('the fitted simulation keeps the dynamics: retry-storm at one worker and twice the speed', () => {
  // Both in worker threads (under node --test a run in this thread is five times slower); the own scenario is cut to the same watch, 150 s after the trigger.
  const fitted = retryStorm().then((s) => runSummariesIsolated(fitScenario(s, { scale: 0.25, timeScale: 2, durationS: 150 }), 1, ['naive', 'damper']));
  const own = retryStorm().then((s) => runSummariesIsolated(fitScenario(s, { scale: 1, timeScale: 1, durationS: 300 }), 1, ['naive', 'damper']));
  const drawn = retryStorm().then((s) => runSummariesIsolated(fitScenario(s, { scale: 0.25, timeScale: 2, durationS: 150 }), DRAWN_SEED, ['naive', 'damper']));

  test('the same verdicts as the scenario as written: naive stuck, damper recovers by itself', async () => {
    // damper's bar is 30 s after the trigger's end (test/support/bars.ts): 15 s at twice the speed.
    for (const [name, run, bar] of [['fitted', await fitted, 15], ['as written', await own, 30], [`fitted, ${seedName(DRAWN_SEED)}`, await drawn, 15]] as const) {
      assert.equal(run.naive!.recovered, false, `${name}: naive recovered after ${run.naive!.recoverySeconds} s`);
      assert.ok(run.naive!.amplification >= 10, `${name}: naive amplification ${run.naive!.amplification}`);
      assert.equal(run.damper!.recovered, true, `${name}: damper`);
      assert.equal(run.damper!.operatorForced, false, `${name}: damper recovered by itself`);
      assert.ok(run.damper!.recoverySeconds! <= bar, `${name}: damper recovery ${run.damper!.recoverySeconds} s`);
      assert.ok(run.damper!.trigger.efficiency >= 0.9, `${name}: damper served ${run.damper!.trigger.efficiency} of the best possible`);
    }
  });
});
