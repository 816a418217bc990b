/**
 * The Plan: what a recipe compiles to, and the only thing the workflows see.
 *
 * It is plain JSON data (no functions, no classes) so that it can cross into Temporal as a workflow argument,
 * be printed by `infir2 plan --json`, and be diffed between runs. Every path in it is absolute, every command
 * is a complete argv (no shell). This file and its parts (preflight-types.ts, notify-spec.ts) are the single source
 * of truth for the Plan's shape; they import nothing else, so both the workflow bundle and the activities can use them.
 */
import type { NotifySpec } from './notify-spec.js';
import type { PreflightSpec } from './preflight-types.js';

/** Stable stage ids (docs/architecture.md#stage-ids). Eval steps are `eval.<benchmark>` or `eval.<model>.<benchmark>`. */
export const STAGE_IDS = [
  'cpt.warmup',
  'cpt.stable',
  'cpt.decay',
  'sft.stage1',
  'sft.stage2',
  'convert.hf',
  'convert.fp8',
  'rl.stage1',
  'rl.stage2',
  'convert.rl',
] as const;

export type StepKind = 'cpt' | 'sft' | 'convert' | 'rl' | 'eval';
export type BackendName = 'megatron' | 'slime' | 'convert' | 'evalscope' | 'local';
export type Precision = 'fp8' | 'bf16';
/** A run's precision: one, or both for a parity run (`infir2 parity`: BF16 and FP8 variants side by side). */
export const BOTH_PRECISIONS = 'bf16+fp8';
export type RunPrecision = Precision | typeof BOTH_PRECISIONS;
export type Launcher = 'local' | 'torchrun' | 'slurm' | 'ray';

/**
 * Why an attempt failed. Each class has its own retry budget; `config` is never retried.
 * - crash: non-zero exit that is none of the others
 * - hang: the process was alive but made no progress for the stall timeout
 * - oom: CUDA/host out-of-memory (a message in the output, or a SIGKILL while the kernel counted an OOM kill)
 * - preempted: SIGTERM/SIGKILL from outside, node or worker lost, heartbeat timeout of a dead worker
 * - storage: the disk refused a write (full, read-only, quota, permission): waited out with growing pauses, as a
 *   person usually frees the space within minutes
 * - config: the command cannot work as given (bad argument, missing input, traceback on argument parsing)
 */
export const FAILURE_CLASSES = ['crash', 'hang', 'oom', 'preempted', 'storage', 'config'] as const;
export type FailureClass = (typeof FAILURE_CLASSES)[number];

export interface Command {
  /** argv[0] is the program; no shell ever interprets it. */
  argv: string[];
  /** Added to the worker's environment. */
  env: Record<string, string>;
  /**
   * Secrets by reference: trainer variable → the worker's environment variable that holds its value, read at
   * launch (activities/secrets.ts). Only names travel in the plan; `{secret:NAME}` in argv is filled the same way.
   */
  secrets?: Record<string, string>;
  /** Absolute working directory (created before launch). */
  cwd: string;
}

/** Which parser turns the process's output lines into progress. */
export type ProgressFormat = 'megatron' | 'slime' | 'evalscope' | 'none';

export interface ProgressSpec {
  format: ProgressFormat;
  /** Iteration the step ends at (Megatron: the phase boundary; slime: last rollout id + 1); null if unknown. */
  totalIterations: number | null;
}

/**
 * `iter_0035000`: Megatron's name for the directory of one iteration. Defined here, a leaf, so that the backends'
 * argv, the checkpoint inspection and the workflows (which fill it into evaluation templates) share one copy.
 */
export function iterDirName(iteration: number): string {
  return `iter_${String(iteration).padStart(7, '0')}`;
}

/**
 * A Megatron-layout checkpoint root: `iter_%07d/` directories and `latest_checkpointed_iteration.txt`
 * written last. An iteration is complete when its directory holds `metadata.json` and the tracker has
 * reached it (docs/architecture.md#durable-steps, docs/infir2-recipe.md §3.1).
 */
export interface CheckpointSpec {
  layout: 'megatron';
  /** The root passed to `--save` (never an `iter_*` directory). */
  dir: string;
  /** Which complete checkpoints stay as newer ones are saved (rundir/retention.ts); absent: all of them. */
  retention?: RetentionSpec;
}

