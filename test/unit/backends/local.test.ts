import { projectRoot } from '../../../src/util/paths.js';
import { readFileSync } from 'node:fs';
/**
 * The `local` backend speaks the reference trainer's contract (trainer/README.md): its subcommands, and only
 * the options the README lists for each. The option lists below are copied by hand from that README.
 */
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { compilePlan } from '../../../src/plan/compile.js';
import type { Plan } from '../../../src/plan/types.js';
import { loadRecipe } from '../../../src/recipe/load.js';

const PRECISION = ['--bf16', '--fp8-format', '--fp8-recipe', '--fp8-block-size'];
const README_OPTIONS: Record<string, string[]> = {
  pretrain: [
    '--data-path', '--num-layers', '--hidden-size', '--ffn-hidden-size', '--num-attention-heads', '--num-query-groups', '--seq-length',
    '--max-position-embeddings', '--rotary-base', '--norm-epsilon', '--untie-embeddings-and-output-weights', '--micro-batch-size',
    '--global-batch-size', '--train-iters', '--exit-interval', '--save-interval', '--log-interval', '--eval-interval', '--eval-iters', '--split',
    '--load', '--save', '--ckpt-step', '--pretrained-checkpoint', '--no-load-optim', '--no-load-rng', '--override-opt_param-scheduler',
    '--exit-on-missing-checkpoint', '--finetune', '--lr', '--min-lr', '--lr-decay-style', '--lr-warmup-iters', '--lr-wsd-decay-iters',
    '--lr-wsd-decay-style', '--weight-decay', '--adam-beta1', '--adam-beta2', '--clip-grad', '--init-method-std', '--seed', ...PRECISION,
  ],
  sft: ['--ref-load', '--load', '--save', '--data-path', '--num-epoch', '--global-batch-size', '--micro-batch-size', '--lr', '--min-lr', '--lr-decay-style', '--lr-warmup-iters', '--weight-decay', '--adam-beta2', '--save-interval', '--log-interval', '--seed', ...PRECISION],
  'convert-hf': ['--input-dir', '--output-dir', '--force', '--vocab-size'],
  'convert-fp8': ['--input-bf16-hf-path', '--output-fp8-hf-path', '--block-size', '--force-pow-2-scale'],
  rl: [
    '--hf-checkpoint', '--ref-load', '--load', '--save', '--prompt-data', '--num-rollout', '--rollout-batch-size', '--n-samples-per-prompt',
    '--rollout-max-response-len', '--rollout-temperature', '--eps-clip', '--eps-clip-high', '--kl-loss-coef', '--global-batch-size', '--lr',
    '--lr-decay-style', '--weight-decay', '--adam-beta2', '--save-interval',
    '--log-interval', '--seed', ...PRECISION,
  ],
  eval: ['--model-path', '--data-path', '--benchmark', '--n-samples', '--temperature', '--top-p', '--max-tokens', '--seed', '--output'],
};

const ROOT = '/opt/infir2';
let plan: Plan;
beforeAll(async () => {
  plan = compilePlan((await loadRecipe('tiny')).recipe, { runId: 't1', projectRoot: ROOT });
});
const step = (id: string) => plan.steps.find((s) => s.id === id)!;
const value = (argv: string[], flag: string) => argv[argv.lastIndexOf(flag) + 1];

