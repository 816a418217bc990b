/**
 * The recipe format: the single source of truth for the YAML keys, their defaults and their error messages.
 *
 * Keys are camelCase. Every object is strict (an unknown key is an error with a "did you mean"). Presets
 * (`src/recipe/presets/`) are recipes in this same schema; `docs/recipe-reference.md` describes each key.
 * Cross-field rules (phases that add up, pools that exist, pitfalls of the InfiR2 scripts) live in `lint.ts`.
 */
import { z } from 'zod';
import type { Launcher, Precision } from '../plan/types.js';
import { count, duration, envName, name, natural, nonNegative, path, positive, slug, unitInterval } from './fields.js';

// The Plan's types (src/plan/types.ts) name the same values; `satisfies` keeps the two in step.
export const PRECISIONS = ['fp8', 'bf16'] as const satisfies readonly Precision[];
export const LAUNCHERS = ['local', 'torchrun', 'slurm', 'ray'] as const satisfies readonly Launcher[];

/**
 * Retry budget per failure class (see `FAILURE_CLASSES` in src/plan/types.ts). `config` failures are never
 * retried: the same command would fail the same way.
 */
const retries = (d: { crash: number; hang: number; oom: number; preempted: number }) =>
  z
    .strictObject({
      crash: natural().default(d.crash),
      hang: natural().default(d.hang),
      oom: natural().default(d.oom),
      preempted: natural().default(d.preempted),
    })
    .prefault({});

/** What every stage carries: where it runs, how long it may go quiet, and how often it may be retried. */
const stageCommon = (d: { stall: string; attempt: string; retries: Parameters<typeof retries>[0] }) => ({
  /** Pool (a key of `pools`) whose workers run this stage. */
  pool: name(),
  /** Nodes and GPUs per node this stage uses; default: the whole pool. */
  nodes: count().optional(),
  gpusPerNode: natural().optional(),
  retries: retries(d.retries),
  /** No progress for this long (no new iteration, rollout or eval line) and the attempt is a hang. */
  stallTimeout: duration().prefault(d.stall),
  /** Upper bound for one attempt. */
  attemptTimeout: duration().prefault(d.attempt),
  /** Arguments appended to the trainer's command line (argparse: the last value of a flag wins). */
  extraArgs: z.array(z.string()).default([]),
  /** Environment for the training processes (slime: the Ray runtime env). */
  env: z.record(envName(), z.string()).default({}),
});

const TRAIN_RETRIES = { crash: 3, hang: 2, oom: 1, preempted: 10 };
const TOOL_RETRIES = { crash: 1, hang: 1, oom: 1, preempted: 3 };

/** Model architecture: what Megatron/slime need on the command line and what lint compares between stages. */
const arch = z.strictObject({
  numLayers: count(),
  hiddenSize: count(),
  ffnHiddenSize: count(),
  numAttentionHeads: count(),
  numQueryGroups: count(),
  /** RoPE base (`rope_theta` in the HF config, Megatron `--rotary-base`). */
  rotaryBase: positive(),
  /** Vocabulary size of the HF model (`vocab_size`). */
  vocabSize: count(),
  normEpsilon: positive(),
  /** Input and output embeddings shared (`tie_word_embeddings`). */
  tieEmbeddings: z.boolean(),
  /** Longest sequence the model handles (Megatron `--max-position-embeddings`). */
  maxContext: count(),
});
export type Arch = z.output<typeof arch>;

/** A stage's own view of the architecture (slime's model script may differ from CPT's: InfiR2 1.5B does). */
const archOverride = arch.partial();

const model = z.strictObject({
  /** Human-readable name for summaries, e.g. `Qwen2.5-7B`. */
  name: z.string().min(1),
  /** HF model directory: config and tokenizer for SFT/RL (`--hf-checkpoint`) and for the HF export. */
  hf: path().optional(),
  /** HF directory of the tokenizer used by CPT (`--tokenizer-model`); default: `hf`. */
  tokenizer: path().optional(),
  /** The base model as a Megatron torch_dist checkpoint root (tracker `release`); CPT starts from it. */
  base: path().optional(),
  arch,
});

