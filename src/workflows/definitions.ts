/**
 * The workflows' messages as Temporal definitions: the status queries and the progress signals. Their names and
 * the data they carry live in plan/contracts.ts (read by activities and clients too, which import no workflow code).
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import { PROGRESS_SIGNAL, STATUS_QUERY, STEP_STATE_QUERY, STEP_UPDATE_SIGNAL, type Progress, type RunStatus, type StepState } from '../plan/contracts.js';

export const statusQuery = defineQuery<RunStatus>(STATUS_QUERY);
export const stepStateQuery = defineQuery<StepState>(STEP_STATE_QUERY);
export const progressSignal = defineSignal<[Progress]>(PROGRESS_SIGNAL);
export const stepUpdateSignal = defineSignal<[StepState]>(STEP_UPDATE_SIGNAL);
