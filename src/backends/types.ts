/**
 * What a backend returns for one step: everything of a PlanStep that depends on the tool being driven. The
 * compiler adds the rest (id, pool, dependencies, retries, timeouts). Backends are pure: no I/O, no Temporal.
 */
import type { Command, Completion, PlanStep, ProgressSpec, ResumeSpec, CheckpointSpec } from '../plan/types.js';

export interface StepBody {
  command: Command;
  resume: ResumeSpec | null;
  /** Cleanup for work that outlives the local process (see PlanStep.onStop). */
  onStop?: PlanStep['onStop'];
  /** The scheduler job it runs as (see PlanStep.job). */
  job?: PlanStep['job'];
  /** The command starts infir2's launcher on each node itself (see PlanStep.nodeLaunchers). */
  nodeLaunchers?: PlanStep['nodeLaunchers'];
  /** Checkpoints of other roots it loads (see PlanStep.reads). */
  reads?: PlanStep['reads'];
  progress: ProgressSpec;
  checkpoint: CheckpointSpec | null;
  completion: Completion;
  inputs: PlanStep['inputs'];
  outputs: PlanStep['outputs'];
  /** The variables its code runs with where they are not the command's own: a Ray job's runtime env (slime). */
  runtimeEnv?: Record<string, string>;
  /** GPUs per node and nodes this step occupies. */
  gpus: number;
  nodes: number;
  summary: string;
}

/**
 * How a Megatron-style trainer finds its starting weights: `--load ROOT` (never an `iter_*` directory), an
 * optional `--ckpt-step N` (a number, or the `{iteration}` placeholder of a resume), `--pretrained-checkpoint`
 * (used only while ROOT has no tracker) and `--exit-on-missing-checkpoint` (never start from random weights).
 */
export interface LoadArgs {
  load: string;
  ckptStep?: number | '{iteration}';
  pretrained?: string;
  exitOnMissing?: boolean;
}

/** One phase of the CPT WSD lineage (see src/plan/cpt-lineage.ts). */
export interface CptPhase {
  id: 'cpt.warmup' | 'cpt.stable' | 'cpt.decay';
  name: 'warmup' | 'stable' | 'decay';
  /** Checkpoint root this phase saves to. */
  saveDir: string;
  /** `--train-iters`: the WSD schedule's total, the same for every phase of one lineage. */
  trainIters: number;
  /** `--lr-warmup-iters` (the decay phase passes 0, as InfiR2's decay script does). */
  warmupIters: number;
  /** Iteration the phase starts at and the boundary it stops on (its final checkpoint). */
  start: number;
  end: number;
  /** `--exit-interval`: the phase exits (after saving) on its boundary; none for the last phase. */
  exitInterval?: number;
  /** `--override-opt_param-scheduler`: take the schedule from the arguments, not the checkpoint. */
  overrideScheduler: boolean;
  first: LoadArgs;
  resume: LoadArgs;
}