const pool = z.strictObject({
  /** Temporal task queue the pool's workers poll. */
  taskQueue: z.string().regex(/^\S+$/, { error: 'expected a task queue name without spaces' }),
  nodes: count().default(1),
  /** 0 for a CPU-only pool. */
  gpusPerNode: natural(),
  launcher: z.enum(LAUNCHERS),
  /** torchrun/srun rendezvous `host:port` (multi-node: the head node's address). */
  rdzvEndpoint: z.string().regex(/^[^\s:]+:\d+$/, { error: 'expected host:port' }).default('localhost:29400'),
  /** Ray dashboard address that `ray job submit` talks to. */
  rayAddress: z.string().regex(/^https?:\/\/\S+$/, { error: 'expected an http(s) URL' }).default('http://127.0.0.1:8265'),
});
export type Pool = z.output<typeof pool>;

/** Where the external software lives on the workers (the InfiR2 Docker image layout by default). */
const software = z
  .strictObject({
    megatron: path().default('/root/Megatron-LM'),
    slime: path().default('/root/slime'),
    /** The InfiR2 repository: `tools/convert_torch_dist_to_hf.py`, `tools/bf16_cast_fp8.py`. */
    infir2: path().default('/root/InfiR2'),
    /** Programs, looked up on PATH when they have no `/`. */
    python: z.string().min(1).default('python3'),
    torchrun: z.string().min(1).default('torchrun'),
    srun: z.string().min(1).default('srun'),
    ray: z.string().min(1).default('ray'),
  })
  .prefault({});

const tensorParallel = z
  .strictObject({
    tensor: count().default(1),
    pipeline: count().default(1),
    context: count().default(1),
    expert: count().default(1),
    expertTensor: count().default(1),
  })
  .prefault({});
export type Parallel = z.output<typeof tensorParallel>;

const cpt = z.strictObject({
  backend: z.enum(['megatron', 'local']).default('megatron'),
  // Megatron builds its dataset index before the first log line: allow for it.
  ...stageCommon({ stall: '2h', attempt: '14d', retries: TRAIN_RETRIES }),
  /** Megatron: the indexed-dataset prefix (`--data-path`); local: a `.jsonl` file. */
  data: path(),
  /** Megatron `--data-cache-path`; default `<run>/cpt/data-cache`. */
  dataCache: path().optional(),
  /** Total iterations of the WSD schedule (`--train-iters`); stable = iterations − warmup − decay. */
  iterations: count(),
  warmupIters: natural(),
  decayIters: count(),
  decayStyle: z.enum(['cosine', 'linear', 'exponential', 'minus_sqrt']).default('cosine'),
  saveInterval: count(),
  logInterval: count().default(1),
  evalInterval: count().default(100),
  evalIters: natural().default(10),
  seqLength: count(),
  microBatchSize: count().default(1),
  globalBatchSize: count(),
  parallel: tensorParallel,
  lr: positive(),
  minLr: nonNegative(),
  weightDecay: nonNegative().default(0.1),
  adamBeta1: unitInterval().default(0.9),
  adamBeta2: unitInterval().default(0.95),
  clipGrad: nonNegative().default(1.0),
  initMethodStd: positive().default(0.02),
  seed: natural().default(1234),
  /** Megatron `--split` (train,valid,test weights). */
  split: z.string().regex(/^\d+(,\d+){0,2}$/, { error: 'expected weights like 90,5,5' }).default('969,30,1'),
  numWorkers: natural().default(2),
  initialLossScale: positive().optional(),
  distributedTimeoutMinutes: count().optional(),
  /** Megatron's `--profile --use-pytorch-profiler --record-memory-history` (on in the InfiR2 scripts). */
  profile: z.boolean().default(false),
  wandbProject: z.string().min(1).optional(),
});

const slimeProfile = z
  .strictObject({
    pytorchProfiler: z.boolean().default(false),
    stepStart: natural(),
    stepEnd: natural(),
    recordMemoryHistory: z.boolean().default(false),
  })
  .nullable()
  .default(null);

