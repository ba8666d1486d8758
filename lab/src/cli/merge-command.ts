import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileProblem } from '../lab/file-problem.js';
import { mergeParts, PART_FILE, readPart, type SweepPart, SweepMergeError } from '../lab/sweep/shard.js';
import { InputError, UsageError } from './args.js';
import { reportCheck } from './check-command.js';
import { type Command } from './command.js';
import { DEFAULT_OUT, writableDir } from './out-dir.js';
import { sweepScreen, writeSweep } from './sweep-command.js';

/**
 * `damper lab merge PARTS…`: the parts that `lab sweep --shard I/N` or
 * `lab check --shard I/N` wrote on N machines, put together (shard.ts) into
 * the sweep.json and sweep.html one run writes, byte for byte; a check's
 * parts give the check's verdict and exit code too.
 */
export const mergeCommand: Command = {
  name: 'lab merge',
  summary: 'puts the parts of a sharded sweep or check together',
  usage: 'lab merge PARTS… [options]',
  about:
    'Reads the parts that lab sweep --shard I/N or lab check --shard I/N wrote (the files, or folders holding sweep.part-I-of-N.json files), checks that they are the N parts of one grid, each once, and writes DIR/sweep.json and DIR/sweep.html, the same bytes one unsharded run writes. Parts of a check print the check’s screen and exit 0 or 1 as lab check does; parts missing, given twice or of another grid, seed or scenario file exit 2 naming them.',
  operands: [['PARTS', 'part files (sweep.part-I-of-N.json) or folders holding them']],
  options: [
    ['out', 'the folder for sweep.html and sweep.json (default lab-out), made and proven writable before reading the parts'],
  ],
  examples: [
    ['damper lab merge parts/ --out lab-out', 'every part in the folder parts/ (a CI job’s downloaded artifacts)'],
    ['damper lab merge a/sweep.part-1-of-2.json b/sweep.part-2-of-2.json', 'two parts by name'],
  ],
  run: (operands, values) => merge(operands, values.out ?? DEFAULT_OUT),
};

/** The part files an operand names: itself, or a folder's sweep.part-I-of-N.json files. */
async function partFiles(operand: string): Promise<string[]> {
  const found = await stat(operand).catch((error: unknown) => {
    throw new InputError(`${operand}: ${fileProblem(error)}`);
  });
  if (!found.isDirectory()) return [operand];
  const names = (await readdir(operand)).filter((n) => PART_FILE.test(n)).sort();
  if (names.length === 0) throw new SweepMergeError(`${operand}: no part files (sweep.part-I-of-N.json) in this folder`);
  return names.map((n) => join(operand, n));
}

async function merge(operands: readonly string[], out: string): Promise<number> {
  if (operands.length === 0) throw new UsageError('lab merge needs the parts: part files (sweep.part-I-of-N.json) or folders holding them');
  const dir = await writableDir(out);
  const files = (await Promise.all(operands.map(partFiles))).flat();
  const parts: { where: string; part: SweepPart }[] = [];
  for (const where of files) {
    const text = await readFile(where, 'utf8').catch((error: unknown) => {
      throw new InputError(`${where}: ${fileProblem(error)}`);
    });
    parts.push({ where, part: readPart(text, where) });
  }
  const { result, check } = mergeParts(parts);
  await writeSweep(dir, result);
  const footer = `merged ${parts.length} ${parts.length === 1 ? 'part' : 'parts'}, ${result.cells.length} cells\nwrote ${join(dir, 'sweep.html')} and ${join(dir, 'sweep.json')}`;
  if (check !== undefined) return reportCheck(result, check, footer);
  process.stdout.write(`${sweepScreen(result, footer)}\n`);
  return 0;
}
