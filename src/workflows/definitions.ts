/**
 * Messages and shared shapes of the workflows: the status query, the progress signal, the step state.
 * Imported by the CLI and the activities as well as the workflows, so: @temporalio/workflow and types only.
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { FailureClass } from '../plan/types.js';

export type StepStatus = 'pending' | 'running' | 'completed' | 'kept' | 'failed' | 'cancelled' | 'skipped';

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
}

export interface StepState {
  id: string;
  status: StepStatus;
  attempts: number;
  /** Failures so far, by class. */
  failures: Partial<Record<FailureClass, number>>;
  lastFailure: { class: FailureClass; message: string } | null;
  progress: Progress | null;
  startedAt: string | null;
  endedAt: string | null;
  result: StepResult | null;
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
}

export interface RunStatus {
  recipe: string;
  runId: string;
  runDir: string;
  status: 'running' | 'completed' | 'failed' | 'cancelled';
  message: string | null;
  steps: StepState[];
}

export const statusQuery = defineQuery<RunStatus>('status');
export const stepStateQuery = defineQuery<StepState>('stepState');
/** Sent by the runStep activity to its stageRun on each checkpoint (live iteration and loss travel in heartbeats). */
export const progressSignal = defineSignal<[Progress]>('progress');
/** Sent by a stageRun to its recipeRun when its state changes (attempt start, checkpoint, failure). */
export const stepUpdateSignal = defineSignal<[StepState]>('stepUpdate');