/**
 * Evaluation of a training step's checkpoints while it trains (workflows/checkpoint-eval.ts): the steps that
 * export one checkpoint and run the benchmarks on it, as templates with `{iteration}` and `{iterDir}`
 * (`iter_0000020`) in their ids, commands and paths. Each runs as an ordinary step on the eval pool.
 */
export interface CheckpointEvalSpec {
  /** Checkpoints at multiples of this (and the step's last) are evaluated. */
  every: number;
  /** The checkpoint root the iterations are read from (the export pins the one it reads). */
  root: string;
  /** The eval pool's task queue. */
  taskQueue: string;
  /** In order: the HF export, then one step per benchmark (`kind: 'eval'`, whose report is the score). */
  steps: PlanStep[];
}

export interface RetentionSpec {
  /** The newest N complete checkpoints; null: no limit by count. */
  last: number | null;
  /** Also every checkpoint at a multiple of N; null: none. */
  every: number | null;
  /** Never deleted: the phase boundaries and final checkpoints later steps load. */
  protect: number[];
  /** The policy in words (`keep last 2, every 100, boundaries 10, 480`), for the record and the log. */
  summary: string;
  /**
   * Checkpoints queued for evaluation while training (`evalEvery`): a multiple of `every` stays until its
   * evaluation's last result file (`marker`, with `{iteration}`) exists. A failed evaluation keeps its checkpoint.
   */
  awaitEval?: { every: number; marker: string };
  /** At most this many complete checkpoints on disk at once, and the bytes of one (with and without optimizer state). */
  maxKept: number;
  checkpointBytes: { withOptimizer: number; weightsOnly: number };
}

/** When is the step done: the process exited 0 and this holds. */
export type Completion =
  | { kind: 'checkpoint'; dir: string; iteration: number }
  | { kind: 'files'; paths: string[] };

/**
 * How to continue after a failure. When the step's checkpoint dir holds a complete iteration N, the activity
 * launches `argv` instead of `command.argv`, with `{iteration}` replaced by N and `{nextIteration}` by N + 1.
 * null: the step is not resumable and reruns from scratch (conversions, evaluation).
 */
export interface ResumeSpec {
  argv: string[];
}

export type RetryBudgets = Record<FailureClass, number>;

/**
 * The cap of a step's log, MiB, where the recipe says nothing (`logs.maxMB`) and for plans recorded before the
 * field: a trainer printing 5,000 lines a second fills a GB in minutes.
 */
export const DEFAULT_LOG_MAX_MB = 1024;

/**
 * The launcher in front of every step's command (relative to the infir2 tree): it owns the command's process tree
 * on its node and stops it so that a trainer saving on SIGTERM can (src/launcher/infir2_launch.py's header).
 */
export const LAUNCHER_FILE = 'src/launcher/infir2_launch.py';
/**
 * How python3 runs the launcher: isolated (-I: no PYTHON* variables, no user site, no current directory on the
 * path), so that a step's PYTHONPATH cannot put modules of its own into the process that stops its tree; and
 * without site-packages (-S: it uses the standard library only), ~30 ms less at every start on a busy node.
 */
export const LAUNCHER_PYTHON_FLAGS = ['-I', '-S'] as const;

export interface SchedulerJobSpec {
  scheduler: 'slurm';
  /** The job's name, unique per launch. */
  name: string;
  probe: { argv: string[] };
}

