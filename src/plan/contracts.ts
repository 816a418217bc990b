/**
 * The data that crosses the workflow/activity/client boundary: a step's progress (also the heartbeat details), its
 * state and result, a run's status, and the names of the messages that carry them. Plain types, strings and the
 * empty step state, no imports but the Plan's types: the workflows, the activities, the client and the CLI all read it.
 * `workflows/definitions.ts` turns the names into Temporal query/signal definitions.
 */
import type { AttemptTime, StepTime } from './goodput.js';
import type { FailureClass } from './types.js';

export type StepStatus = 'pending' | 'running' | 'completed' | 'kept' | 'failed' | 'cancelled' | 'skipped';

/** A step (or an attempt) that waits for something; `status` shows it with how long it has waited. */
export interface Waiting {
  /** One line: `disk full on /data/run/cpt (1.2 GB free)`, `GPU slots: 2 of 8 free, needs 4`. */
  reason: string;
  /** ISO time the wait began. */
  since: string;
  /** ISO time the wait ends by itself (a retry pause), or null. */
  until: string | null;
}

/** Progress as the activity reads it from the trainer's output; also the heartbeat details. */
export interface Progress {
  iteration: number | null;
  totalIterations: number | null;
  loss: number | null;
  /** Tokens/s, samples/s or TFLOP/s as the trainer reports it; `throughputUnit` says which. */
  throughput: number | null;
  throughputUnit: string | null;
  /** Last complete checkpoint iteration seen (from inspection or a "successfully saved" line). */
  lastCheckpoint: number | null;
  /** Iteration this attempt resumed from (null: fresh start). */
  resumedFrom: number | null;
  /** Attempt number (1-based) within the step. */
  attempt: number;
  pid: number | null;
  updatedAt: string;
  /** Set while the attempt waits before launching (GPU slots, the checkpoint directory's lock). */
  waiting?: Waiting | null;
  /** Set while the next checkpoint save looks like it will not fit: `next save ~4.1 GB, 2.0 GB free on …`. */
  warning?: string | null;
  /** The preflight's warnings this attempt started with, one line each (activities/preflight-phase.ts). */
  preflight?: string[] | null;
  /** The stall limit the trainer is held to now, and the phase it is in (activities/stall-policy.ts). */
  stallLimit?: { phase: 'startup' | 'saving' | 'evaluating' | 'training'; limitSec: number } | null;
  /** Where this attempt's time has gone so far (activities/time-ledger.ts); closed in a failure's details. */
  time?: AttemptTime | null;
  /** The scheduler job the attempt runs as, once the scheduler has placed it (activities/scheduler-job.ts). */
  job?: SchedulerJob | null;
}

/** A batch-scheduler job as `status` shows it: `slurm job 12 on n[1-2]`. */
export interface SchedulerJob {
  scheduler: 'slurm';
  id: string;
  nodes: string;
}

export interface StepState {
  id: string;
  status: StepStatus;
  attempts: number;
  /** Failures so far, by class (all of them: what `status` shows). */
  failures: Partial<Record<FailureClass, number>>;
  /**
   * Failures in a row that came without progress past the previous failure's checkpoint, by class: what the
   * retry budgets bound (workflows/retry-rule.ts). Absent in states recorded before the rule: none.
   */
  failuresWithoutProgress?: Partial<Record<FailureClass, number>>;
  /** The newest complete checkpoint known at a failure so far (null: none); absent before the first failure. */
  checkpointAtFailure?: number | null;
  lastFailure: { class: FailureClass; message: string } | null;
  /** Why the step is running but not training: a pause before its next attempt (a full disk). */
  waiting?: Waiting | null;
  progress: Progress | null;
  startedAt: string | null;
  endedAt: string | null;
  result: StepResult | null;
  /**
   * When its training ended while evaluations of its checkpoints (`evalEvery`) went on. The steps after it start
   * then: they need its checkpoint, not its scores. The step completes when its evaluations do.
   */
  trainedAt?: string | null;
  /** Its checkpoints' scores, evaluated while it trained (`evalEvery`), in iteration order. */
  evals?: CheckpointScores[];
  /** Where the step's time went, attempt by attempt (plan/goodput.ts); absent in states recorded before it. */
  time?: StepTime;
}

