/**
 * The recipe format, part 1: what the stages share — retry budgets, the stage fields every stage carries, the
 * model's architecture, pools, parallelism (software: schema-software.ts). `schema.ts` assembles the recipe; this file and
 * `schema-stages.ts` hold its parts. Every key's `.describe()` text is its meaning in docs/recipe-reference.md.
 */
import { z } from 'zod';
import { DEFAULT_LOG_MAX_MB, type Launcher, type Precision } from '../plan/types.js';
import { DEFAULT_RESTART, HINT_LOSS, LLAMA3_FAILURES_PER_GPU_HOUR } from './checkpoint-interval.js';
import { count, duration, envName, name, natural, path, positive } from './fields.js';

// The Plan's types (src/plan/types.ts) name the same values; `satisfies` keeps the two in step.
export const PRECISIONS = ['fp8', 'bf16'] as const satisfies readonly Precision[];
export const LAUNCHERS = ['local', 'torchrun', 'slurm', 'ray'] as const satisfies readonly Launcher[];

/**
 * Retry budget per failure class (see `FAILURE_CLASSES` in src/plan/types.ts): failures in a row without a new
 * checkpoint, a restart loop, not a step's lifetime failures (workflows/retry-rule.ts). `config` failures are
 * never retried: the same command would fail the same way.
 */
export const retries = (d: { crash: number; hang: number; oom: number; preempted: number; storage: number }) =>
  z
    .strictObject({
      crash: natural().default(d.crash).describe('crashes in a row without a new checkpoint that are retried: the trainer exits with an error'),
      hang: natural().default(d.hang).describe('hangs in a row without a new checkpoint that are retried: no progress for `stallTimeout`, or NCCL/watchdog timeouts in the log'),
      oom: natural().default(d.oom).describe('out-of-memory failures in a row without a new checkpoint that are retried: the GPU (or host) ran out of memory'),
      preempted: natural()
        .default(d.preempted)
        .describe('preemptions in a row without a new checkpoint that are retried: the node or the worker went away (SIGTERM, SIGKILL, a lost heartbeat)'),
      storage: natural()
        .default(d.storage)
        .describe('storage failures in a row without a new checkpoint that are retried: the disk refused a write (full, read-only, over quota, permission); the pause before each doubles, up to 10 minutes'),
    })
    .prefault({})
    .describe(
      'retries per failure class, each counting failures in a row that came without a new complete checkpoint (a restart loop): a failure after a new checkpoint is retried and starts every count again; `config` failures (bad arguments, missing files) are never retried',
    );

/**
 * Defaults of the adaptive stall limits of a stage kind (src/activities/stall-policy.ts). Training steps are
 * steady: a 7B CPT iteration of 10–30 s gives a limit of a few minutes. RL rollouts and evaluation samples vary
 * several-fold in length, so their rule is a multiple of the longest gap seen, over a floor of minutes.
 */
export interface StallDefaults {
  startup: string;
  factor: number;
  floor: string;
  save: string;
  eval: string;
}
export const TRAIN_STALL: StallDefaults = { startup: '30m', factor: 10, floor: '20s', save: '30m', eval: '30m' };
export const ROLLOUT_STALL: StallDefaults = { startup: '45m', factor: 3, floor: '10m', save: '30m', eval: '30m' };

const stallFactor = () =>
  z
    .number({ error: 'expected a number ≥ 1' })
    .min(1, { error: 'must be at least 1 (a limit below the gaps already seen would kill healthy training)' });

/** What every stage carries: where it runs, how long it may go quiet, and how often it may be retried. */
export const stageCommon = (d: { stall: string; attempt: string; retries: Parameters<typeof retries>[0] }) => ({
  pool: name().describe('the pool (a key of `pools`) whose workers run this stage'),
  nodes: count().optional().describe('nodes this stage uses; default: all of the pool\'s'),
  gpusPerNode: natural().optional().describe('GPUs per node this stage uses; default: all of the pool\'s'),
  retries: retries(d.retries),
  stallTimeout: duration()
    .prefault(d.stall)
    .describe(
      'no progress for this long (no new iteration, rollout or eval line) and the attempt is a hang: it is stopped and retried; the upper bound of every adaptive limit below',
    ),
  attemptTimeout: duration().prefault(d.attempt).describe('upper bound of one attempt'),
  extraArgs: z
    .array(z.string())
    .default([])
    .describe(
      'appended to the trainer\'s arguments (argparse: the last value of a flag wins); flags infir2 manages (`--load`, `--save`, `--ckpt-step`, …) and flags that break resuming (`--no-load-optim`, `--no-load-rng`, `--finetune`) are refused',
    ),
  env: z.record(envName(), z.string()).default({}).describe('environment of the training processes (slime: the Ray runtime env); its values travel in the plan and the run\'s history: put tokens in `secrets`'),
  secrets: z
    .record(envName(), envName())
    .default({})
    .describe(
      'secrets by reference, `TRAINER_VAR: WORKER_VAR`: the trainer\'s variable gets the value of the worker\'s environment variable, read when the process is launched (slime: put into the Ray runtime env at submission); only the names enter the plan, history and logs; a worker without the variable fails the step as a configuration error naming it',
    ),
});

