/**
 * What a stageRun tells others, with a bound on the signals pending: the run hears of the step's state changes
 * (the update signal), and the step's evaluator (evalRun) is started, closed and read here.
 *
 * Histories recorded before bounded history (`bounded` false) replay as they were: an update per publish, fire
 * and forget. Bounded, the run hears only transitions, and one update is in flight at a time: updates made
 * meanwhile are coalesced into the next one, which carries the state as it is when it goes. Temporal refuses a
 * workflow's 2,001st pending signal to other workflows (PendingSignalsLimitExceeded), which an update per
 * checkpoint reached after 9 s of a step saving every 2 ms (issue 33).
 */
import {
  ChildWorkflowFailure,
  getExternalWorkflowHandle,
  isCancellation,
  log,
  ParentClosePolicy,
  startChild,
  workflowInfo,
  type ChildWorkflowHandle,
  type ParentWorkflowInfo,
} from '@temporalio/workflow';
import type { CheckpointScores, EvalState, StepState } from '../plan/contracts.js';
import { evalWorkflowId } from '../temporal/constants.js';
import { evalCloseSignal, stepUpdateSignal } from './definitions.js';
import { newEvalState, type evalRun } from './eval-run.js';
import type { StageRunInput } from './stage-run.js';

/** Sends the step's state to the run: call it whenever the run should hear of a change. */
export function parentUpdates(parent: ParentWorkflowInfo | undefined, state: StepState, bounded: boolean): () => void {
  if (!parent) return () => undefined;
  const handle = getExternalWorkflowHandle(parent.workflowId, parent.runId);
  if (!bounded) {
    // Fire and forget: a lost update is repaired by the next one.
    return () => void handle.signal(stepUpdateSignal, state).catch(() => undefined);
  }
  let sending = false;
  let dirty = false;
  const pump = async () => {
    sending = true;
    while (dirty) {
      dirty = false;
      try {
        await handle.signal(stepUpdateSignal, state);
      } catch {
        // The run is gone or closing: its own record of the step stands.
      }
    }
    sending = false;
  };
  return () => {
    dirty = true;
    if (!sending) void pump();
  };
}

/** The step's evaluator as its stageRun holds it. */
export interface EvalChild {
  workflowId: string;
  every: number;
  /** Training has ended at `last`: evaluate it too, finish the queue, and return every score. */
  close(last: number | null): Promise<CheckpointScores[]>;
}

/**
 * Starts the step's evaluator (evaluation while training), or null for a step without `evalEvery`. `done`: the
 * scores of an earlier execution of this stage (continue-as-new), which are not evaluated again.
 */
export async function startEvaluator(input: StageRunInput, done: CheckpointScores[]): Promise<EvalChild | null> {
  const spec = input.step.checkpointEval;
  if (!spec) return null;
  const stageId = workflowInfo().workflowId;
  const workflowId = evalWorkflowId(stageId);
  const handle: ChildWorkflowHandle<typeof evalRun> = await startChild<typeof evalRun>('evalRun', {
    workflowId,
    // Where the stage runs: the orchestrator queue in any deployment.
    taskQueue: workflowInfo().taskQueue,
    args: [{ recipe: input.recipe, runId: input.runId, runDir: input.runDir, stepId: input.step.id, stageWorkflowId: stageId, spec, heartbeatTimeoutSec: input.heartbeatTimeoutSec, retryDelaySec: input.retryDelaySec, state: newEvalState(done) }],
    // It holds no process of its own: whatever closes the stage closes it (its evaluations are asked to cancel).
    parentClosePolicy: ParentClosePolicy.TERMINATE,
    staticSummary: `${input.step.id}: evaluation while training (every ${spec.every})`.slice(0, 190),
  });
  return {
    workflowId,
    every: spec.every,
    async close(last) {
      try {
        await handle.signal(evalCloseSignal, { last });
        return ((await handle.result()) as EvalState).done;
      } catch (err) {
        if (isCancellation(err) || (err instanceof ChildWorkflowFailure && isCancellation(err.cause))) throw err;
        // The scores are lost, never the training.
        log.warn('the evaluation while training failed', { error: err instanceof Error ? err.message : String(err) });
        return done;
      }
    },
  };
}
