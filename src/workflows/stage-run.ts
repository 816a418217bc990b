/**
 * stageRun: owns one plan step. Runs an attempt on the step's pool, classifies a failure, retries with resume
 * (the activity resumes from the newest complete checkpoint by itself) within the budget of that failure class,
 * and continues-as-new between attempts when the history grows large.
 */
import {
  ActivityCancellationType,
  ApplicationFailure,
  continueAsNew,
  getExternalWorkflowHandle,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { FailureClass, PlanStep } from '../plan/types.js';
import { initialStepState, type StepResult, type StepState } from '../plan/contracts.js';
import { progressSignal, stepStateQuery, stepUpdateSignal } from './definitions.js';
import { failureClassOf } from './failures.js';
import { stepTable } from './status-table.js';

export interface StageRunInput {
  recipe: string;
  runId: string;
  runDir: string;
  step: PlanStep;
  taskQueue: string;
  /** No heartbeat for this long: the worker is gone. The stall timeout (hangs) is the step's own. */
  heartbeatTimeoutSec: number;
  /** Pause between a failure and the next attempt. */
  retryDelaySec: number;
  /** Carried over continue-as-new. */
  state?: StepState;
}

/** Time the supervisor needs after the attempt limit to stop the process and report. */
const ATTEMPT_SLACK_SEC = 120;
/** The longest pause between storage attempts: a freed disk is noticed within this. */
const STORAGE_BACKOFF_MAX_SEC = 600;

/**
 * Pause before the next attempt. A storage fault (a full disk) waits for a person, so its pauses double from the
 * retry delay up to 10 minutes; any other class retries after the retry delay.
 */
export function retryPauseSec(cls: FailureClass, used: number, retryDelaySec: number): number {
  if (cls !== 'storage') return retryDelaySec;
  return Math.min(Math.max(retryDelaySec, 1) * 2 ** (used - 1), STORAGE_BACKOFF_MAX_SEC);
}

export async function stageRun(input: StageRunInput): Promise<StepResult> {
  const { step } = input;
  const state: StepState = input.state ?? initialStepState(step.id);
  const parent = workflowInfo().parent;

  const publish = (toParent: boolean) => {
    setCurrentDetails(stepTable([state]));
    if (toParent && parent) {
      // Fire and forget: the parent learns the step's state; a lost update is repaired by the next one.
      getExternalWorkflowHandle(parent.workflowId, parent.runId)
        .signal(stepUpdateSignal, state)
        .catch(() => undefined);
    }
  };

  setHandler(stepStateQuery, () => state);
  setHandler(progressSignal, (p) => {
    const checkpointMoved = (p.lastCheckpoint ?? null) !== (state.progress?.lastCheckpoint ?? null);
    state.progress = p;
    publish(checkpointMoved);
  });

  const { runStep } = proxyActivities<Activities>({
    taskQueue: input.taskQueue,
    startToCloseTimeout: `${step.attemptTimeoutSec + ATTEMPT_SLACK_SEC}s`,
    heartbeatTimeout: `${input.heartbeatTimeoutSec}s`,
    // Retries are decided here, per failure class, not by Temporal's uniform policy.
    retry: { maximumAttempts: 1 },
    // A cancelled step waits for its supervisor to confirm that the trainer's process group is gone.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });

  let pauseSec = input.retryDelaySec;
  for (;;) {
    state.attempts += 1;
    state.status = 'running';
    state.waiting = null;
    state.startedAt ??= new Date().toISOString();
    publish(true);
    try {
      const result = await runStep({ recipe: input.recipe, runId: input.runId, runDir: input.runDir, step, attempt: state.attempts });
      state.status = 'completed';
      state.waiting = null;
      state.result = result;
      state.endedAt = new Date().toISOString();
      publish(true);
      return result;
    } catch (err) {
      if (isCancellation(err)) {
        state.status = 'cancelled';
        state.endedAt = new Date().toISOString();
        publish(true);
        throw err;
      }
      const { cls, message } = failureClassOf(err);
      const used = (state.failures[cls] ?? 0) + 1;
      state.failures[cls] = used;
      state.lastFailure = { class: cls, message };
      const budget = step.retries[cls];
      if (cls === 'config' || used > budget) {
        state.status = 'failed';
        state.endedAt = new Date().toISOString();
        publish(true);
        const why = cls === 'config' ? 'a configuration error is never retried' : `the ${cls} retry budget (${budget}) is spent`;
        throw ApplicationFailure.nonRetryable(`step ${step.id} failed after ${state.attempts} attempt(s): ${message} (${why})`, 'StepFailed', state);
      }
      pauseSec = retryPauseSec(cls, used, input.retryDelaySec);
      if (cls === 'storage') {
        // Shown by `status` as "waiting: disk full on … (N GB free)" rather than a bare "running".
        const now = Date.now();
        state.waiting = { reason: message.replace(`${step.id}: storage: `, ''), since: new Date(now).toISOString(), until: new Date(now + pauseSec * 1000).toISOString() };
      }
      publish(true);
    }
    await sleep(`${pauseSec}s`);
    if (workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof stageRun>({ ...input, state });
    }
  }
}
