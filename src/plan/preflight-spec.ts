/**
 * A step's preflight (PreflightSpec): where its trainer's code runs and what it imports, by backend, with the
 * recipe's pins and the plan's estimate of its checkpoints. Pure.
 *
 * The interpreter is the trainer's own: the local trainer's `python` (torchrun runs it with `--no_python`);
 * torchrun's for Megatron (its `#!` line, read on the worker, else `software.python`); `software.python` for the
 * InfiR2 tools, evalscope and slime, whose Ray job runs `python3` on the cluster's nodes with the runtime env's
 * variables and the slime checkout as its working directory. On a slurm pool the probe runs on every node of the
 * step through srun, one task per node.
 */
import type { StepBody } from '../backends/types.js';
import type { Pool, Recipe } from '../recipe/schema.js';
import type { PreflightSpec } from './preflight-types.js';
import type { BackendName } from './types.js';

/** What each backend's trainer cannot run without, and what else it imports. */
function packagesOf(backend: BackendName): { needs: string[]; uses: string[] } {
  switch (backend) {
    case 'local':
      return { needs: ['torch'], uses: [] };
    case 'megatron':
      // `--transformer-impl transformer_engine --use-flash-attn` in every CPT phase (backends/megatron.ts).
      return { needs: ['torch', 'transformerEngine', 'megatron'], uses: ['numpy', 'flashAttn'] };
    case 'slime':
      return { needs: ['torch', 'megatron', 'slime', 'sglang', 'ray'], uses: ['numpy', 'transformerEngine', 'flashAttn'] };
    case 'convert':
      // convert_torch_dist_to_hf.py reads a torch_dist checkpoint through Megatron (on its PYTHONPATH);
      // bf16_cast_fp8.py needs torch alone.
      return { needs: ['torch'], uses: ['numpy', 'megatron'] };
    case 'evalscope':
      return { needs: ['sglang'], uses: ['torch'] };
  }
}

export interface PreflightIn {
  r: Recipe;
  backend: BackendName;
  body: StepBody;
  /** The local trainer's interpreter (the compiler's). */
  localPython: string;
  /** The step's pool and the srun job name of its launch (slurm pools). */
  pool: Pool;
  jobName: string;
  /** The plan's estimate of the step's checkpoints (compile.ts, with its retention); absent: none. */
  saves?: PreflightSpec['saves'];
}

export function preflightSpec(i: PreflightIn): PreflightSpec {
  const sw = i.r.software;
  const { body } = i;
  const { needs, uses } = packagesOf(i.backend);
  const where =
    i.backend === 'local'
      ? { python: i.localPython }
      : i.backend === 'megatron'
        ? { python: sw.python, via: sw.torchrun }
        : { python: sw.python };
  const fp8 = i.r.precision === 'fp8';
  const traits = [
    ...((i.backend === 'megatron' || i.backend === 'slime') && fp8 ? ['teFp8'] : []),
    // Another block size than 128 is emulated by choice (docs/gpu.md): nothing to warn about.
    ...(i.backend === 'local' && fp8 && body.gpus > 0 && i.r.fp8BlockSize === 128 ? ['localFp8Gpu'] : []),
  ];
  return {
    launch: probeLaunch(sw, i.pool, body, i.jobName),
    ...where,
    ...(body.runtimeEnv ? { env: body.runtimeEnv } : {}),
    // The entry script's directory is first on the trainer's sys.path: Megatron's pretrain_gpt.py sits in the
    // checkout's root, and a Ray job runs train.py in the slime checkout (its working_dir).
    pythonPath: i.backend === 'megatron' ? [sw.megatron] : i.backend === 'slime' ? [sw.slime] : [],
    needs,
    uses: uses.filter((p) => !needs.includes(p)),
    versions: Object.fromEntries(Object.entries(sw.versions).filter((e): e is [string, string] => typeof e[1] === 'string')),
    skip: sw.skipChecks.map((s) => ({ check: s.check, why: s.why })),
    traits,
    gpus: body.gpus,
    reads: { ...body.inputs },
    saves: i.saves ?? null,
  };
}

/**
 * One probe per node: a step that srun launches gets the same srun with one task per node (`--label` tells
 * their lines apart); elsewhere the worker's own node runs it. A multi-node torchrun pool has no launcher that
 * reaches the other nodes, so its probe runs where the worker is, as the head's torchrun does.
 */
function probeLaunch(sw: Recipe['software'], pool: Pool, body: StepBody, jobName: string): string[] {
  if (pool.launcher !== 'slurm' || body.command.argv[0] !== sw.srun) return [];
  const gpus = pool.gpusPerNode > 0 && body.gpus > 0 ? [`--gpus-per-node=${Math.min(body.gpus, pool.gpusPerNode)}`] : [];
  return [sw.srun, `--job-name=${jobName}-preflight`, `--nodes=${body.nodes}`, '--ntasks-per-node=1', ...gpus, '--label', ...sw.srunArgs];
}
