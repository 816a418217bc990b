/**
 * Megatron-LM `pretrain_gpt.py` for the CPT phases: the InfiR2 CPT scripts (docs/infir2-recipe.md §2.1),
 * argument group by argument group, with the deviations listed in FIXES. Pure: recipe values in, argv out.
 */
import { join } from 'node:path';
import type { Arch, CptConfig, Pool, Recipe } from '../recipe/schema.js';
import { opt, when } from './argv.js';
import { slurmTracking, torchLaunch } from './launch.js';
import type { CptPhase, LoadArgs, StepBody } from './types.js';

/** The environment the InfiR2 CPT scripts export (§2.1). */
export const CPT_ENV: Readonly<Record<string, string>> = {
  TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD: '1',
  CUDA_DEVICE_MAX_CONNECTIONS: '1',
  TORCH_NCCL_AVOID_RECORD_STREAMS: '1',
  NVTE_ALLOW_NONDETERMINISTIC_ALGO: '1',
  PYTORCH_CUDA_ALLOC_CONF: 'expandable_segments:True',
  NCCL_NVLS_ENABLE: '0',
  NVTE_FUSED_ATTN: '1',
  NVTE_DEBUG: '0',
  WANDB_MODE: 'offline',
};

export interface MegatronCptSpec {
  phase: CptPhase;
  cpt: CptConfig;
  arch: Arch;
  precision: Recipe['precision'];
  software: Recipe['software'];
  pool: Pool;
  nodes: number;
  gpusPerNode: number;
  tokenizer: string;
  dataCache: string;
  /** The step's own directory (cwd, tensorboard, logs). */
  stepDir: string;
  wandbExpName: string;
  /** The srun job's name on a slurm pool (launch.ts slurmJobName). */
  jobName: string;
  /** The infir2 tree on the nodes (the launcher srun starts on each). */
  projectRoot: string;
}

export function loadArgs(l: LoadArgs): string[] {
  return [
    '--load',
    l.load,
    ...opt('--ckpt-step', l.ckptStep),
    ...opt('--pretrained-checkpoint', l.pretrained),
    ...when(l.exitOnMissing, '--exit-on-missing-checkpoint'),
  ];
}

/** Qwen2-family model arguments (MODEL_ARGS), minus the optimizer-reset flags (FIXES cpt-keep-optimizer). */
function modelArgs(arch: Arch, seqLength: number, cpt: CptConfig): string[] {
  return [
    '--use-mcore-models',
    '--transformer-impl', 'transformer_engine',
    '--use-flash-attn',
    '--use-dist-ckpt',
    '--disable-bias-linear',
    '--add-qkv-bias',
    ...when(!arch.tieEmbeddings, '--untie-embeddings-and-output-weights'),
    '--position-embedding-type', 'rope',
    '--use-rotary-position-embeddings',
    '--rotary-percent', '1.0',
    ...opt('--rotary-base', arch.rotaryBase),
    '--rotary-seq-len-interpolation-factor', '1',
    '--normalization', 'RMSNorm',
    ...opt('--norm-epsilon', arch.normEpsilon),
    '--swiglu',
    ...opt('--seq-length', seqLength),
    ...opt('--num-layers', arch.numLayers),
    ...opt('--hidden-size', arch.hiddenSize),
    ...opt('--ffn-hidden-size', arch.ffnHiddenSize),
    ...opt('--num-attention-heads', arch.numAttentionHeads),
    '--group-query-attention',
    ...opt('--num-query-groups', arch.numQueryGroups),
    ...opt('--max-position-embeddings', arch.maxContext),
    '--attention-dropout', '0.0',
    '--hidden-dropout', '0.0',
    ...opt('--initial-loss-scale', cpt.initialLossScale),
    ...opt('--vocab-size', arch.vocabSize),
  ];
}

