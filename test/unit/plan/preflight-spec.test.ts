/**
 * What the plan tells each step's preflight: the trainer's own interpreter and environment per backend, the
 * recipe's pins and skips, the checkpoint estimate, srun on every node of a slurm pool; and the recipe's
 * `software.versions` / `software.skipChecks` refused with one line per problem.
 */
import { describe, expect, it } from 'vitest';
import { loadPlan } from '../../../src/cli/recipe-input.js';
import { preflightOf } from '../../../src/plan/preflight-types.js';
import { RecipeError } from '../../../src/recipe/issues.js';
import { loadRecipe } from '../../../src/recipe/load.js';
import { projectRoot } from '../../../src/recipe/project-root.js';

const quiet = { onWarning: () => undefined };
const stepOf = async (ref: string, id: string, sets: string[] = []) => (await loadPlan(ref, { runId: 'x', sets, ...quiet })).steps.find((s) => s.id === id)!;

async function errors(sets: string[]): Promise<string[]> {
  try {
    await loadRecipe('tiny', { sets });
  } catch (err) {
    if (err instanceof RecipeError) return err.issues.filter((i) => i.level === 'error').map((i) => `${i.path}: ${i.message}`);
    throw err;
  }
  throw new Error('expected the recipe to be rejected');
}

describe('the preflight in the plan', () => {
  it('the local trainer: its interpreter, torch pinned as the tiny preset pins it, its data, its checkpoints', async () => {
    const s = await stepOf('tiny', 'cpt.stable');
    expect(s.preflight).toMatchObject({
      launch: [],
      python: `${projectRoot()}/.venv/bin/python`,
      needs: ['torch'],
      versions: { torch: '>=1.13.0a0' },
      traits: [],
      gpus: 0,
      reads: { data: `${projectRoot()}/trainer/data/cpt.jsonl` },
      saves: { dir: `${projectRoot()}/.infir2/runs/x/cpt/checkpoints`, checkpointBytes: 90688 * 14, bound: '50 checkpoints, all kept' },
    });
    // The bound of the directory stable shares with warmup (plan: each directory counted once).
    expect(s.preflight!.saves!.boundBytes).toBe(50 * 90688 * 14);
  });

  it('a retention policy bounds what the disk must hold', async () => {
    const s = await stepOf('tiny', 'cpt.stable', ['cpt.keep.last=2']);
    expect(s.preflight!.saves).toMatchObject({ bound: expect.stringMatching(/^at most \d+ checkpoints at once \(keep last 2, boundaries/) });
  });

  it("Megatron: torchrun's interpreter, the checkout first on sys.path, InfiR2's pins, TE's blockwise FP8", async () => {
    const s = await stepOf('infir2-7b', 'cpt.stable');
    // The probe runs in the trainer's own environment, which the plan holds once (the command's), not twice.
    expect(s.preflight!.env).toBeUndefined();
    expect(preflightOf(s)!.env).toMatchObject({ PYTHONPATH: '/root/Megatron-LM', NVTE_FUSED_ATTN: '1' });
    expect(s.preflight).toMatchObject({
      python: 'python3',
      via: 'torchrun',
      pythonPath: ['/root/Megatron-LM'],
      needs: ['torch', 'transformerEngine', 'megatron'],
      uses: ['numpy', 'flashAttn'],
      versions: { transformerEngine: '==2.4.0, @3cd6870', flashAttn: '==2.7.4.post1', megatron: '==0.14.0', slime: '@8359c9a' },
      traits: ['teFp8'],
      gpus: 8,
    });
    // 7.62 B parameters × 14 bytes: BF16 weights, FP32 master weights and Adam's moments.
    expect(s.preflight!.saves!.checkpointBytes / 1e9).toBeCloseTo(106.6, 0);
  });

  it("slime: the Ray job's runtime env and working directory, not the submitting client's", async () => {
    const s = await stepOf('infir2-7b', 'rl.stage1');
    expect(s.preflight).toMatchObject({
      python: 'python3',
      env: { PYTHONPATH: '/root/Megatron-LM/:/root/slime', NVTE_FP8_BLOCK_SCALING_FP32_SCALES: '1' },
      pythonPath: ['/root/slime'],
      needs: ['torch', 'megatron', 'slime', 'sglang', 'ray'],
    });
    expect(s.command.env).not.toHaveProperty('NVTE_FP8_BLOCK_SCALING_FP32_SCALES');
    expect(s).not.toHaveProperty('runtimeEnv');
  });

  it('an srun launch probes every node with one task each, under its own job name', async () => {
    const s = await stepOf('infir2-7b', 'cpt.stable', ['pools.megatron.launcher=slurm', 'pools.megatron.nodes=2', 'pools.megatron.rdzvEndpoint=head:29400', 'cpt.nodes=2', 'software.srunArgs=[--partition=gpu]']);
    expect(s.preflight!.launch).toEqual(['srun', '--job-name=infir2-x-cpt-stable-a{attempt}-{launch}-preflight', '--nodes=2', '--ntasks-per-node=1', '--gpus-per-node=8', '--label', '--partition=gpu']);
    // The step's own job name stays the one squeue and scancel look for.
    expect(s.command.argv).toContain('--job-name=infir2-x-cpt-stable-a{attempt}-{launch}');
  });

  it('carries the recipe\'s skips with their reasons', async () => {
    const s = await stepOf('tiny', 'cpt.warmup', ['software.skipChecks=[{check: disk, why: "scratch is cleaned nightly"}]']);
    expect(s.preflight!.skip).toEqual([{ check: 'disk', why: 'scratch is cleaned nightly' }]);
  });
});

describe('software.versions and software.skipChecks', () => {
  it('refuse a requirement that is not one, an unknown check, a skip without a reason, an unknown package', async () => {
    expect(await errors(['software.versions.numpy=">= two"'])).toEqual([`software.versions.numpy: 'two' is not a version (expected e.g. 2.4.0, 2.7.4.post1, 12.9), got '>= two'`]);
    const unknown = await errors(['software.skipChecks=[{check: nump, why: x}]']);
    expect(unknown).toHaveLength(1);
    expect(unknown[0]).toMatch(/^software\.skipChecks\.0\.check: unknown check 'nump': expected one of torch, transformerEngine, numpy, .*numpy2-megatron-np-product/);
    expect(await errors(['software.skipChecks=[{check: numpy, why: " "}]'])).toEqual(["software.skipChecks.0.why: say why the check is off, got ''"]);
    expect((await errors(['software.versions.tensorflow=">=2"']))[0]).toMatch(/^software\.versions\.tensorflow: unknown key; expected one of: torch, transformerEngine, numpy/);
  });
});
