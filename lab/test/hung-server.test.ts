import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { seededRandom, VirtualClock } from 'damper';
import { answerOf } from '../src/lab/world/service-answers.js';
import { damperService } from '../src/lab/world/service-damper.js';
import { type Outcome, Server } from '../src/lab/world/service-server.js';
import { testScenario } from './support/scenario-doc.js';

/**
 * One server of 2 workers at 20 ms; damper's admission lets 1 request in at
 * once and queues 1 more (its limiter), and the server's own queue holds 1:
 * a third request at once is refused, by whichever part of the process
 * stands in front. Users give up at 5 s.
 */
const scenario = testScenario('hung', {
  durationS: 10,
  baseline: { fromS: 0, toS: 5 },
  objective: { p99Ms: 500, goodputRatio: 0.95, holdS: 5 },
  clients: [{ name: 'users', rate: 1, timeoutMs: 5000 }],
  servers: { count: 1, workers: 2, maxQueue: 1, admissionLimit: 1, service: { kind: 'constant', ms: 20 } },
  // The file needs a trigger; these tests hang the server themselves.
  faults: [{ kind: 'hang', server: 0, startS: 1, endS: 2, label: 'a hang' }],
});

/** damper's server, hung from 0: `calls` calls sent at once through the users' `Dependency`, each settling into `ended` (when, and how). */
function damperAtHungServer(calls: number) {
  const clock = new VirtualClock({ seed: 1 });
  const server = new Server(clock, scenario.servers, seededRandom(1), undefined);
  server.hung = true;
  const { send, close } = damperService(clock, [server], scenario, {}, () => () => {});
  const ended: { readonly at: number; readonly outcome: string }[] = [];
  for (let i = 0; i < calls; i++) {
    void send('key:0', 'normal', 5000).then(
      (a) => ended.push({ at: clock.now(), outcome: a.outcome }),
      (error: unknown) => ended.push({ at: clock.now(), outcome: answerOf(error).outcome }),
    );
  }
  return { clock, server, ended, close };
}

describe('a hung process answers nothing, its admission neither', () => {
  test('damper: what the admission would shed or queue waits for the caller’s deadline, as a SIGSTOPped process makes it wait', async () => {
    const { clock, ended, close } = damperAtHungServer(3);
    await clock.advance(4999);
    // The old model shed the third at once (a 503 from a stopped process) and the second at its queue's timeout.
    assert.deepEqual(ended, []);
    await clock.advance(1);
    assert.deepEqual(ended, [0, 1, 2].map(() => ({ at: 5000, outcome: 'error' })));
    close();
  });

  test('damper: when the hang ends the process reads what it held, in order, and only then sheds what it has no room for', async () => {
    const { clock, server, ended, close } = damperAtHungServer(3);
    await clock.advance(1000);
    server.hung = false;
    await clock.advance(0);
    // The first is admitted, the second queues behind it, the third finds no room: shed now, not before.
    assert.deepEqual(ended, [{ at: 1000, outcome: 'shed' }]);
    await clock.advance(100);
    assert.deepEqual(ended.slice(1), [
      { at: 1020, outcome: 'ok' },
      { at: 1040, outcome: 'ok' },
    ]);
    close();
  });

  test('damper: a restart closes the connection of every request it held, admitted or not, at once', async () => {
    const { clock, server, ended, close } = damperAtHungServer(3);
    await clock.advance(1000);
    server.restart();
    await clock.advance(0);
    assert.deepEqual(ended, [0, 1, 2].map(() => ({ at: 1000, outcome: 'refused' })));
    close();
  });

  test('naive: a hung server refuses nothing, however full its queue; it reads its requests when the hang ends', async () => {
    const clock = new VirtualClock({ seed: 1 });
    const server = new Server(clock, { ...scenario.servers, workers: 1 }, seededRandom(1), undefined);
    server.hung = true;
    const ended: { readonly at: number; readonly outcome: Outcome }[] = [];
    for (let i = 0; i < 3; i++) server.submit({ key: 'key:0', priority: 'normal', done: (outcome) => ended.push({ at: clock.now(), outcome }) });
    await clock.advance(1000);
    // The old model queued the second and refused the third at once: a stopped process refusing.
    assert.deepEqual(ended, []);
    server.hung = false;
    await clock.advance(100);
    assert.deepEqual(ended, [
      { at: 1000, outcome: 'refused' },
      { at: 1020, outcome: 'ok' },
      { at: 1040, outcome: 'ok' },
    ]);
  });
});
