/**
 * What a line of an engine's output says, in two readings: the few fields the supervisor acts on
 * (`ProgressEvent`: progress, checkpoints, the SIGTERM exit) and everything a report charts (`MetricsLine`).
 * Types only; each engine's lines are read in its own file (megatron.ts, slime.ts, evalscope.ts), the formats
 * and where each was checked in docs/report.md ("The lines read").
 */

export interface ProgressEvent {
  iteration?: number;
  totalIterations?: number;
  loss?: number;
  throughput?: number;
  throughputUnit?: string;
  /** A checkpoint at this iteration was reported saved. */
  checkpointSaved?: number;
  /** A checkpoint save began (the silence until `checkpointSaved` is the save's). */
  savingCheckpoint?: boolean;
  /** A checkpoint load began (the silence until the next iteration is the load's). */
  loadingCheckpoint?: boolean;
  /** The trainer said it is exiting after SIGTERM (Megatron's signal handler). */
  exitingOnSigterm?: boolean;
  /** Milliseconds per iteration over the iterations this line sums up (Megatron's `elapsed time per iteration`). */
  msPerIteration?: number;
}

export type LineParser = (line: string) => ProgressEvent | null;

/** Megatron's held-out evaluations: the validation split (periodic, and once more at the end) or the test split. */
export type EvalSplit = 'validation' | 'test';

export type MetricsLine =
  | {
      kind: 'train';
      iteration: number;
      totalIterations?: number;
      /** Absent where Megatron printed none: every iteration of the interval skipped, or a NaN/inf loss. */
      loss?: number;
      lr?: number;
      gradNorm?: number;
      msPerIteration?: number;
      throughput?: number;
      throughputUnit?: string;
      /** The local RL trainer's mean reward (its own field beside `lm loss`). */
      reward?: number;
      time?: string;
      /** Iterations of the interval skipped (loss-scale overflow or a NaN/inf loss), and those with a NaN/inf. */
      skipped?: number;
      nan?: number;
    }
  | {
      kind: 'validation';
      iteration: number;
      loss: number;
      split: EvalSplit;
      /** The end-of-training evaluation (`… on validation set`, `… on test set`), not a periodic one. */
      final: boolean;
      /** `--multiple-validation-sets`: which one (`validation-1 loss at …`); null for the only one. */
      set: number | null;
    }
  | { kind: 'step'; step: number; loss?: number; lr?: number; gradNorm?: number }
  | { kind: 'rollout'; rollout: number; reward?: number; responseLength?: number; truncated?: number }
  | { kind: 'perf'; rollout: number; throughput?: number; throughputUnit?: string }
  | { kind: 'eval'; rollout: number; scores: Record<string, number> };