describe('local backend (trainer/README.md contract)', () => {
  it('runs every stage of the tiny preset through trainer/main.py with the project virtualenv', () => {
    for (const s of plan.steps) {
      expect(s.backend).toBe('local');
      expect(s.command.argv.slice(0, 2)).toEqual([join(ROOT, '.venv/bin/python'), join(ROOT, 'trainer/main.py')]);
      expect(s.gpus).toBe(0);
    }
  });

  it.each(['cpt.warmup', 'cpt.stable', 'cpt.decay', 'sft.stage1', 'sft.stage2', 'convert.hf', 'convert.fp8', 'rl.stage1', 'rl.stage2', 'convert.rl', 'eval.fp8.arith', 'eval.rl.arith'])(
    '%s uses only options the README lists for its subcommand',
    (id) => {
      const s = step(id);
      const [, , sub, ...args] = s.command.argv;
      const allowed = README_OPTIONS[sub!];
      expect(allowed, `subcommand ${sub}`).toBeDefined();
      const used = args.filter((a) => a.startsWith('--'));
      expect(used.filter((f) => !allowed!.includes(f))).toEqual([]);
      for (const argv of s.resume ? [s.resume.argv] : []) expect(argv.slice(3).filter((a) => a.startsWith('--') && !allowed!.includes(a))).toEqual([]);
    },
  );

  it('compiles the CPT lineage as for Megatron: boundaries, exit intervals, ckpt-step resumes', () => {
    const warmup = step('cpt.warmup');
    expect(value(warmup.command.argv, '--exit-interval')).toBe('10');
    expect(value(warmup.command.argv, '--train-iters')).toBe('600');
    expect(warmup.command.argv).not.toContain('--pretrained-checkpoint'); // tiny trains from scratch
    expect(value(step('cpt.stable').command.argv, '--ckpt-step')).toBe('10');
    expect(value(step('cpt.stable').command.argv, '--exit-interval')).toBe('480');
    expect(value(step('cpt.decay').command.argv, '--ckpt-step')).toBe('480');
    expect(value(step('cpt.decay').resume!.argv, '--ckpt-step')).toBe('{iteration}');
    expect(step('cpt.decay').completion).toMatchObject({ kind: 'checkpoint', iteration: 600 });
    expect(warmup.progress).toEqual({ format: 'megatron', totalIterations: 10 });
  });

  it('emulates FP8 with the recipe block size', () => {
    const argv = step('cpt.stable').command.argv;
    expect(value(argv, '--fp8-format')).toBe('e4m3');
    expect(value(argv, '--fp8-block-size')).toBe('32');
    expect(value(step('convert.fp8').command.argv, '--block-size')).toBe('32');
  });

  it('chains SFT → export → RL → eval through the run directory', () => {
    const run = plan.runDir;
    expect(value(step('sft.stage1').command.argv, '--ref-load')).toBe(join(run, 'cpt.decay/checkpoints'));
    expect(value(step('sft.stage2').command.argv, '--ref-load')).toBe(join(run, 'sft.stage1/checkpoints'));
    expect(value(step('sft.stage2').command.argv, '--load')).toBe(join(run, 'sft.stage2/checkpoints'));
    // The trainer counts completed steps: 1 epoch × ⌊rows / 16⌋ (rows counted from the committed data file).
    const rows = readFileSync(join(projectRoot(), 'trainer', 'data', 'sft_stage2.jsonl'), 'utf8').split('\n').filter(Boolean).length;
    const steps = Math.floor(rows / 16);
    expect(steps).toBe(62); // 1000 rows: the tuned recipe's SFT checkpoints are iter_0000062 (docs/local-trainer.md)
    expect(step('sft.stage2').completion).toMatchObject({ iteration: steps });
    expect(value(step('convert.hf').command.argv, '--input-dir')).toBe(join(run, `sft.stage2/checkpoints/iter_${String(steps).padStart(7, '0')}`));
    expect(value(step('rl.stage1').command.argv, '--hf-checkpoint')).toBe(join(run, 'convert.fp8/hf'));
    expect(value(step('rl.stage2').command.argv, '--ref-load')).toBe(join(run, 'rl.stage1/checkpoints'));
    expect(step('rl.stage2').completion).toMatchObject({ iteration: 15 });
    expect(value(step('convert.rl').command.argv, '--input-dir')).toBe(join(run, 'rl.stage2/checkpoints/iter_0000015'));
    expect(value(step('eval.rl.arith').command.argv, '--model-path')).toBe(join(run, 'convert.rl/hf'));
    expect(step('eval.rl.arith').completion).toEqual({ kind: 'files', paths: [join(run, 'eval.rl.arith/report.json')] });
  });

  it('takes the interpreter from the compile options', async () => {
    const p = compilePlan((await loadRecipe('tiny')).recipe, { runId: 't1', projectRoot: ROOT, python: '/usr/bin/python3' });
    expect(p.steps[0]!.command.argv[0]).toBe('/usr/bin/python3');
  });
});