/** What SFT stages and RL share: slime's optimizer, parallelism and checkpoint arguments. */
const slimeCommon = {
  parallel: tensorParallel,
  /** `--recompute-granularity full --recompute-method uniform --recompute-num-layers 1`. */
  recompute: z.boolean().default(true),
  maxTokensPerGpu: count().optional(),
  saveInterval: count(),
  globalBatchSize: count(),
  microBatchSize: count().default(1),
  lr: positive(),
  minLr: nonNegative().optional(),
  decayStyle: z.enum(['constant', 'linear', 'cosine', 'WSD']),
  weightDecay: nonNegative(),
  adamBeta1: unitInterval().default(0.9),
  adamBeta2: unitInterval().default(0.95),
  seed: natural().default(1234),
  /** HF directory for config and tokenizer (`--hf-checkpoint`); default: the upstream model. */
  hfCheckpoint: path().optional(),
  /** Initial weights (`--ref-load`, a torch_dist root); default: the previous stage's checkpoints. */
  refLoad: path().optional(),
  /** This stage's model arguments where they differ from `model.arch`. */
  arch: archOverride.optional(),
  wandbProject: z.string().min(1).default('slime-dev'),
  /** W&B group (and log directory name); default `<recipe>-<step id>`. */
  wandbGroup: z.string().min(1).optional(),
  profile: slimeProfile,
};

const sftStage = z.strictObject({
  backend: z.enum(['slime', 'local']).default('slime'),
  ...stageCommon({ stall: '2h', attempt: '14d', retries: TRAIN_RETRIES }),
  /** A `.jsonl` or `.parquet` file of `{"messages": [...]}` rows (slime rejects a directory). */
  data: path(),
  /** Rows in `data`; the step count depends on it. Counted from a local `.jsonl` when left out. */
  samples: count().optional(),
  epochs: count(),
  rolloutBatchSize: count().default(64),
  /** slime `--lr-warmup-fraction`. */
  warmupFraction: unitInterval().default(0),
  ...slimeCommon,
});
export type SftStage = z.output<typeof sftStage>;

const curriculumStage = z.strictObject({
  /** Rollouts in this stage (`--num-rollout`); one optimizer step each when rolloutBatchSize × n = GBS. */
  rollouts: count(),
  maxResponseLen: count(),
  temperature: nonNegative(),
  /** Default: `maxResponseLen`. */
  maxTokensPerGpu: count().optional(),
  wandbGroup: z.string().min(1).optional(),
});

const rl = z.strictObject({
  backend: z.enum(['slime', 'local']).default('slime'),
  // One rollout of long responses can take most of an hour before its first log line.
  ...stageCommon({ stall: '3h', attempt: '21d', retries: TRAIN_RETRIES }),
  /** `.jsonl`/`.parquet` prompts with `inputKey` and `labelKey`. */
  data: path(),
  inputKey: z.string().min(1).default('prompt'),
  labelKey: z.string().min(1).default('label'),
  applyChatTemplate: z.boolean().default(true),
  rolloutShuffle: z.boolean().default(true),
  rmType: z.string().min(1).default('deepscaler'),
  rolloutBatchSize: count(),
  samplesPerPrompt: count(),
  overSamplingBatchSize: count().optional(),
  dynamicSamplingFilter: z.string().min(1).optional(),
  balanceData: z.boolean().default(false),
  advantageEstimator: z.string().min(1).default('grpo'),
  useKlLoss: z.boolean().default(true),
  klLossCoef: nonNegative().default(0),
  klLossType: z.string().min(1).default('low_var_kl'),
  entropyCoef: nonNegative().default(0),
  epsClip: positive().default(0.2),
  epsClipHigh: positive().default(0.28),
  useTis: z.boolean().default(false),
  colocate: z.boolean().default(true),
  sglang: z
    .strictObject({
      gpusPerEngine: count().default(1),
      memFractionStatic: unitInterval().default(0.5),
      maxRunningRequests: count().optional(),
    })
    .prefault({}),
  /** In-training evaluation (slime `--eval-*`); off when `evalData` is left out. */
  evalData: path().optional(),
  evalName: name().default('aime'),
  evalInterval: count().default(20),
  evalSamples: count().default(1),
  evalMaxResponseLen: count().optional(),
  evalTopP: unitInterval().optional(),
  ...slimeCommon,
  curriculum: z.array(curriculumStage).min(1, { error: 'expected at least one curriculum stage' }),
});
export type RlConfig = z.output<typeof rl>;

