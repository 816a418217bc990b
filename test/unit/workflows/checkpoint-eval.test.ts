import { describe, expect, it } from 'vitest';
import { compilePlan } from '../../../src/plan/compile.js';
import type { StepState } from '../../../src/plan/contracts.js';
import { loadRecipe } from '../../../src/recipe/load.js';
import { iterDirName } from '../../../src/rundir/checkpoints.js';
import { fillIteration } from '../../../src/workflows/checkpoint-eval.js';
import { evalSeries } from '../../../src/views/step-figures.js';

async function sft1() {
  const { recipe } = await loadRecipe('tiny', { sets: ['sft.0.saveInterval=20', 'sft.0.evalEvery=20'] });
  return compilePlan(recipe, { runId: 'r1', projectRoot: '/opt/infir2' }).steps.find((s) => s.id === 'sft.stage1')!;
}

describe('evaluation while training', () => {
  it('compiles an export and one eval step per benchmark, at low CPU priority, as templates of the iteration', async () => {
    const spec = (await sft1()).checkpointEval!;
    expect(spec).toMatchObject({ every: 20, taskQueue: 'infir2-local' });
    expect(spec.steps.map((s) => [s.id, s.kind])).toEqual([['sft.stage1.eval{iteration}.export', 'convert'], ['sft.stage1.eval{iteration}.arith', 'eval']]);
    const [exp, ev] = spec.steps.map((s) => fillIteration(s, 40));
    expect(exp!.command.argv.slice(0, 3)).toEqual(['nice', '-n', '19']);
    expect(exp!.command.env.OMP_NUM_THREADS).toBe('1');
    expect(exp!.command.argv).toContain(`${spec.root}/${iterDirName(40)}`);
    expect(ev!.dependsOn).toEqual(['sft.stage1.eval40.export']);
    expect(ev!.completion).toEqual({ kind: 'files', paths: [expect.stringMatching(/\/sft\.stage1\/evals\/40\/arith\/report\.json$/)] });
    expect(JSON.stringify([exp, ev])).not.toMatch(/\{iteration\}|\{iterDir\}/);
  });

  it('says the scores as a series per benchmark, and a failed evaluation as failed', () => {
    const s = { evals: [
      { iteration: 20, scores: { arith: { accuracy: 0.61 } } },
      { iteration: 40, scores: {}, error: 'export exited 1' },
      { iteration: 62, scores: { arith: { accuracy: 0.855 } } },
    ] } as unknown as StepState;
    expect(evalSeries(s)).toBe('arith acc 61.0 %@20, 85.5 %@62; @40 failed');
    expect(evalSeries({} as StepState)).toBe('');
  });
});