/** The adaptive stall limits of a stage that prints progress (every stage but the conversions). */
export const adaptiveStall = (d: StallDefaults) => ({
  startupTimeout: duration()
    .prefault(d.startup)
    .describe('the limit from the launch (and from a "loading checkpoint" line) until a few iterations have been seen: process start, checkpoint load, data index'),
  stallFactor: stallFactor()
    .default(d.factor)
    .describe('once a few iterations have been seen, the limit is `max(stallFloor, stallFactor × g)`, g the 95th percentile of the gaps between iterations (RL and evaluation: the longest gap)'),
  stallFloor: duration().prefault(d.floor).describe('the least the limit learned from the gaps can be'),
  saveTimeout: duration()
    .prefault(d.save)
    .describe('a checkpoint save (announced by "saving checkpoint", or after an iteration that is a multiple of `saveInterval`) may be silent this long until the step has made one; after that, 4× its longest save (at least the training limit, at most this)'),
  evalTimeout: duration().prefault(d.eval).describe('the evaluation after an iteration that is a multiple of `evalInterval` may be silent this long'),
});

// storage: 12 pauses doubling from the retry delay (5 s) to 10 min wait about an hour for a person to free space.
export const TRAIN_RETRIES = { crash: 3, hang: 2, oom: 1, preempted: 10, storage: 12 };
export const TOOL_RETRIES = { crash: 1, hang: 1, oom: 1, preempted: 3, storage: 6 };

/** Model architecture: what Megatron/slime need on the command line and what lint compares between stages. */
export const arch = z
  .strictObject({
    numLayers: count().describe('transformer layers (`--num-layers`, HF `num_hidden_layers`)'),
    hiddenSize: count().describe('model width (`--hidden-size`)'),
    ffnHiddenSize: count().describe('SwiGLU inner width (`--ffn-hidden-size`, HF `intermediate_size`)'),
    numAttentionHeads: count().describe('query heads (`--num-attention-heads`)'),
    numQueryGroups: count().describe('key/value heads of grouped-query attention (`--num-query-groups`, HF `num_key_value_heads`)'),
    rotaryBase: positive().describe('RoPE base (`--rotary-base`, HF `rope_theta`)'),
    vocabSize: count().describe('vocabulary of the HF model (HF `vocab_size`); Megatron pads it, the export trims back to it'),
    normEpsilon: positive().describe('RMSNorm epsilon (`--norm-epsilon`, HF `rms_norm_eps`)'),
    tieEmbeddings: z.boolean().describe('input and output embeddings shared (HF `tie_word_embeddings`)'),
    maxContext: count().describe('longest sequence the model handles (`--max-position-embeddings`); lint compares generation lengths with it'),
  })
  .describe('the model architecture: what Megatron and slime need on the command line, and what lint compares between stages');
export type Arch = z.output<typeof arch>;

/** A stage's own view of the architecture (slime's model script may differ from CPT's: InfiR2 1.5B does). */
export const archOverride = arch.partial();

export const model = z
  .strictObject({
    name: z.string().min(1).describe('human-readable name for summaries, e.g. `Qwen2.5-7B`'),
    hf: path()
      .optional()
      .describe('HF model directory: config and tokenizer for SFT/RL (`--hf-checkpoint`), the HF export\'s `--origin-hf-dir`, the `base` model of eval'),
    tokenizer: path().optional().describe('HF directory of the tokenizer CPT uses (`--tokenizer-model`); default: `hf`'),
    base: path()
      .optional()
      .describe('the base model as a Megatron torch_dist checkpoint root (tracker `release`); CPT starts from it, SFT too when there is no CPT'),
    arch,
  })
  .describe('the model being trained');

export const pool = z
  .strictObject({
    taskQueue: z
      .string()
      .regex(/^\S+$/, { error: 'expected a task queue name without spaces' })
      .describe('the Temporal task queue the pool\'s workers poll (`infir2 worker --pool <name>` polls `infir2-<name>`, `--task-queue` any other)'),
    nodes: count().default(1).describe('nodes a step of this pool may span'),
    gpusPerNode: natural().describe('GPUs per node; 0 for a CPU-only pool'),
    ranksPerNode: count()
      .optional()
      .describe('processes torchrun starts per node (`--nproc_per_node`); default: one per GPU, one on a CPU-only pool. More than one on a CPU pool runs the local trainer data-parallel over gloo'),
    launcher: z
      .enum(LAUNCHERS)
      .describe('how a step starts its processes: `local` (one process, or `torchrun --standalone`), `torchrun` (one node), `slurm` (`srun` starts torchrun on each node), `ray` (`ray job submit`, for slime)'),
    rdzvEndpoint: z
      .string()
      .regex(/^[^\s:]+:\d+$/, { error: 'expected host:port' })
      .default('localhost:29400')
      .describe('torchrun/srun rendezvous `host:port`; a multi-node pool names its head node'),
    rayAddress: z
      .string()
      .regex(/^https?:\/\/\S+$/, { error: 'expected an http(s) URL' })
      .default('http://127.0.0.1:8265')
      .describe('the Ray dashboard address `ray job submit` and `ray job stop` talk to'),
  })
  .describe('a worker pool: machines with the same GPUs and launcher, served by workers on one task queue');