const convert = z.strictObject({
  backend: z.enum(['convert', 'local']).default('convert'),
  ...stageCommon({ stall: '1h', attempt: '12h', retries: TOOL_RETRIES }),
  /** `--vocab-size` for the HF export (trims Megatron's padded rows); default: the trained model's vocab. */
  vocabSize: count().optional(),
  fp8: z
    .strictObject({
      /** Default: on when `precision` is fp8. */
      enabled: z.boolean().optional(),
      blockSize: count().default(128),
      /** Round scales up to powers of two (UE8M0-representable), as InfiR2's `bf16_cast_fp8.py` does. */
      pow2Scales: z.boolean().default(true),
      /** `quantization_config.fmt` written into the FP8 config (slime asserts it); `none`: the tool's config as is. */
      fmt: z.enum(['e4m3', 'none']).default('e4m3'),
    })
    .prefault({}),
});
export type ConvertConfig = z.output<typeof convert>;

export const EVAL_MODELS = ['base', 'hf', 'fp8', 'rl'] as const;
export type EvalModel = (typeof EVAL_MODELS)[number];

const benchmark = z.strictObject({
  /** evalscope dataset name (`--datasets`); default: the benchmark's key. */
  dataset: z.string().min(1).optional(),
  /** A local copy of the data (evalscope `local_path`; the local backend's `eval_<name>.jsonl`). */
  data: path().optional(),
  /** Generations per problem (`n`); the score is the mean over them. */
  samples: count(),
  temperature: nonNegative(),
  topP: unitInterval(),
  maxTokens: count(),
  /** evalscope generation-config key for the length (InfiR2's LiveCodeBench script uses `max_new_tokens`). */
  maxTokensKey: z.enum(['max_tokens', 'max_new_tokens']).default('max_tokens'),
  batchSize: count().default(32),
  /** evalscope `--timeout` (per request). */
  timeout: duration().prefault(18000),
  /** evalscope `--dataset-args` for this dataset (filters, prompt template, subsets…), passed as JSON. */
  datasetArgs: z.record(z.string(), z.unknown()).optional(),
  seed: natural().default(1234),
});
export type Benchmark = z.output<typeof benchmark>;

const evalConfig = z.strictObject({
  backend: z.enum(['evalscope', 'local']).default('evalscope'),
  ...stageCommon({ stall: '2h', attempt: '2d', retries: TOOL_RETRIES }),
  /** Models to evaluate: base (model.hf), hf / fp8 (the exported SFT model), rl (the final RL model). */
  models: z.array(z.enum(EVAL_MODELS)).min(1).optional(),
  server: z
    .strictObject({
      /** First port; each eval step gets its own (port + index) so evals can share a node. */
      port: z.number().int().min(1024).max(65000).default(8801),
      tensorParallel: count().default(1),
      warmups: natural().default(1),
      maxRunningRequests: count().default(8),
      chunkedPrefillSize: count().default(4096),
      /** How long the SGLang server may take to answer its health check. */
      readyTimeout: duration().prefault('30m'),
    })
    .prefault({}),
  apiKey: z.string().default('EMPTY'),
  benchmarks: z.record(name(), benchmark),
});
export type EvalConfig = z.output<typeof evalConfig>;

export const recipeSchema = z.strictObject({
  /** Names workflows and directories: a slug. */
  name: slug(),
  /** The preset this recipe starts from (resolved by the loader; kept for the record). */
  preset: z.string().optional(),
  description: z.string().optional(),
  precision: z.enum(PRECISIONS).default('fp8'),
  /** Runs live in `<runDir>/<run id>/`. */
  runDir: path(),
  /** FP8 block size of the local reference trainer (TE's blockwise recipe is fixed at 128). */
  fp8BlockSize: count().default(128),
  software,
  model,
  pools: z.record(name(), pool),
  cpt: cpt.optional(),
  sft: z.array(sftStage).optional(),
  convert: convert.optional(),
  rl: rl.optional(),
  eval: evalConfig.optional(),
});

export type Recipe = z.output<typeof recipeSchema>;
export type RecipeInput = z.input<typeof recipeSchema>;
export type CptConfig = NonNullable<Recipe['cpt']>;
