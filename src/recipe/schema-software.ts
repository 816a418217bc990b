/**
 * The recipe's `software:` section: where the external software lives on the workers, the versions a step's
 * environment must have, and the preflight checks a recipe turns off (src/preflight/ runs them before every
 * attempt; `infir2 doctor` from a shell).
 */
import { z } from 'zod';
import { path } from './fields.js';
import { KNOWN_BAD } from './known-bad.js';
import { CHECK_NAMES, PINNABLE, type Pinnable } from './software-checks.js';
import { parseRequirement } from './version-spec.js';

const requirement = () =>
  z.string().superRefine((text, ctx) => {
    const r = parseRequirement(text);
    if (typeof r === 'string') ctx.addIssue({ code: 'custom', message: r });
  });

const PIN_MEANING: Record<Pinnable, string> = {
  torch: 'torch, as the interpreter that runs the step imports it',
  transformerEngine: 'TransformerEngine (`transformer_engine`); a wheel built from git carries its commit (`2.4.0+3cd6870`), so `@3cd6870` checks it',
  numpy: 'NumPy',
  flashAttn: 'flash-attn (`flash_attn`)',
  megatron: 'Megatron core, from `megatron/core/package_info.py` of the checkout on `PYTHONPATH` (or the `megatron-core` package); `@<commit>` checks the checkout\'s git HEAD',
  slime: 'slime (the checkout at `slime`, or the package); `@<commit>` checks the checkout\'s git HEAD',
  sglang: 'SGLang (`sglang`)',
  ray: 'Ray (`ray`)',
  cuda: 'the CUDA torch is built for (`torch.version.cuda`)',
  cublasLt: 'the cuBLASLt library torch loads (`cublasLtGetVersion`, e.g. 12.9.1)',
  driver: 'the NVIDIA driver (`nvidia-smi`)',
  computeCapability: 'the GPUs\' compute capability (9.0: Hopper)',
};

export const versions = z
  .strictObject(Object.fromEntries(PINNABLE.map((k) => [k, requirement().optional().describe(`${PIN_MEANING[k]}`)])) as Record<Pinnable, z.ZodOptional<ReturnType<typeof requirement>>>)
  .prefault({})
  .describe(
    'versions every step\'s environment must have, checked on the worker before the trainer starts (and by `infir2 doctor`): clauses like `>=2.4, <2.8`, `==2.7.4.post1` (`==2.4.0` also matches `2.4.0+3cd6870`), `==2.4.*`, `@3cd6870` (a commit), joined by commas; one that does not hold fails the step as a `config` failure naming the package, what was found and what was expected',
  );

const checkName = z.string().refine((c) => CHECK_NAMES.includes(c), {
  error: (iss) => `unknown check '${String(iss.input)}': expected one of ${CHECK_NAMES.join(', ')}`,
});

export const skipChecks = z
  .array(
    z.strictObject({
      check: checkName.describe('the check\'s name: a package or system key of `versions`, `python`, `gpu`, `disk`, `paths`, or a known-bad combination\'s id'),
      why: z.string().trim().min(1, { error: 'say why the check is off' }).describe('why it is off: kept with the run and shown where the check would have been'),
    }),
  )
  .default([])
  .describe(
    `preflight checks turned off, each with the reason: e.g. \`{check: numpy2-megatron-np-product, why: "our Megatron fork uses np.prod"}\`. The known-bad combinations: ${KNOWN_BAD.map((k) => `\`${k.id}\``).join(', ')} (src/recipe/known-bad.ts, each with its sources)`,
  );

/** Where the external software lives on the workers (the InfiR2 Docker image layout by default), and its versions. */
export const software = z
  .strictObject({
    megatron: path().default('/root/Megatron-LM').describe('Megatron-LM checkout (`pretrain_gpt.py`)'),
    slime: path().default('/root/slime').describe('slime checkout (`train.py`, `train_async.py`); the Ray job\'s working directory'),
    infir2: path().default('/root/InfiR2').describe('InfiR2 checkout: `tools/convert_torch_dist_to_hf.py`, `tools/bf16_cast_fp8.py`'),
    python: z.string().min(1).default('python3').describe('Python that runs the tools and slime\'s entry points (looked up on `PATH` when it has no `/`)'),
    torchrun: z.string().min(1).default('torchrun').describe('torchrun program (looked up on `PATH` when it has no `/`)'),
    torchrunArgs: z
      .array(z.string().min(1))
      .default([])
      .describe('extra torchrun arguments after the rendezvous ones, e.g. `--redirects=2 --tee=2`, which torch 1.13 on Python ≥ 3.11 needs to start at all'),
    srun: z.string().min(1).default('srun').describe('Slurm\'s srun program (looked up on `PATH` when it has no `/`)'),
    srunArgs: z
      .array(z.string().min(1))
      .default([])
      .describe('extra srun arguments before torchrun, e.g. `--partition=gpu --account=proj --time=48:00:00 --mem=0`'),
    squeue: z.string().min(1).default('squeue').describe('Slurm\'s squeue, which finds a step\'s job id and nodes for `status` (looked up on `PATH` when it has no `/`)'),
    scancel: z.string().min(1).default('scancel').describe('Slurm\'s scancel, which ends a step\'s job when an attempt ends without success (looked up on `PATH` when it has no `/`)'),
    ray: z.string().min(1).default('ray').describe('the Ray CLI (looked up on `PATH` when it has no `/`)'),
    versions,
    skipChecks,
  })
  .prefault({})
  .describe('where the external software lives on the workers (the InfiR2 Docker image\'s layout by default), and the versions it must have');