export function cptPhaseStep(s: MegatronCptSpec): StepBody {
  const { cpt, phase } = s;
  const p = cpt.parallel;
  const head = [
    ...torchLaunch(s.software, s.pool, s.nodes, s.gpusPerNode, s.jobName, s.projectRoot),
    join(s.software.megatron, 'pretrain_gpt.py'),
    // DATA_ARGS
    '--data-path', cpt.data,
    '--data-cache-path', s.dataCache,
    '--tokenizer-type', 'HuggingFaceTokenizer',
    '--tokenizer-model', s.tokenizer,
    '--split', cpt.split,
    ...opt('--num-workers', cpt.numWorkers),
    '--no-create-attention-mask-in-dataloader',
    // MODEL_PARALLEL_ARGS
    ...opt('--distributed-timeout-minutes', cpt.distributedTimeoutMinutes),
    ...opt('--micro-batch-size', cpt.microBatchSize),
    ...opt('--global-batch-size', cpt.globalBatchSize),
    ...opt('--tensor-model-parallel-size', p.tensor),
    ...opt('--pipeline-model-parallel-size', p.pipeline),
    ...opt('--context-parallel-size', p.context),
    '--use-distributed-optimizer',
    '--sequence-parallel',
    '--overlap-grad-reduce',
    '--overlap-param-gather',
    ...modelArgs(s.arch, cpt.seqLength, cpt),
    // EVAL_AND_LOGGING_ARGS
    ...opt('--train-iters', phase.trainIters),
    ...opt('--log-interval', cpt.logInterval),
    ...opt('--save-interval', cpt.saveInterval),
    ...opt('--eval-interval', cpt.evalInterval),
    ...opt('--eval-iters', cpt.evalIters),
    '--log-throughput',
    '--log-timers-to-tensorboard',
    '--log-params-norm',
    '--log-num-zeros-in-grad',
    '--tensorboard-dir', join(s.stepDir, 'tensorboard'),
    ...(cpt.wandbProject
      ? ['--wandb-project', cpt.wandbProject, '--wandb-exp-name', s.wandbExpName, '--wandb-save-dir', join(s.stepDir, 'logs')]
      : []),
    // TRAINING_ARGS
    ...opt('--seed', cpt.seed),
    ...opt('--lr', cpt.lr),
    ...opt('--weight-decay', cpt.weightDecay),
    ...opt('--adam-beta1', cpt.adamBeta1),
    ...opt('--adam-beta2', cpt.adamBeta2),
    ...opt('--clip-grad', cpt.clipGrad),
    '--lr-decay-style', 'WSD',
    ...opt('--lr-warmup-iters', phase.warmupIters),
    '--lr-wsd-decay-style', cpt.decayStyle,
    ...opt('--lr-wsd-decay-iters', cpt.decayIters),
    ...opt('--min-lr', cpt.minLr),
    ...opt('--init-method-std', cpt.initMethodStd),
    // PRECISION_ARGS
    '--bf16',
    ...when(s.precision === 'fp8', '--fp8-format', 'e4m3', '--fp8-recipe', 'blockwise', '--fp8-param-gather'),
    '--use-precision-aware-optimizer',
    // PROFILER_ARGS
    ...when(cpt.profile, '--profile', '--use-pytorch-profiler', '--record-memory-history'),
    '--save', phase.saveDir,
  ];
  // The phase's place in the lineage (FIXES cpt-phase-boundaries, cpt-decay-load).
  const tail = [
    ...opt('--exit-interval', phase.exitInterval),
    // A stop (cancel, stall, drained worker) saves where it is, not at the last save interval (FIXES cpt-save-on-sigterm).
    '--exit-signal-handler',
    ...when(phase.overrideScheduler, '--override-opt_param-scheduler'),
    ...cpt.extraArgs,
  ];
  const env = { ...CPT_ENV, PYTHONPATH: s.software.megatron, ...cpt.env };
  return {
    command: { argv: [...head, ...loadArgs(phase.first), ...tail], env, cwd: s.stepDir },
    resume: { argv: [...head, ...loadArgs(phase.resume), ...tail] },
    ...slurmTracking(s.software, s.pool, s.jobName),
    progress: { format: 'megatron', totalIterations: phase.end },
    checkpoint: { layout: 'megatron', dir: phase.saveDir },
    completion: { kind: 'checkpoint', dir: phase.saveDir, iteration: phase.end },
    inputs: {
      data: cpt.data,
      tokenizer: s.tokenizer,
      // The first phase loads its own (still empty) save root: not an input that must exist beforehand.
      ...(phase.first.load !== phase.saveDir ? { load: phase.first.load } : {}),
      ...(phase.first.pretrained ? { pretrained: phase.first.pretrained } : {}),
    },
    outputs: { checkpointDir: phase.saveDir },
    gpus: s.gpusPerNode,
    nodes: s.nodes,
    summary: phaseSummary(phase, cpt),
  };
}

export function phaseSummary(phase: CptPhase, cpt: Pick<CptConfig, 'lr' | 'minLr' | 'decayStyle'>): string {
  const what = {
    warmup: `linear LR warmup to ${cpt.lr}`,
    stable: `constant LR ${cpt.lr}`,
    decay: `${cpt.decayStyle} LR decay to ${cpt.minLr}`,
  }[phase.name];
  return `CPT ${phase.name}: iterations ${phase.start}→${phase.end} of the ${phase.trainIters}-iteration WSD schedule (${what})`;
}