export type Pool = z.output<typeof pool>;

/** What the steps' logs keep (src/activities/step-log.ts writes them). */
export const logs = z
  .strictObject({
    maxMB: natural()
      .default(DEFAULT_LOG_MAX_MB)
      .describe(
        'cap of each step\'s log, MiB: past it the log keeps its first tenth (`<step>.log.head`: the launch command, the first iterations) and its newest part (`<step>.log.1`, `<step>.log`), and drops the middle with a marker line; 0: no cap',
      ),
  })
  .prefault({})
  .describe('what the steps\' logs (`<run>/logs/<step>.log`) keep on disk');

export const tensorParallel = z
  .strictObject({
    tensor: count().default(1).describe('tensor-parallel size (`--tensor-model-parallel-size`)'),
    pipeline: count().default(1).describe('pipeline-parallel size (`--pipeline-model-parallel-size`)'),
    context: count().default(1).describe('context-parallel size (`--context-parallel-size`)'),
    expert: count().default(1).describe('expert-parallel size (`--expert-model-parallel-size`; slime only)'),
    expertTensor: count().default(1).describe('expert tensor-parallel size (`--expert-tensor-parallel-size`; slime only)'),
  })
  .prefault({})
  .describe('model parallelism; TP × PP × CP must divide the stage\'s GPUs');
export type Parallel = z.output<typeof tensorParallel>;

/**
 * A training stage's timings, measured on an earlier run or estimated: with them `infir2 plan` and lint weigh
 * the stage's `saveInterval` against the Young–Daly optimum (src/recipe/checkpoint-interval.ts).
 */
export const estimates = () =>
  z
    .strictObject({
      iterationTime: duration().describe('wall time of one iteration (SFT, RL: one step, rollout generation included)'),
      saveTime: duration().describe('time training waits while one checkpoint is written'),
    })
    .optional()
    .describe(
      `measured or estimated timings of this stage; with them \`infir2 plan\` shows the goodput of \`saveInterval\` and its Young–Daly optimum, and lint hints when the interval loses over ${100 * HINT_LOSS} points of goodput against it`,
    );

/** Checkpoint retention of a training stage (rundir/retention.ts applies it as the step saves). */
export const keep = () =>
  z
    .strictObject({
      last: count().optional().describe('keep the newest N complete checkpoints; default: every checkpoint'),
      every: count().optional().describe('also keep each checkpoint at a multiple of N iterations (a thinned history for forks and evaluations)'),
      boundaries: z
        .boolean()
        .default(true)
        .describe('keep the phase boundaries and final checkpoints (CPT: the end of warmup, stable and decay; SFT, RL: each stage\'s last); lint refuses `false` where a later step loads one'),
    })
    .prefault({})
    .describe(
      'which complete checkpoints stay on disk as newer ones are saved; the rest are deleted, and recorded in `<checkpoints>/.infir2-retention.jsonl`. Never deleted: the newest complete one, and one a reader (a fork\'s first load) has pinned',
    );
export type Keep = z.output<ReturnType<typeof keep>>;

/** Evaluation while a stage trains (workflows/checkpoint-eval.ts). */
export const evalEvery = () =>
  count()
    .optional()
    .describe(
      'evaluate the stage\'s checkpoints while it trains: each one at a multiple of N (a multiple of `saveInterval`) and the last are exported to HF and run on `eval`\'s benchmarks on `eval.pool`, as a child workflow each; the scores are a series in `status` and the Web UI. Pinned while read, so retention keeps them',
    );

/** The failure model behind the checkpoint-interval advice (`estimates` of each stage). */
export const goodput = z
  .strictObject({
    failureRate: positive()
      .default(LLAMA3_FAILURES_PER_GPU_HOUR)
      .describe(
        'unexpected interruptions per GPU-hour: a step on G GPUs fails on average every 1 / (failureRate × G) hours; default: Llama 3 pre-training\'s 419 interruptions in 54 days on 16,384 H100s (≈ 1.97e-5)',
      ),
    restartTime: duration()
      .prefault(DEFAULT_RESTART)
      .describe('time lost per failure besides the recomputed iterations: noticing it, restarting, loading the checkpoint'),
  })
  .prefault({})
  .describe('the failure model behind the checkpoint-interval advice of `infir2 plan` and lint (docs/operations.md, "Checkpoint interval")');

export const seed = () => natural().default(1234).describe('random seed (`--seed`)');
export const wandbProject = () => z.string().min(1);
