/**
 * The recipe format, part 2: the stages — continual pre-training, SFT, RL with its length curriculum, checkpoint
 * conversion and evaluation. Assembled into the recipe by `schema.ts`.
 */
import { z } from 'zod';
import { ROLLOUT_STALL, TOOL_RETRIES, TRAIN_RETRIES, TRAIN_STALL, adaptiveStall, arch, archOverride, estimates, evalEvery, keep, model, retries, seed, stageCommon, tensorParallel, wandbProject } from './schema-common.js';
import { count, duration, name, natural, nonNegative, path, port, positive, unitInterval } from './fields.js';

export const cpt = z
  .strictObject({
    backend: z.enum(['megatron', 'local']).default('megatron').describe('`megatron` (`pretrain_gpt.py` with TransformerEngine) or `local` (the reference trainer)'),
    // Megatron builds its dataset index before the first log line: allow for it.
    ...stageCommon({ stall: '2h', attempt: '14d', retries: TRAIN_RETRIES }),
    ...adaptiveStall(TRAIN_STALL),
    data: path().describe('Megatron: the indexed-dataset prefix (`--data-path`); local: a `.jsonl` file'),
    dataCache: path().optional().describe('Megatron `--data-cache-path`; default `<run>/cpt/data-cache`'),
    iterations: count().describe('total iterations of the one WSD schedule (`--train-iters`); stable is what warmup and decay leave'),
    warmupIters: natural().describe('linear warmup iterations (`--lr-warmup-iters`); 0: no `cpt.warmup` step'),
    decayIters: count().describe('iterations of the final decay (`--lr-wsd-decay-iters`); the `cpt.decay` step'),
    decayStyle: z
      .enum(['cosine', 'linear', 'exponential', 'minus_sqrt'])
      .default('cosine')
      .describe('shape of the decay (`--lr-wsd-decay-style`)'),
    saveInterval: count().describe('iterations between checkpoints (`--save-interval`); phase boundaries are saved regardless'),
    keep: keep(),
    evalEvery: evalEvery(),
    estimates: estimates(),
    logInterval: count().default(1).describe('iterations between log lines (`--log-interval`); progress is read from them'),
    evalInterval: count().default(100).describe('iterations between validation runs (`--eval-interval`)'),
    evalIters: natural().default(10).describe('batches per validation run (`--eval-iters`)'),
    seqLength: count().describe('tokens per sample (`--seq-length`)'),
    microBatchSize: count().default(1).describe('samples per GPU per forward pass (`--micro-batch-size`)'),
    globalBatchSize: count().describe('samples per optimizer step (`--global-batch-size`)'),
    parallel: tensorParallel,
    lr: positive().describe('peak learning rate (`--lr`)'),
    minLr: nonNegative().describe('learning rate at the end of the decay (`--min-lr`)'),
    weightDecay: nonNegative().default(0.1).describe('AdamW weight decay (`--weight-decay`)'),
    adamBeta1: unitInterval().default(0.9).describe('Adam β1 (`--adam-beta1`)'),
    adamBeta2: unitInterval().default(0.95).describe('Adam β2 (`--adam-beta2`)'),
    clipGrad: nonNegative().default(1.0).describe('gradient-norm clipping (`--clip-grad`)'),
    initMethodStd: positive().default(0.02).describe('standard deviation of weight initialisation (`--init-method-std`)'),
    seed: seed(),
    split: z
      .string()
      .regex(/^\d+(,\d+){0,2}$/, { error: 'expected weights like 90,5,5' })
      .default('969,30,1')
      .describe('train,valid,test weights of the data (`--split`)'),
    numWorkers: natural().default(2).describe('data-loader workers (`--num-workers`)'),
    initialLossScale: positive().optional().describe('`--initial-loss-scale`; left out: Megatron\'s default'),
    distributedTimeoutMinutes: count().optional().describe('NCCL timeout (`--distributed-timeout-minutes`); infir2\'s `stallTimeout` usually notices a hang first'),
    profile: z
      .boolean()
      .default(false)
      .describe('`--profile --use-pytorch-profiler --record-memory-history` (on in the InfiR2 scripts; costly)'),
    wandbProject: wandbProject().optional().describe('W&B project (`--wandb-project`); left out: no W&B'),
  })
  .describe('continued pretraining: one WSD schedule run as the steps `cpt.warmup`, `cpt.stable`, `cpt.decay`');

