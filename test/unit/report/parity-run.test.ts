/**
 * A parity run read back from its directory (what `infir2 parity --detach` leaves to read later): `report` prints
 * the verdict `parity` would have printed, `status`'s reader finds it, and the run's precision is both.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compilePlan } from '../../../src/plan/compile.js';
import { mergeParityPlans, PARITY_FILE, parityVariants, type ParitySpec } from '../../../src/plan/parity.js';
import { loadRecipe } from '../../../src/recipe/load.js';
import { parityOfRun } from '../../../src/report/parity-of-run.js';
import { runInProcess } from '../cli/run-cli.js';

let dir: string;
let runDir: string;
// Each variant's validation loss at 100, as Megatron prints it every --eval-interval (the stable phase of a
// parity variant ends by --exit-interval: there is no final `on validation set` line).
const LOSS: Record<string, number> = { 'bf16-s1234': 1.0, 'bf16-s1235': 1.01, 'fp8-s1234': 1.008, 'fp8-s1235': 1.006 };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-parity-run-'));
  const { recipe } = await loadRecipe('tiny', { sets: [`runDir=${dir}`, 'sft=null', 'convert=null', 'rl=null', 'eval=null'] });
  const variants = parityVariants([1234, 1235]);
  const base = compilePlan(recipe, { runId: 'p1', projectRoot: process.cwd() });
  const plan = mergeParityPlans('p1', base.runDir, variants.map((variant) => ({ variant, plan: base })));
  runDir = plan.runDir;
  mkdirSync(join(runDir, 'logs'), { recursive: true });
  writeFileSync(join(runDir, 'plan.json'), JSON.stringify(plan));
  writeFileSync(join(runDir, 'recipe.json'), JSON.stringify(recipe));
  const spec: ParitySpec = { stage: 'cpt', iterations: 100, variants };
  writeFileSync(join(runDir, PARITY_FILE), JSON.stringify(spec));
  for (const v of variants) {
    writeFileSync(join(runDir, 'logs', `${v.name}.cpt.stable.log`), ` validation loss at iteration 100 | lm loss value: ${LOSS[v.name]!.toExponential(6)} | lm loss PPL: 2.7E+00 | \n`);
  }
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a parity run read from its files', () => {
  const verdict = 'parity (validation loss at iteration 100): FP8 vs BF16 +0.20 %, BF16 seed-to-seed noise 1.00 % → within noise';

  it('has both precisions', () => {
    const plan = JSON.parse(readFileSync(join(runDir, 'plan.json'), 'utf8')) as { precision: string };
    expect(plan.precision).toBe('bf16+fp8');
  });

  it('`report` prints the verdict and a line per variant, from the periodic validation lines', async () => {
    const r = await runInProcess(['report', runDir, '--no-png']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`${verdict}\n  bf16-s1234     1.000000\n`);
    expect(r.stdout).toContain('  fp8-s1235      1.006000\n');
    expect(readFileSync(join(runDir, 'report', 'index.html'), 'utf8')).toContain('precision <code>bf16+fp8</code>');
  });

  it("is what `status` shows under the step table; other runs' directories are not read", () => {
    expect(parityOfRun(runDir)!.split('\n')[0]).toBe(verdict);
    expect(parityOfRun(join(dir, 'nowhere'))).toBeNull();
  });
});