export interface PlanStep {
  /** Stable id, e.g. `cpt.stable` (docs/architecture.md#stage-ids). */
  id: string;
  kind: StepKind;
  backend: BackendName;
  /** Pool name; its task queue is in `Plan.pools`. */
  pool: string;
  nodes: number;
  /** GPUs per node this step needs; 0 for CPU-only steps. */
  gpus: number;
  /** Ids of steps that must complete first. */
  dependsOn: string[];
  /** Resolved input paths by role (e.g. `load`, `refLoad`, `hfCheckpoint`, `data`). */
  inputs: Record<string, string>;
  /** Output paths by role (e.g. `checkpointDir`, `hfDir`, `report`). */
  outputs: Record<string, string>;
  command: Command;
  resume: ResumeSpec | null;
  /**
   * Run after the step's process group has been stopped before completing (cancel, stall, shutdown), for work
   * that outlives the local process: e.g. `ray job stop <submission-id>`, since killing the `ray job submit`
   * client leaves the Ray job training. The lock on the step's directory records it too, so that when a worker
   * dies without running it, the attempt that takes the directory over does. null: stopping the process group
   * is enough.
   */
  onStop?: {
    argv: string[];
    /**
     * A command that prints something while the stopped work still runs (`squeue --name=…`): the stop waits until
     * it prints nothing, since `scancel` returns before the job's ranks have exited (and they may save on the
     * way out), and no next attempt may train in the directory meanwhile.
     */
    untilGone?: { argv: string[] };
  } | null;
  /**
   * The command starts infir2's launcher (LAUNCHER_FILE) on each of its nodes itself: srun runs `python3
   * infir2_launch.py -- torchrun …` as its task. The supervisor then puts none in front of the whole command and
   * never signals it (srun would forward a signal to every process of the step, data-loader workers included):
   * it stops the attempt through the launchers' stop file alone. Absent: the supervisor starts the launcher in
   * front of the command.
   */
  nodeLaunchers?: boolean;
  /**
   * The batch-scheduler job an attempt runs as (srun names it), and the command that finds its id and nodes
   * (`squeue … --format=%i|%N`, one `id|nodes` row): `status` shows them. Its `{attempt}`/`{launch}`
   * placeholders are filled as the command's are. Absent: the step is no scheduler job.
   */
  job?: SchedulerJobSpec | null;
  progress: ProgressSpec;
  checkpoint: CheckpointSpec | null;
  completion: Completion;
  /**
   * Seconds without progress after which the attempt is a hang, at most (the recipe's `stallTimeout`). Within it,
   * `stall` (when present) sets the limit of each phase of an attempt; without it, this is the limit throughout.
   */
  stallTimeoutSec: number;
  /** Adaptive stall limits (activities/stall-policy.ts). Absent: plans recorded before them, steps with no progress. */
  stall?: StallSpec;
  /** Its checkpoints evaluated while it trains (absent: none). */
  checkpointEval?: CheckpointEvalSpec;
  /**
   * Checkpoints of other roots the step's first attempt loads (a fork's decay: the source run's stable
   * checkpoint; an evaluation's export: the checkpoint under evaluation): pinned while that attempt runs, so
   * that their root's retention cannot delete them.
   */
  reads?: { dir: string; iteration: number }[];
  /** Upper bound for one attempt, seconds. */
  attemptTimeoutSec: number;
  retries: RetryBudgets;
  /**
   * Cap of the step's log, MiB (the recipe's `logs.maxMB`): past it the log keeps its beginning and its newest
   * part. 0: no cap. Absent in plans recorded before it: `DEFAULT_LOG_MAX_MB`.
   */
  logMaxMB?: number;
  /** One line for humans: what this step does. */
  summary: string;
  /** What the worker checks before it launches the trainer (src/preflight/); absent: plans recorded before it. */
  preflight?: PreflightSpec;
}

/** The adaptive stall limits of a step (activities/stall-policy.ts), seconds. */
export interface StallSpec {
  /** From the launch, and after a checkpoint-load line, until a few iteration gaps have been seen. */
  startupSec: number;
  /** Plain training may be silent for `max(floorSec, factor × g)`, g a statistic of the gaps seen (`basis`). */
  factor: number;
  floorSec: number;
  /** p95: steady training; max: RL rollouts and evaluations, whose lengths vary several-fold. */
  basis: 'p95' | 'max';
  /** A checkpoint save (announced, or after an iteration that is a multiple of `saveEvery`) may take this long. */
  saveSec: number;
  /**
   * Once the step has made a save, later ones may take this many times the longest (at least the training
   * limit, at most `saveSec`). Absent in plans recorded before: `saveSec` always.
   */
  saveFactor?: number;
  /** The evaluation after an iteration that is a multiple of `evalEvery` may take this long. */
  evalSec: number;
  saveEvery: number | null;
  evalEvery: number | null;
  /** The recipe's `stallTimeout`: no limit exceeds it. */
  capSec: number;
}

export interface PoolSpec {
  taskQueue: string;
  nodes: number;
  gpusPerNode: number;
  launcher: Launcher;
}

export interface Plan {
  version: 1;
  /** The recipe's name (a slug). */
  recipe: string;
  runId: string;
  /** Absolute run directory: checkpoints, logs and the manifest of this run live under it. */
  runDir: string;
  precision: RunPrecision;
  /** Human-readable model name (e.g. `Qwen2.5-7B`), for summaries. */
  model: string;
  pools: Record<string, PoolSpec>;
  /** Topologically ordered. */
  steps: PlanStep[];
  /** Webhooks told of the run's events (absent: none). */
  notify?: NotifySpec;
}