const slimeProfile = z
  .strictObject({
    pytorchProfiler: z.boolean().default(false).describe('`--use-pytorch-profiler`'),
    stepStart: natural().describe('first profiled step (`--profile-step-start`)'),
    stepEnd: natural().describe('step after the last profiled one (`--profile-step-end`)'),
    recordMemoryHistory: z.boolean().default(false).describe('`--record-memory-history`'),
  })
  .nullable()
  .default(null)
  .describe('slime profiling; `null`: off');

/** What SFT stages and RL share: slime's optimizer, parallelism and checkpoint arguments. */
const slimeCommon = {
  parallel: tensorParallel,
  recompute: z.boolean().default(true).describe('activation recomputation: `--recompute-granularity full --recompute-method uniform --recompute-num-layers 1`'),
  maxTokensPerGpu: count().optional().describe('dynamic batching: `--use-dynamic-batch-size --max-tokens-per-gpu N` instead of `microBatchSize`'),
  saveInterval: count().describe('steps (rollouts) between checkpoints (`--save-interval`)'),
  keep: keep(),
  evalEvery: evalEvery(),
  estimates: estimates(),
  globalBatchSize: count().describe('samples per optimizer step (`--global-batch-size`)'),
  microBatchSize: count().default(1).describe('samples per GPU per forward pass, without dynamic batching (`--micro-batch-size`)'),
  lr: positive().describe('peak learning rate (`--lr`)'),
  minLr: nonNegative().optional().describe('final learning rate (`--min-lr`); default: `lr`'),
  decayStyle: z.enum(['constant', 'linear', 'cosine', 'WSD']).describe('learning-rate schedule (`--lr-decay-style`)'),
  weightDecay: nonNegative().describe('AdamW weight decay (`--weight-decay`)'),
  adamBeta1: unitInterval().default(0.9).describe('Adam β1 (`--adam-beta1`)'),
  adamBeta2: unitInterval().default(0.95).describe('Adam β2 (`--adam-beta2`)'),
  seed: seed(),
  hfCheckpoint: path().optional().describe('HF directory for config and tokenizer (`--hf-checkpoint`); default: the upstream model (for RL in fp8: the FP8 export)'),
  refLoad: path()
    .optional()
    .describe('initial weights (`--ref-load`, a torch_dist root); default: the previous stage\'s checkpoints, then CPT\'s, then `model.base`'),
  arch: archOverride.optional().describe('this stage\'s model arguments where they differ from `model.arch` (each field of `model.arch` may appear)'),
  wandbProject: wandbProject().default('slime-dev').describe('W&B project (`--wandb-project`; W&B runs offline)'),
  wandbGroup: z.string().min(1).optional().describe('W&B group and log directory name; default `<recipe>-<step id>`'),
  profile: slimeProfile,
};

export const sftStage = z
  .strictObject({
    backend: z.enum(['slime', 'local']).default('slime').describe('`slime` (`train_async.py` through `ray job submit`) or `local` (the reference trainer)'),
    ...stageCommon({ stall: '2h', attempt: '14d', retries: TRAIN_RETRIES }),
    ...adaptiveStall(TRAIN_STALL),
    data: path().describe('a `.jsonl` or `.parquet` file of `{"messages": [...]}` rows (slime rejects a directory)'),
    samples: count()
      .optional()
      .describe('rows in `data`: the stage runs `epochs × ⌊samples / rolloutBatchSize⌋` steps; counted from a local `.jsonl` when left out'),
    epochs: count().describe('passes over the data (`--num-epoch`)'),
    rolloutBatchSize: count().default(64).describe('samples per step (`--rollout-batch-size`)'),
    warmupFraction: unitInterval().default(0).describe('share of the steps spent warming up (`--lr-warmup-fraction`)'),
    ...slimeCommon,
  })
  .describe('one SFT stage (the steps `sft.stage1`, `sft.stage2`, …); a stage starts from the previous one');
export type SftStage = z.output<typeof sftStage>;

const curriculumStage = z
  .strictObject({
    rollouts: count().describe('rollouts in this stage (`--num-rollout`); one optimizer step each when `rolloutBatchSize × samplesPerPrompt = globalBatchSize`'),
    maxResponseLen: count().describe('longest generated response, in tokens (`--rollout-max-response-len`)'),
    temperature: nonNegative().describe('sampling temperature of the rollouts (`--rollout-temperature`)'),
    maxTokensPerGpu: count().optional().describe('dynamic batching budget (`--max-tokens-per-gpu`); default: `maxResponseLen`'),
    wandbGroup: z.string().min(1).optional().describe('W&B group of this stage; default `<recipe>-<step id>`'),
  })
  .describe('one stage of the response-length curriculum (the steps `rl.stage1`, `rl.stage2`, …)');

