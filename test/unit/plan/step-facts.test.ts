/**
 * The training facts `infir2 plan` shows, read back from a step's argv: argparse's last-one-wins, data
 * parallelism only where the ranks divide, the iteration a step starts from (a fork's --ckpt-step, the phase
 * before it), and nothing for steps that do not train.
 */
import { describe, expect, it } from 'vitest';
import { flagValue, startOf, stepFacts } from '../../../src/plan/step-facts.js';
import type { PlanStep } from '../../../src/plan/types.js';

function step(over: Partial<PlanStep> & { argv: string[] }): PlanStep {
  const { argv, ...rest } = over;
  return {
    id: 'cpt.stable',
    kind: 'cpt',
    nodes: 1,
    gpus: 8,
    dependsOn: [],
    command: { argv, env: {}, cwd: '/r' },
    progress: { format: 'megatron', totalIterations: 300 },
    completion: { kind: 'checkpoint', dir: '/r/c', iteration: 300 },
    ...rest,
  } as PlanStep;
}

describe('flagValue', () => {
  it('takes the last value, as argparse does', () => {
    expect(flagValue(['x', '--lr', '1e-4', '--lr', '2e-4'], '--lr')).toBe('2e-4');
    expect(flagValue(['x', '--lr'], '--lr')).toBeUndefined();
  });
});

describe('stepFacts', () => {
  const argv = ['torchrun', 'pretrain_gpt.py', '--tensor-model-parallel-size', '4', '--micro-batch-size', '2', '--global-batch-size', '64', '--seq-length', '4096',
    '--lr', '3e-4', '--min-lr', '3e-5', '--lr-decay-style', 'WSD', '--lr-warmup-iters', '100', '--lr-wsd-decay-style', 'linear', '--lr-wsd-decay-iters', '50', '--bf16'];

  it('reads layout, batch, tokens and schedule; bf16 without --fp8-format', () => {
    expect(stepFacts(step({ argv }), 100)).toMatchObject({
      gpus: 8, tp: 4, pp: 1, cp: 1, dp: 2, micro: 2, global: 64, seq: 4096, tokensPerStep: 262144, from: 100, to: 300, tokens: 52428800,
      lr: 'WSD 3e-4, warmup 100, linear decay 50 → 3e-5', precision: 'bf16',
    });
  });

  it('says nothing of data parallelism where TP·PP·CP does not divide the GPUs', () => {
    expect(stepFacts(step({ argv: [...argv, '--pipeline-model-parallel-size', '3'] }), 0)?.dp).toBeNull();
  });

  it('has no facts for a step that does not train', () => {
    expect(stepFacts(step({ argv, kind: 'convert' }), 0)).toBeNull();
  });
});

describe('startOf', () => {
  const warmup = step({ id: 'cpt.warmup', argv: [], completion: { kind: 'checkpoint', dir: '/r/c', iteration: 50 } });
  it('starts a CPT phase where the phase it depends on ends, a fork where its --ckpt-step says, the rest at 0', () => {
    expect(startOf(step({ argv: [], dependsOn: ['cpt.warmup'] }), [warmup])).toBe(50);
    expect(startOf(step({ argv: ['--ckpt-step', '30000'], dependsOn: [] }), [warmup])).toBe(30000);
    expect(startOf(step({ argv: [], kind: 'sft', dependsOn: ['cpt.warmup'] }), [warmup])).toBe(0);
  });
});
