/**
 * checkpointEval: one checkpoint of a training step, evaluated while the step trains on (`evalEvery`). Its
 * steps (the HF export, then one per benchmark) are the plan's templates with the iteration filled in, each run
 * as an ordinary stageRun on the eval pool: GPU claims, logs, stall limits, retries and cancellation as for any
 * step. The export pins the checkpoint it reads, so retention keeps it meanwhile.
 */
import { ChildWorkflowFailure, condition, executeChild, isCancellation, ParentClosePolicy, workflowInfo } from '@temporalio/workflow';
import type { CheckpointScores, StepState } from '../plan/contracts.js';
import { iterDirName, type CheckpointEvalSpec, type PlanStep } from '../plan/types.js';
import { ORCHESTRATOR_TASK_QUEUE } from '../temporal/constants.js';
import type { stageRun } from './stage-run.js';

export interface CheckpointEvalInput {
  recipe: string;
  runId: string;
  runDir: string;
  /** The training step whose checkpoint this is. */
  stepId: string;
  iteration: number;
  spec: CheckpointEvalSpec;
  heartbeatTimeoutSec: number;
  retryDelaySec: number;
}

/** A template with `{iteration}` and `{iterDir}` (the Megatron layout's directory name) filled in. */
export function fillIteration(template: PlanStep, iteration: number): PlanStep {
  const text = JSON.stringify(template).replaceAll('{iterDir}', iterDirName(iteration)).replaceAll('{iteration}', String(iteration));
  return JSON.parse(text) as PlanStep;
}

export async function checkpointEval(i: CheckpointEvalInput): Promise<CheckpointScores> {
  const scores: CheckpointScores['scores'] = {};
  const prefix = `${i.stepId}.eval${i.iteration}.`;
  for (const template of i.spec.steps) {
    const step = fillIteration(template, i.iteration);
    if (step.kind === 'convert') step.reads = [{ dir: i.spec.root, iteration: i.iteration }];
    const result = await executeChild<typeof stageRun>('stageRun', {
      workflowId: `${workflowInfo().workflowId}/${step.id.slice(prefix.length)}`,
      // Its own queue: the orchestrator's in any deployment (a test's worker may serve another).
      taskQueue: workflowInfo().taskQueue,
      args: [{ recipe: i.recipe, runId: i.runId, runDir: i.runDir, step, taskQueue: i.spec.taskQueue, heartbeatTimeoutSec: i.heartbeatTimeoutSec, retryDelaySec: i.retryDelaySec }],
      parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
      staticSummary: `${step.id}: ${step.summary}`.slice(0, 190),
    });
    if (step.kind === 'eval') scores[step.id.slice(prefix.length)] = result.metrics;
  }
  return { iteration: i.iteration, scores };
}

/** The evaluations of a training step's checkpoints, queued as it saves them and run one at a time. */
export interface Evaluator {
  /** A checkpoint the step has saved (`last`: its final one, evaluated whatever its iteration). */
  offer(iteration: number | null | undefined, last?: boolean): void;
  /** An evaluation is running or queued (the step must not continue-as-new meanwhile). */
  busy(): boolean;
  /** Evaluate what is queued, then stop. */
  close(): Promise<void>;
}

export function evaluator(
  input: Omit<CheckpointEvalInput, 'iteration' | 'spec' | 'stepId'> & { step: PlanStep },
  state: StepState,
  publish: () => void,
): Evaluator | null {
  const spec = input.step.checkpointEval;
  if (!spec) return null;
  const queue: number[] = [];
  const seen = new Set((state.evals ?? []).map((e) => e.iteration));
  let closing = false;
  let running = false;
  const loop = (async () => {
    for (;;) {
      await condition(() => queue.length > 0 || closing);
      const iteration = queue.shift();
      if (iteration === undefined) return;
      running = true;
      let entry: CheckpointScores;
      try {
        entry = await executeChild<typeof checkpointEval>('checkpointEval', {
          workflowId: `${workflowInfo().workflowId}/eval${iteration}`,
          taskQueue: ORCHESTRATOR_TASK_QUEUE,
          args: [{ recipe: input.recipe, runId: input.runId, runDir: input.runDir, stepId: input.step.id, iteration, spec, heartbeatTimeoutSec: input.heartbeatTimeoutSec, retryDelaySec: input.retryDelaySec }],
          parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
          staticSummary: `${input.step.id}: evaluation of checkpoint ${iteration}`,
        });
      } catch (err) {
        if (isCancellation(err)) throw err;
        // A failed evaluation costs its scores, never the training.
        const cause = err instanceof ChildWorkflowFailure && err.cause ? err.cause : err;
        entry = { iteration, scores: {}, error: cause instanceof Error ? cause.message : String(cause) };
      }
      running = false;
      state.evals = [...(state.evals ?? []), entry].sort((a, b) => a.iteration - b.iteration);
      publish();
    }
  })();
  return {
    offer(iteration, last = false) {
      if (iteration === null || iteration === undefined || iteration <= 0 || seen.has(iteration)) return;
      if (!last && iteration % spec.every !== 0) return;
      seen.add(iteration);
      queue.push(iteration);
    },
    busy: () => running || queue.length > 0,
    async close() {
      closing = true;
      await loop;
    },
  };
}
