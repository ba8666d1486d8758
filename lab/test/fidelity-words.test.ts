import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { compareVariant, type NumberComparison, type VerdictComparison } from '../src/lab/judge/fidelity.js';
import { barWords, fidelityLines, figureValue, realWords } from '../src/lab/judge/fidelity-words.js';
import { type Fidelity } from '../src/lab/real/real-run.js';
import { fidelityFixture, withSummary } from './fixtures/fidelity.js';

/** The fixture with damper's third real run healthy again 9 s after the trigger, where the simulation was at once. */
function lateDamper(): Fidelity {
  const f = fidelityFixture();
  const damper = f.variants.damper!;
  return { ...f, variants: { ...f.variants, damper: { ...damper, real: [damper.real[0]!, damper.real[1]!, withSummary(damper.real[2]!, { recoverySeconds: 9 })] } } };
}

describe('the terminal table', () => {
  test('a heading, then one line per variant and figure, columns aligned', () => {
    const lines = fidelityLines(fidelityFixture());
    assert.equal(lines[0], 'damper lab real retry-storm, seed 1: the simulation against 3 real runs per variant (fitted to this machine: scale 0.5, durations ÷ 13)');
    const header = lines[2]!;
    const rows = lines.slice(4, -2);
    assert.equal(rows.length, 2 * 6, 'naive and damper, six figures each');
    for (const column of ['simulated', 'real: median [min–max]', 'bar', 'agree']) {
      const at = header.indexOf(column);
      assert.ok(at > 0, column);
      // Each row's cell in that column starts where the header's does: after two spaces.
      for (const row of rows) if (row.length > at) assert.equal(row.slice(at - 2, at), '  ', `${column} in: ${row}`);
    }
    assert.match(rows[0]!, /^naive +verdict +stuck +stuck ×3 +the same in every run +✓ 3\/3$/);
    assert.match(rows[2]!, /^naive +recovery +never +never \[never–never\] +never, as simulated +✓ 3\/3$/);
    assert.match(rows[5]!, /^naive +p99 latency +1969 ms +1972 ms \[1972 ms–1976 ms\] +not judged$/, 'a figure shown only: no mark');
    assert.equal(lines.at(-1), 'The simulation and the real runs agree on every judged figure.');
  });

  test('a run outside the bar: ✗ with how many runs agree, and the last line names the variant', () => {
    const lines = fidelityLines(lateDamper());
    const recovery = lines.find((l) => l.startsWith('damper') && l.includes('recovery'))!;
    assert.match(recovery, /^damper +recovery +0 s +0 s \[0 s–9 s\] +±3 s \(max\(3 s, 25%\)\) +✗ 2\/3$/);
    assert.match(lines.find((l) => l.startsWith('damper') && l.includes('verdict'))!, /stayed healthy ×2, recovered ×1 .* ✗ 2\/3$/);
    assert.equal(lines.at(-1), 'They disagree for damper: one of the two is wrong, the model or the real setup.');
  });
});

describe('figures in words', () => {
  test('each figure in its own notation', () => {
    assert.equal(figureValue('triggerGoodput', 0.4123), '41.2%');
    assert.equal(figureValue('recoverySeconds', 12), '12 s');
    assert.equal(figureValue('recoverySeconds', null), 'never');
    assert.equal(figureValue('amplification', 12.4), '12×');
    assert.equal(figureValue('peakOriginQps', 17.25), '17.3 q/s');
    assert.equal(figureValue('p99Ms', 0), '<1 ms');
    assert.equal(figureValue('verdict', 'operator-forced'), 'operator-forced');
  });

  test('the bar, computed around the simulated value', () => {
    const f = lateDamper();
    const row = compareVariant(f.scenario, f.variants.naive!);
    const fig = (name: string): NumberComparison | VerdictComparison => row.figures.find((c) => c.figure === name)!;
    assert.equal(barWords(fig('triggerGoodput')), '±10 points');
    assert.equal(barWords(fig('recoverySeconds')), 'never, as simulated');
    assert.equal(barWords({ ...(fig('recoverySeconds') as NumberComparison), simulated: 40 }), '±10 s (max(3 s, 25%))');
    assert.equal(barWords(fig('amplification')), '±25%');
    assert.equal(barWords({ ...(fig('amplification') as NumberComparison), figure: 'peakOriginQps' }), '±25% (at least 1 q/s)');
    assert.equal(barWords(fig('errorRate')), 'not judged');
  });

  test('one real run: its value alone, no spread', () => {
    const f = fidelityFixture();
    const naive = f.variants.naive!;
    const row = compareVariant(f.scenario, { ...naive, real: [naive.real[0]!] });
    assert.equal(realWords(row.figures.find((c) => c.figure === 'recoverySeconds')!), 'never');
    assert.equal(realWords(row.figures[0]!), 'stuck ×1');
  });
});
