/**
 * The workflows' messages as Temporal definitions: the status queries and the progress signals. Their names and
 * the data they carry live in plan/contracts.ts (read by activities and clients too, which import no workflow code).
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import {
  EVAL_CHECKPOINTS_SIGNAL,
  EVAL_CLOSE_SIGNAL,
  EVAL_STATE_QUERY,
  PROGRESS_SIGNAL,
  STATUS_QUERY,
  STEP_STATE_QUERY,
  STEP_UPDATE_SIGNAL,
  type EvalCheckpoints,
  type EvalState,
  type Progress,
  type RunStatus,
  type StepState,
} from '../plan/contracts.js';

export const statusQuery = defineQuery<RunStatus>(STATUS_QUERY);
export const stepStateQuery = defineQuery<StepState>(STEP_STATE_QUERY);
export const progressSignal = defineSignal<[Progress]>(PROGRESS_SIGNAL);
export const stepUpdateSignal = defineSignal<[StepState]>(STEP_UPDATE_SIGNAL);
export const evalCheckpointsSignal = defineSignal<[EvalCheckpoints]>(EVAL_CHECKPOINTS_SIGNAL);
export const evalCloseSignal = defineSignal<[{ last: number | null }]>(EVAL_CLOSE_SIGNAL);
export const evalStateQuery = defineQuery<EvalState>(EVAL_STATE_QUERY);
