/**
 * slime SFT (`train_async.py`) and RL (`train.py`) submitted as Ray jobs: the InfiR2 SFT and RL scripts
 * (docs/infir2-recipe.md §2.2, §2.3) with the deviations listed in FIXES. Pure: recipe values in, argv out.
 */
import { join } from 'node:path';
import type { Arch, Parallel, Pool, Recipe, RlConfig, SftStage } from '../recipe/schema.js';
import { opt, when } from './argv.js';
import type { StepBody } from './types.js';

/** The runtime-env `env_vars` of the InfiR2 SFT scripts (§2.2), before the stage's own `env`. */
export function sftRuntimeEnv(sw: Recipe['software']): Record<string, string> {
  return {
    PYTHONPATH: `${sw.megatron}/`,
    CUDA_DEVICE_MAX_CONNECTIONS: '1',
    PYTORCH_CUDA_ALLOC_CONF: 'expandable_segments:True',
    TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD: '1',
    TORCH_NCCL_AVOID_RECORD_STREAMS: '1',
    NVTE_ALLOW_NONDETERMINISTIC_ALGO: '1',
    NVTE_DEBUG: '0',
    HOME: sw.slime,
    http_proxy: '',
    https_proxy: '',
  };
}

/** The RL scripts' runtime env: the SFT set, plus or changed (§2.3). */
export function rlRuntimeEnv(sw: Recipe['software'], logDir: string): Record<string, string> {
  return {
    ...sftRuntimeEnv(sw),
    PYTHONPATH: `${sw.megatron}/:${sw.slime}`,
    PYTORCH_CUDA_ALLOC_CONF: 'max_split_size_mb:2048',
    NVTE_FP8_BLOCK_SCALING_FP32_SCALES: '1',
    WANDB_MODE: 'offline',
    WANDB_DIR: logDir,
    RAY_DEDUP_LOGS_ALLOW_REGEX: 'Username',
  };
}

/** What the scripts export for the `ray job submit` client itself. */
export const CLIENT_ENV: Readonly<Record<string, string>> = { PYTHONBUFFERED: '16', http_proxy: '', https_proxy: '' };

export interface SlimeCommon {
  id: string;
  stepDir: string;
  runId: string;
  software: Recipe['software'];
  precision: Recipe['precision'];
  pool: Pool;
  nodes: number;
  gpusPerNode: number;
  /** The model arguments slime's model script passes (model.arch with the stage's overrides). */
  arch: Arch;
  hfCheckpoint: string;
  refLoad: string;
  saveDir: string;
  wandbGroup: string;
}

export interface SlimeSftSpec extends SlimeCommon {
  stage: SftStage;
  /** `num_rollout` (epochs × ⌊samples / rollout batch⌋). */
  rollouts: number;
}

export interface SlimeRlSpec extends SlimeCommon {
  rl: RlConfig;
  curriculum: RlConfig['curriculum'][number];
}

/** slime `scripts/models/qwen2.5-*.sh` (MODEL_ARGS). */
function modelArgs(a: Arch): string[] {
  return [
    '--swiglu',
    ...opt('--num-layers', a.numLayers),
    ...opt('--hidden-size', a.hiddenSize),
    ...opt('--ffn-hidden-size', a.ffnHiddenSize),
    ...opt('--num-attention-heads', a.numAttentionHeads),
    '--group-query-attention',
    ...opt('--num-query-groups', a.numQueryGroups),
    '--use-rotary-position-embeddings',
    '--disable-bias-linear',
    '--add-qkv-bias',
    '--normalization', 'RMSNorm',
    ...opt('--norm-epsilon', a.normEpsilon),
    ...opt('--rotary-base', a.rotaryBase),
    ...opt('--vocab-size', a.vocabSize),
    ...when(!a.tieEmbeddings, '--untie-embeddings-and-output-weights'),
  ];
}

/** CKPT_ARGS, with --load = --save so slime resumes by itself (FIXES slime-load-equals-save). */
function checkpointArgs(s: SlimeCommon, saveInterval: number): string[] {
  return ['--hf-checkpoint', s.hfCheckpoint, '--ref-load', s.refLoad, '--load', s.saveDir, '--save', s.saveDir, ...opt('--save-interval', saveInterval)];
}

function perfArgs(p: Parallel, recompute: boolean, maxTokensPerGpu: number | undefined, microBatchSize: number): string[] {
  return [
    ...opt('--tensor-model-parallel-size', p.tensor),
    '--sequence-parallel',
    ...opt('--pipeline-model-parallel-size', p.pipeline),
    ...opt('--context-parallel-size', p.context),
    ...opt('--expert-model-parallel-size', p.expert),
    ...opt('--expert-tensor-parallel-size', p.expertTensor),
    ...when(recompute, '--recompute-granularity', 'full', '--recompute-method', 'uniform', '--recompute-num-layers', '1'),
    ...(maxTokensPerGpu !== undefined ? ['--use-dynamic-batch-size', ...opt('--max-tokens-per-gpu', maxTokensPerGpu)] : opt('--micro-batch-size', microBatchSize)),
  ];
}