export const rl = z
  .strictObject({
    backend: z.enum(['slime', 'local']).default('slime').describe('`slime` (`train.py` through `ray job submit`) or `local` (the reference trainer)'),
    // One rollout of long responses can take most of an hour before its first log line.
    ...stageCommon({ stall: '3h', attempt: '21d', retries: TRAIN_RETRIES }),
    ...adaptiveStall(ROLLOUT_STALL),
    data: path().describe('`.jsonl`/`.parquet` prompts with `inputKey` and `labelKey` (`--prompt-data`)'),
    inputKey: z.string().min(1).default('prompt').describe('the prompt\'s key in `data` (`--input-key`)'),
    labelKey: z.string().min(1).default('label').describe('the reference answer\'s key in `data` (`--label-key`)'),
    applyChatTemplate: z.boolean().default(true).describe('wrap prompts in the model\'s chat template (`--apply-chat-template`)'),
    rolloutShuffle: z.boolean().default(true).describe('shuffle the prompts (`--rollout-shuffle`)'),
    rmType: z.string().min(1).default('deepscaler').describe('rule-based reward (`--rm-type`)'),
    rolloutBatchSize: count().describe('prompts per rollout (`--rollout-batch-size`)'),
    samplesPerPrompt: count().describe('responses per prompt, the GRPO group (`--n-samples-per-prompt`)'),
    overSamplingBatchSize: count().optional().describe('prompts sampled per round when dynamic sampling filters (`--over-sampling-batch-size`)'),
    dynamicSamplingFilter: z.string().min(1).optional().describe('Python path of slime\'s dynamic-sampling filter (`--dynamic-sampling-filter-path`)'),
    balanceData: z.boolean().default(false).describe('balance tokens across data-parallel ranks (`--balance-data`)'),
    advantageEstimator: z.string().min(1).default('grpo').describe('`--advantage-estimator`'),
    useKlLoss: z.boolean().default(true).describe('add the KL loss to the reference model (`--use-kl-loss`)'),
    klLossCoef: nonNegative().default(0).describe('weight of the KL loss (`--kl-loss-coef`)'),
    klLossType: z.string().min(1).default('low_var_kl').describe('KL estimator (`--kl-loss-type`)'),
    entropyCoef: nonNegative().default(0).describe('entropy bonus (`--entropy-coef`)'),
    epsClip: positive().default(0.2).describe('lower PPO clip range (`--eps-clip`)'),
    epsClipHigh: positive().default(0.28).describe('upper PPO clip range, clip-higher (`--eps-clip-high`)'),
    useTis: z.boolean().default(false).describe('truncated importance sampling between rollout and training numerics (`--use-tis`)'),
    colocate: z.boolean().default(true).describe('training and SGLang share the GPUs (`--colocate`)'),
    sglang: z
      .strictObject({
        gpusPerEngine: count().default(1).describe('GPUs per SGLang engine (`--rollout-num-gpus-per-engine`)'),
        memFractionStatic: unitInterval().default(0.5).describe('share of GPU memory SGLang reserves (`--sglang-mem-fraction-static`)'),
        maxRunningRequests: count().optional().describe('`--sglang-max-running-requests`'),
      })
      .prefault({})
      .describe('the SGLang rollout engines'),
    evalData: path().optional().describe('in-training evaluation data (`--eval-prompt-data`); left out: no in-training evaluation'),
    evalName: name().default('aime').describe('name of the in-training evaluation set'),
    evalInterval: count().default(20).describe('rollouts between in-training evaluations (`--eval-interval`)'),
    evalSamples: count().default(1).describe('responses per evaluation prompt (`--n-samples-per-eval-prompt`)'),
    evalMaxResponseLen: count().optional().describe('`--eval-max-response-len`'),
    evalTopP: unitInterval().optional().describe('`--eval-top-p`'),
    ...slimeCommon,
    curriculum: z
      .array(curriculumStage)
      .min(1, { error: 'expected at least one curriculum stage' })
      .describe('the response-length curriculum: stage 1 starts from the last SFT checkpoint, stage K from stage K − 1'),
  })
  .describe('GRPO reinforcement learning with a response-length curriculum; rolls out with the FP8 export when precision is fp8');
export type RlConfig = z.output<typeof rl>;

