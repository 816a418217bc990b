import { isAbsolute, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compilePlan, type CompileOptions } from '../../../src/plan/compile.js';
import type { Plan } from '../../../src/plan/types.js';
import { RecipeError } from '../../../src/recipe/issues.js';
import { loadRecipe } from '../../../src/recipe/load.js';
import { embeddedStateDir, projectRoot } from '../../../src/recipe/project-root.js';

const ROOT = '/opt/infir2';

async function planOf(preset: string, sets: string[] = [], opts: Partial<CompileOptions> = {}): Promise<Plan> {
  const { recipe } = await loadRecipe(preset, { sets });
  return compilePlan(recipe, { runId: 'r1', projectRoot: ROOT, ...opts });
}

const ids = (p: Plan) => p.steps.map((s) => s.id);
const step = (p: Plan, id: string) => p.steps.find((s) => s.id === id)!;
const value = (argv: string[], flag: string) => argv[argv.lastIndexOf(flag) + 1];

describe('compilePlan', () => {
  it('compiles the 7B preset to the stable stage ids, in dependency order', async () => {
    const plan = await planOf('infir2-7b');
    expect(ids(plan)).toEqual([
      'cpt.warmup', 'cpt.stable', 'cpt.decay', 'sft.stage1', 'sft.stage2', 'convert.hf', 'convert.fp8',
      'rl.stage1', 'rl.stage2', 'convert.rl', 'eval.aime24', 'eval.aime25', 'eval.gpqa', 'eval.livecodebench',
    ]);
    const seen = new Set<string>();
    for (const s of plan.steps) {
      for (const d of s.dependsOn) expect(seen, `${s.id} depends on ${d}`).toContain(d);
      seen.add(s.id);
    }
  });

  it('emits plain JSON with absolute paths only', async () => {
    const plan = await planOf('infir2-7b');
    expect(JSON.parse(JSON.stringify(plan))).toEqual(plan);
    expect(plan.runDir).toBe(join(embeddedStateDir(), 'runs', 'r1')); // the preset's runDir, under the state directory
    for (const s of plan.steps) {
      expect(isAbsolute(s.command.cwd)).toBe(true);
      expect(s.command.cwd).toBe(join(plan.runDir, s.id));
      for (const p of [...Object.values(s.inputs), ...Object.values(s.outputs)]) expect(isAbsolute(p), `${s.id}: ${p}`).toBe(true);
      if (s.checkpoint) expect(isAbsolute(s.checkpoint.dir)).toBe(true);
      if (s.completion.kind === 'files') for (const p of s.completion.paths) expect(isAbsolute(p)).toBe(true);
    }
  });

  it('takes retries and timeouts from the recipe; config failures are never retried', async () => {
    const plan = await planOf('infir2-7b', ['cpt.retries.crash=7', 'cpt.stallTimeout=20m']);
    expect(step(plan, 'cpt.stable')).toMatchObject({ retries: { crash: 7, hang: 2, oom: 1, preempted: 10, config: 0 }, stallTimeoutSec: 1200 });
    expect(step(plan, 'eval.gpqa').retries.config).toBe(0);
  });

  it('gives every step the log cap of the recipe: 1024 MiB by default, 0 for none', async () => {
    expect(new Set((await planOf('infir2-7b')).steps.map((s) => s.logMaxMB))).toEqual(new Set([1024]));
    expect(new Set((await planOf('tiny', ['logs.maxMB=0'])).steps.map((s) => s.logMaxMB))).toEqual(new Set([0]));
  });

  it('is deterministic for a given run id', async () => {
    expect(await planOf('infir2-7b')).toEqual(await planOf('infir2-7b'));
  });

  it('leaves out the warmup phase when there is none; stable then starts from the base', async () => {
    const plan = await planOf('infir2-7b', ['cpt.warmupIters=0']);
    expect(ids(plan).slice(0, 2)).toEqual(['cpt.stable', 'cpt.decay']);
    const argv = step(plan, 'cpt.stable').command.argv;
    expect(value(argv, '--pretrained-checkpoint')).toBe('/your_checkpoint_path/Qwen2.5-7B_torch_dist');
    expect(argv).not.toContain('--ckpt-step');
    expect(step(plan, 'cpt.stable').dependsOn).toEqual([]);
  });

  it('forks a decay from another run\'s stable checkpoint N: decay only, over N → N + decayIters', async () => {
    const plan = await planOf('infir2-7b', [], { fork: { sourceCheckpointDir: '/runs/old/cpt/checkpoints', iteration: 30000 } });
    expect(ids(plan)[0]).toBe('cpt.decay');
    const decay = step(plan, 'cpt.decay');
    expect(decay.dependsOn).toEqual([]);
    expect(value(decay.command.argv, '--load')).toBe('/runs/old/cpt/checkpoints');
    expect(value(decay.command.argv, '--ckpt-step')).toBe('30000');
    expect(value(decay.command.argv, '--train-iters')).toBe('35000');
    expect(decay.command.argv).toContain('--override-opt_param-scheduler');
    expect(decay.completion).toEqual({ kind: 'checkpoint', dir: join(plan.runDir, 'cpt.decay/checkpoints'), iteration: 35000 });
    expect(value(decay.resume!.argv, '--load')).toBe(join(plan.runDir, 'cpt.decay/checkpoints'));
    expect(step(plan, 'sft.stage1').dependsOn).toEqual(['cpt.decay']);
  });

  it.each([
    [{ sourceCheckpointDir: '/runs/old/cpt/checkpoints', iteration: 36000 }, /iteration 36000 is past the stable phase, which ends at 35000/],
    [{ sourceCheckpointDir: '/runs/old/cpt/checkpoints', iteration: 0 }, /whole number ≥ 1/],
    [{ sourceCheckpointDir: '/runs/old/cpt/checkpoints/iter_0030000', iteration: 30000 }, /not an iter_\* directory/],
    [{ sourceCheckpointDir: 'old/cpt', iteration: 30000 }, /must be an absolute checkpoint root/],
  ])('refuses a fork from %j', async (fork, message) => {
    const { recipe } = await loadRecipe('infir2-7b');
    expect(() => compilePlan(recipe, { runId: 'r1', projectRoot: ROOT, fork })).toThrow(message);
  });

  it('starts SFT from model.base when there is no CPT (SFT + eval only)', async () => {
    const plan = await planOf('infir2-7b', ['cpt=null', 'convert=null', 'rl=null', 'eval.models=[base]']);
    expect(ids(plan)).toEqual(['sft.stage1', 'sft.stage2', 'eval.aime24', 'eval.aime25', 'eval.gpqa', 'eval.livecodebench']);
    expect(value(step(plan, 'sft.stage1').command.argv, '--ref-load')).toBe('/your_checkpoint_path/Qwen2.5-7B_torch_dist');
    expect(step(plan, 'sft.stage1').dependsOn).toEqual([]);
    expect(value(step(plan, 'eval.gpqa').command.argv, '--model-path')).toBe('/path/to/base_models_hf/qwen2.5-7B-Instruct');
    expect(step(plan, 'eval.gpqa').dependsOn).toEqual([]);
  });

  it('names eval steps eval.<model>.<benchmark> when several models are evaluated', async () => {
    const plan = await planOf('infir2-7b', ['eval.models=[fp8, rl]', 'eval.benchmarks.aime25=null', 'eval.benchmarks.gpqa=null', 'eval.benchmarks.livecodebench=null']);
    expect(ids(plan).filter((i) => i.startsWith('eval.'))).toEqual(['eval.fp8.aime24', 'eval.rl.aime24']);
    expect(step(plan, 'eval.fp8.aime24').dependsOn).toEqual(['convert.fp8']);
    expect(value(step(plan, 'eval.rl.aime24').command.argv, '--port')).toBe('8802');
  });

  it('launches Megatron with srun on a Slurm pool and torchrun --standalone on a local one', async () => {
    const slurm = await planOf('infir2-7b', ['pools.megatron.launcher=slurm', 'pools.megatron.nodes=4', 'pools.megatron.rdzvEndpoint=head:29400', 'cpt.nodes=4']);
    // infir2's launcher is srun's task on each node, torchrun its child (it stops the ranks so that they save).
    expect(step(slurm, 'cpt.stable').command.argv.slice(0, 17)).toEqual([
      'srun', '--job-name=infir2-r1-cpt-stable-a{attempt}-{launch}', '--nodes=4', '--ntasks-per-node=1', '--gpus-per-node=8', '--kill-on-bad-exit=1',
      'python3', '-I', '-S', join(ROOT, 'src', 'launcher', 'infir2_launch.py'), '--',
      'torchrun', '--nnodes=4', '--nproc_per_node=8', '--rdzv_endpoint=head:29400', '--rdzv_backend=c10d', '/root/Megatron-LM/pretrain_gpt.py',
    ]);
    expect(step(slurm, 'cpt.stable').nodeLaunchers).toBe(true);
    // squeue finds the launch's job for status; scancel ends it when an attempt fails (a SIGKILLed srun leaves it).
    expect(step(slurm, 'cpt.stable').job).toEqual({
      scheduler: 'slurm',
      name: 'infir2-r1-cpt-stable-a{attempt}-{launch}',
      probe: { argv: ['squeue', '--noheader', '--name=infir2-r1-cpt-stable-a{attempt}-{launch}', '--format=%i|%N'] },
    });
    expect(step(slurm, 'cpt.stable').onStop).toEqual({
      argv: ['scancel', '--name=infir2-r1-cpt-stable-a{attempt}-{launch}'],
      untilGone: { argv: ['squeue', '--noheader', '--name=infir2-r1-cpt-stable-a{attempt}-{launch}', '--format=%i'] },
    });
    expect(step(await planOf('infir2-7b'), 'cpt.stable').job).toBeUndefined();
    const local = await planOf('infir2-7b', ['pools.megatron.launcher=local']);
    expect(step(local, 'cpt.stable').command.argv.slice(0, 5)).toEqual(['torchrun', '--standalone', '--nnodes=1', '--nproc_per_node=8', '/root/Megatron-LM/pretrain_gpt.py']);
    // The worker puts the launcher in front of a command that does not start one per node itself.
    expect(step(local, 'cpt.stable').nodeLaunchers).toBeUndefined();
  });

  it('starts the local trainer\'s pretraining under torchrun, or srun + torchrun, on those pools, and its other stages as one process', async () => {
    const torchrun = await planOf('tiny', ['pools.local.launcher=torchrun', 'pools.local.ranksPerNode=2', 'pools.local.rdzvEndpoint=127.0.0.1:29433', 'software.torchrunArgs=[--redirects=2, --tee=2]', 'cpt.microBatchSize=8']);
    expect(step(torchrun, 'cpt.stable').command.argv.slice(0, 10)).toEqual([
      'torchrun', '--nnodes=1', '--nproc_per_node=2', '--rdzv_endpoint=127.0.0.1:29433', '--rdzv_backend=c10d', '--redirects=2', '--tee=2',
      '--no_python', join(ROOT, '.venv', 'bin', 'python'), join(ROOT, 'trainer', 'main.py'),
    ]);
    expect(step(torchrun, 'cpt.stable').gpus).toBe(0);
    expect(step(torchrun, 'sft.stage1').command.argv[0]).toBe(join(ROOT, '.venv', 'bin', 'python'));
    const slurm = await planOf('tiny', ['pools.local.launcher=slurm', 'pools.local.nodes=2', 'pools.local.rdzvEndpoint=node1:29500', 'cpt.nodes=2', 'cpt.microBatchSize=8']);
    // A CPU pool asks Slurm for no GPUs.
    expect(step(slurm, 'cpt.stable').command.argv.slice(0, 15)).toEqual([
      'srun', '--job-name=infir2-r1-cpt-stable-a{attempt}-{launch}', '--nodes=2', '--ntasks-per-node=1', '--kill-on-bad-exit=1',
      'python3', '-I', '-S', join(ROOT, 'src', 'launcher', 'infir2_launch.py'), '--',
      'torchrun', '--nnodes=2', '--nproc_per_node=1', '--rdzv_endpoint=node1:29500', '--rdzv_backend=c10d',
    ]);
    expect(step(slurm, 'cpt.stable').nodeLaunchers).toBe(true);
    expect(step(slurm, 'cpt.stable').job?.scheduler).toBe('slurm');
    expect(step(slurm, 'cpt.stable').nodes).toBe(2);
    const gpu = await planOf('tiny', ['pools.local.launcher=torchrun', 'pools.local.gpusPerNode=2', 'cpt.microBatchSize=8']);
    expect(step(gpu, 'cpt.stable').gpus).toBe(2);
    expect(step(gpu, 'sft.stage1').gpus).toBe(1);
  });

  it('drops the FP8 flags in bf16, and the FP8 export with it', async () => {
    const plan = await planOf('infir2-7b', ['precision=bf16']);
    expect(step(plan, 'cpt.stable').command.argv).not.toContain('--fp8-format');
    expect(step(plan, 'sft.stage1').command.argv).not.toContain('--fp8-recipe');
    expect(ids(plan)).not.toContain('convert.fp8');
    expect(value(step(plan, 'rl.stage1').command.argv, '--hf-checkpoint')).toBe(join(plan.runDir, 'convert.hf/hf'));
  });

  it('rejects a run id that could leave the run directory', async () => {
    const { recipe } = await loadRecipe('tiny');
    expect(() => compilePlan(recipe, { runId: '../escape', projectRoot: ROOT })).toThrow(RecipeError);
    expect(() => compilePlan(recipe, { runId: 'Run 1', projectRoot: ROOT })).toThrow(/not a valid run id/);
  });
});