function optimizerArgs(c: SftStage | RlConfig, warmupFraction?: number): string[] {
  return [
    '--optimizer', 'adam',
    ...opt('--lr', c.lr),
    '--lr-decay-style', c.decayStyle,
    ...opt('--min-lr', c.minLr),
    ...(warmupFraction ? opt('--lr-warmup-fraction', warmupFraction) : []),
    ...opt('--weight-decay', c.weightDecay),
    ...opt('--adam-beta1', c.adamBeta1),
    ...opt('--adam-beta2', c.adamBeta2),
  ];
}

function precisionArgs(precision: Recipe['precision']): string[] {
  return ['--transformer-impl', 'transformer_engine', '--bf16', ...when(precision === 'fp8', '--fp8-format', 'e4m3', '--fp8-recipe', 'blockwise', '--fp8-param-gather')];
}

function profileArgs(p: SftStage['profile'], tensorboardDir: string): string[] {
  if (!p) return [];
  return [
    ...when(p.pytorchProfiler, '--use-pytorch-profiler'),
    ...opt('--profile-step-start', p.stepStart),
    ...opt('--profile-step-end', p.stepEnd),
    '--tensorboard-dir', tensorboardDir,
    ...when(p.recordMemoryHistory, '--record-memory-history'),
  ];
}

/** MISC_ARGS of both scripts. */
const MISC = ['--attention-dropout', '0.0', '--hidden-dropout', '0.0', '--accumulate-allreduce-grads-in-fp32', '--attention-softmax-in-fp32', '--attention-backend', 'flash'];

/**
 * A Ray job's processes run on the cluster's nodes with the runtime env's variables, not the submitting client's:
 * a secret goes into `env_vars` as `{secret:WORKER_VAR}`, which the worker fills in when it submits.
 */
function secretPlaceholders(secrets: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(secrets ?? {}).map(([name, from]) => [name, `{secret:${from}}`]));
}

/**
 * Ray job ids must be unique per cluster: every launch gets its own through the supervisor's `{attempt}` and
 * `{launch}` placeholders (attempts count from 1 again after `infir2 resume`; FIXES slime-submission-id).
 */
export function submissionId(runId: string, stepId: string): string {
  return `infir2-${runId}-${stepId.replace(/\./g, '-')}-a{attempt}-{launch}`;
}

/**
 * `ray job submit … -- python3 <entry> <args>`, its resume (same job with `--start-rollout-id N+1` and a fresh
 * submission id: FIXES slime-start-rollout-id) and the checkpoint/completion of a stage of `rollouts` rollouts.
 */
function rayJob(s: SlimeCommon, entry: string, runtimeEnv: Record<string, string>, args: string[], rollouts: number, summary: string, inputs: Record<string, string>): StepBody {
  const id = submissionId(s.runId, s.id);
  const submit = (sid: string) => [
    s.software.ray, 'job', 'submit',
    `--address=${s.pool.rayAddress}`,
    `--submission-id=${sid}`,
    `--runtime-env-json=${JSON.stringify({ working_dir: s.software.slime, env_vars: runtimeEnv })}`,
    '--',
    s.software.python,
    entry,
  ];
  return {
    command: { argv: [...submit(id), ...args], env: { ...CLIENT_ENV }, cwd: s.stepDir },
    runtimeEnv,
    resume: { argv: [...submit(id), ...args, '--start-rollout-id', '{nextIteration}'] },
    // Killing the `ray job submit` client leaves the Ray job training: stop it by its id.
    onStop: { argv: [s.software.ray, 'job', 'stop', `--address=${s.pool.rayAddress}`, id] },
    progress: { format: 'slime', totalIterations: rollouts },
    checkpoint: { layout: 'megatron', dir: s.saveDir },
    // slime numbers checkpoints by rollout id, from 0: the last is rollouts − 1 (docs/infir2-recipe.md §3.4).
    completion: { kind: 'checkpoint', dir: s.saveDir, iteration: rollouts - 1 },
    inputs: { hfCheckpoint: s.hfCheckpoint, refLoad: s.refLoad, ...inputs },
    outputs: { checkpointDir: s.saveDir },
    gpus: s.gpusPerNode,
    nodes: s.nodes,
    summary,
  };
}