/** A step before its first attempt: what the workflows start from and what a record without it shows. */
export function initialStepState(id: string): StepState {
  return { id, status: 'pending', attempts: 0, failures: {}, lastFailure: null, progress: null, startedAt: null, endedAt: null, result: null };
}

/** Scores of one checkpoint evaluated while its step trained: per benchmark, its report's numbers. */
export interface CheckpointScores {
  iteration: number;
  scores: Record<string, Record<string, number>>;
  /** Why it has no scores (its evaluation failed); the step trains on regardless. */
  error?: string;
}

/** What a completed step hands on. */
export interface StepResult {
  stepId: string;
  outputs: Record<string, string>;
  /** Final checkpoint iteration for checkpoint steps. */
  iteration: number | null;
  loss: number | null;
  /** Metrics read from the step's report (e.g. eval accuracy). */
  metrics: Record<string, number>;
  attempts: number;
  resumedFrom: number | null;
  durationSec: number;
  finishedAt: string;
  /** Digest of the outputs (paths, sizes, mtimes) when the step finished; `resume` keeps it only if unchanged. */
  fingerprint: string | null;
  /** Where the successful attempt's time went (absent in results written before the accounting). */
  time?: AttemptTime;
  /** The preflight's warnings the successful attempt ran with. */
  preflight?: string[];
  /** Its checkpoints' scores, evaluated while it trained (the step's final state carries them to the run). */
  evals?: CheckpointScores[];
}

export interface RunStatus {
  recipe: string;
  runId: string;
  runDir: string;
  status: 'running' | 'completed' | 'failed' | 'cancelled';
  message: string | null;
  steps: StepState[];
  /** The report page written at the run's end (src/report/); absent before it is written, null if it failed. */
  report?: string | null;
}

/** The query a recipeRun answers with its RunStatus. */
export const STATUS_QUERY = 'status';
/** The query a stageRun answers with its StepState. */
export const STEP_STATE_QUERY = 'stepState';
/**
 * Sent by the runStep activity to its stageRun on each checkpoint, by attempts that stageRuns recorded before
 * bounded history scheduled (their input has no `evalSignal`). Live iteration and loss travel in heartbeats.
 */
export const PROGRESS_SIGNAL = 'progress';
/** Sent by a stageRun to its recipeRun when its state changes (an attempt starts or fails, training ends). */
export const STEP_UPDATE_SIGNAL = 'stepUpdate';
/**
 * Sent by the runStep activity to its step's evaluator (evalRun): the checkpoints saved since its last word that
 * `evalEvery` asks to evaluate, a batch per signal, one signal in flight (activities/checkpoint-signals.ts).
 */
export const EVAL_CHECKPOINTS_SIGNAL = 'evalCheckpoints';
/** Sent by a stageRun to its evaluator when training has ended: evaluate its last checkpoint too, then finish. */
export const EVAL_CLOSE_SIGNAL = 'evalClose';
/** The query an evalRun answers with its EvalState. */
export const EVAL_STATE_QUERY = 'evalState';

/** The checkpoints an activity tells the evaluator of. */
export interface EvalCheckpoints {
  iterations: number[];
}

/** Where a step's evaluation while training stands (evalRun's state, carried over its continue-as-new). */
export interface EvalState {
  /** Scores so far, in iteration order. */
  done: CheckpointScores[];
  /** Checkpoints waiting for their evaluation, oldest first. */
  queue: number[];
  /** The one being evaluated, or null. */
  running: number | null;
  /** Training has ended: its last checkpoint (null: it saved none) is queued, and the evaluator ends once it is done. */
  closing: { last: number | null } | null;
  /** Executions of the evaluator so far (continue-as-new), the current one included. */
  executions: number;
}