export const convert = z
  .strictObject({
    backend: z
      .enum(['convert', 'local'])
      .default('convert')
      .describe('`convert` (InfiR2\'s `tools/convert_torch_dist_to_hf.py` and `tools/bf16_cast_fp8.py`) or `local`'),
    ...stageCommon({ stall: '1h', attempt: '12h', retries: TOOL_RETRIES }),
    vocabSize: count().optional().describe('`--vocab-size` of the HF export (trims Megatron\'s padded rows); default: the trained model\'s vocabulary'),
    fp8: z
      .strictObject({
        enabled: z.boolean().optional().describe('make the FP8 copy (`convert.fp8`); default: when `precision` is fp8'),
        blockSize: count().default(128).describe('the weight scales\' block (block × block)'),
        pow2Scales: z.boolean().default(true).describe('round scales up to powers of two (UE8M0-representable), as InfiR2\'s `bf16_cast_fp8.py` does'),
        fmt: z
          .enum(['e4m3', 'none'])
          .default('e4m3')
          .describe('`quantization_config.fmt` written into the FP8 config (slime asserts it); `none`: the tool\'s config as it is'),
      })
      .prefault({})
      .describe('the FP8 cast of the HF export'),
  })
  .describe('the HF export of the final checkpoint (`convert.hf`), its FP8 cast (`convert.fp8`) and, for eval of `rl`, the RL model\'s export (`convert.rl`)');
export type ConvertConfig = z.output<typeof convert>;

export const EVAL_MODELS = ['base', 'hf', 'fp8', 'rl'] as const;
export type EvalModel = (typeof EVAL_MODELS)[number];

const benchmark = z
  .strictObject({
    dataset: z.string().min(1).optional().describe('evalscope dataset name (`--datasets`); default: the benchmark\'s key'),
    data: path().optional().describe('a local copy of the data (evalscope `local_path`; the local backend reads this `.jsonl`)'),
    samples: count().describe('generations per problem (`n`); the score is the mean over them (avg@n)'),
    temperature: nonNegative().describe('sampling temperature'),
    topP: unitInterval().describe('nucleus-sampling top-p'),
    maxTokens: count().describe('longest generation, in tokens'),
    maxTokensKey: z
      .enum(['max_tokens', 'max_new_tokens'])
      .default('max_tokens')
      .describe('evalscope generation-config key for the length (InfiR2\'s LiveCodeBench script uses `max_new_tokens`)'),
    batchSize: count().default(32).describe('concurrent requests (`--eval-batch-size`)'),
    timeout: duration().prefault(18000).describe('evalscope `--timeout`, per request'),
    datasetArgs: z
      .record(z.string(), z.unknown())
      .optional()
      .describe('evalscope `--dataset-args` for this dataset (filters, prompt template, subsets…), passed as JSON'),
    seed: natural().default(1234).describe('sampling seed of the local backend (`--seed`); evalscope keeps its own'),
  })
  .describe('one benchmark, run as the step `eval.<benchmark>` (or `eval.<model>.<benchmark>` with several models)');
export type Benchmark = z.output<typeof benchmark>;

export const evalConfig = z
  .strictObject({
    backend: z
      .enum(['evalscope', 'local'])
      .default('evalscope')
      .describe('`evalscope` (an SGLang server and evalscope in service mode, supervised by `src/backends/tools/evalscope-runner.sh`) or `local`'),
    ...stageCommon({ stall: '2h', attempt: '2d', retries: TOOL_RETRIES }),
    ...adaptiveStall(ROLLOUT_STALL),
    models: z
      .array(z.enum(EVAL_MODELS))
      .min(1)
      .optional()
      .describe('models to evaluate: `base` (`model.hf`), `hf`/`fp8` (the exported SFT model), `rl` (the final RL model); default: the last one the recipe makes'),
    server: z
      .strictObject({
        port: port()
          .default(8801)
          .describe('first port; eval step i serves on port + i, so evals can share a node'),
        tensorParallel: count().default(1).describe('SGLang `--tp`'),
        warmups: natural().default(1).describe('SGLang `--warmups`'),
        maxRunningRequests: count().default(8).describe('SGLang `--max-running-requests`'),
        chunkedPrefillSize: count().default(4096).describe('SGLang `--chunked-prefill-size`'),
        readyTimeout: duration().prefault('30m').describe('how long the SGLang server may take to answer `/health_generate`'),
      })
      .prefault({})
      .describe('the SGLang server each eval step starts'),
    apiKey: z.string().default('EMPTY').describe('API key evalscope sends to the server'),
    benchmarks: z.record(name(), benchmark).describe('benchmarks by name (the name is in the step id)'),
  })
  .describe('evaluation of the trained models on benchmarks; each step writes `<run>/<step id>/report.json` with the `accuracy`');
export type EvalConfig = z.output<typeof evalConfig>;