export function sftStep(s: SlimeSftSpec): StepBody {
  const st = s.stage;
  const logDir = join(s.stepDir, 'logs');
  const args = [
    ...opt('--actor-num-nodes', s.nodes),
    ...opt('--actor-num-gpus-per-node', s.gpusPerNode),
    ...modelArgs(s.arch),
    ...checkpointArgs(s, st.saveInterval),
    // SFT_ARGS
    '--rollout-function-path', 'slime.rollout.sft_rollout.generate_rollout',
    '--prompt-data', st.data,
    '--input-key', 'messages',
    '--rollout-shuffle',
    ...opt('--num-epoch', st.epochs),
    ...opt('--rollout-batch-size', st.rolloutBatchSize),
    ...opt('--global-batch-size', st.globalBatchSize),
    '--loss-type', 'sft_loss',
    '--calculate-per-token-loss',
    '--disable-compute-advantages-and-returns',
    '--debug-train-only',
    ...optimizerArgs(st, st.warmupFraction),
    // WANDB_ARGS
    '--use-wandb', '--wandb-mode', 'offline',
    '--wandb-project', st.wandbProject,
    '--wandb-group', s.wandbGroup,
    '--wandb-dir', join(logDir, `${s.wandbGroup}__wandb`),
    ...perfArgs(st.parallel, st.recompute, st.maxTokensPerGpu, st.microBatchSize),
    ...precisionArgs(s.precision),
    ...profileArgs(st.profile, join(logDir, 'tensorboard', s.wandbGroup)),
    ...MISC,
    ...st.extraArgs,
  ];
  const env = { ...sftRuntimeEnv(s.software), ...st.env, ...secretPlaceholders(st.secrets) };
  const summary = `SFT ${s.id.split('.')[1]}: ${st.epochs} epoch(s) of ${st.samples} samples = ${s.rollouts} steps, LR ${st.lr}→${st.minLr ?? st.lr}`;
  return rayJob(s, 'train_async.py', env, args, s.rollouts, summary, { data: st.data });
}

export function rlStep(s: SlimeRlSpec): StepBody {
  const { rl, curriculum: c } = s;
  const logDir = join(s.stepDir, 'logs');
  const args = [
    ...opt('--actor-num-nodes', s.nodes),
    ...opt('--actor-num-gpus-per-node', s.gpusPerNode),
    ...when(rl.colocate, '--colocate'),
    ...modelArgs(s.arch),
    ...checkpointArgs(s, rl.saveInterval),
    // ROLLOUT_ARGS
    '--prompt-data', rl.data,
    '--input-key', rl.inputKey,
    '--label-key', rl.labelKey,
    ...when(rl.applyChatTemplate, '--apply-chat-template'),
    ...when(rl.rolloutShuffle, '--rollout-shuffle'),
    '--rm-type', rl.rmType,
    ...opt('--num-rollout', c.rollouts),
    ...opt('--rollout-batch-size', rl.rolloutBatchSize),
    ...opt('--n-samples-per-prompt', rl.samplesPerPrompt),
    ...opt('--rollout-max-response-len', c.maxResponseLen),
    ...opt('--rollout-temperature', c.temperature),
    ...opt('--over-sampling-batch-size', rl.overSamplingBatchSize),
    ...opt('--dynamic-sampling-filter-path', rl.dynamicSamplingFilter),
    ...opt('--global-batch-size', rl.globalBatchSize),
    ...when(rl.balanceData, '--balance-data'),
    ...optimizerArgs(rl),
    // GRPO_ARGS
    '--advantage-estimator', rl.advantageEstimator,
    ...when(rl.useKlLoss, '--use-kl-loss'),
    ...opt('--kl-loss-coef', rl.klLossCoef),
    '--kl-loss-type', rl.klLossType,
    ...opt('--entropy-coef', rl.entropyCoef),
    ...opt('--eps-clip', rl.epsClip),
    ...opt('--eps-clip-high', rl.epsClipHigh),
    ...when(rl.useTis, '--use-tis'),
    // WANDB_ARGS
    '--use-wandb',
    '--wandb-project', rl.wandbProject,
    '--wandb-group', s.wandbGroup,
    '--wandb-mode', 'offline',
    '--wandb-dir', logDir,
    ...perfArgs(rl.parallel, rl.recompute, c.maxTokensPerGpu ?? c.maxResponseLen, rl.microBatchSize),
    // EVAL_ARGS
    ...(rl.evalData
      ? [
          ...opt('--eval-interval', rl.evalInterval),
          '--eval-prompt-data', rl.evalName, rl.evalData,
          ...opt('--n-samples-per-eval-prompt', rl.evalSamples),
          ...opt('--eval-max-response-len', rl.evalMaxResponseLen),
          ...opt('--eval-top-p', rl.evalTopP),
        ]
      : []),
    // SGLANG_ARGS
    ...opt('--rollout-num-gpus-per-engine', rl.sglang.gpusPerEngine),
    ...opt('--sglang-mem-fraction-static', rl.sglang.memFractionStatic),
    ...opt('--sglang-max-running-requests', rl.sglang.maxRunningRequests),
    ...MISC,
    ...precisionArgs(s.precision),
    ...profileArgs(rl.profile, join(logDir, 'tensorboard')),
    ...rl.extraArgs,
  ];
  const env = { ...rlRuntimeEnv(s.software, logDir), ...rl.env, ...secretPlaceholders(rl.secrets) };
  const summary = `RL ${s.id.split('.')[1]}: ${c.rollouts} GRPO rollouts of ${rl.rolloutBatchSize}×${rl.samplesPerPrompt}, responses ≤ ${c.maxResponseLen} tokens at T=${c.temperature}`;
  return rayJob(s, 'train.py', env, args, c.rollouts, summary, { data: rl.data, ...(rl.evalData ? { evalData: rl.evalData } : {}) });
}
