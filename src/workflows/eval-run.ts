/**
 * evalRun: a training step's evaluation while it trains (`evalEvery`), as a child workflow of the step's stageRun.
 * The supervisor tells it of the checkpoints to evaluate, in batches (activities/checkpoint-signals.ts); it runs
 * their evaluations (checkpointEval) one at a time, oldest first; when training ends the stage tells it the last
 * checkpoint, which is evaluated too, and it returns every score.
 *
 * Why a workflow of its own: a stageRun cannot continue-as-new while its attempt runs (an activity does not
 * outlive its workflow execution), so everything that grows with the length of an attempt must live elsewhere.
 * The stage's history grows with its attempts only; this one grows with the evaluations and continues as new
 * between two of them when Temporal suggests it (or past `maxEvents`), carrying its queue and its scores.
 */
import {
  allHandlersFinished,
  ChildWorkflowFailure,
  condition,
  continueAsNew,
  executeChild,
  isCancellation,
  ParentClosePolicy,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { CheckpointScores, EvalState } from '../plan/contracts.js';
import type { CheckpointEvalSpec } from '../plan/types.js';
import { evalSeries } from '../views/step-figures.js';
import type { checkpointEval } from './checkpoint-eval.js';
import { evalCheckpointsSignal, evalCloseSignal, evalStateQuery } from './definitions.js';

export interface EvalRunInput {
  recipe: string;
  runId: string;
  runDir: string;
  /** The training step whose checkpoints these are. */
  stepId: string;
  /** Its stageRun's workflow id: each evaluation is `<it>/eval<iteration>`, as when the stage ran them itself. */
  stageWorkflowId: string;
  spec: CheckpointEvalSpec;
  heartbeatTimeoutSec: number;
  retryDelaySec: number;
  /** Carried over continue-as-new; a new evaluator of a stage that continued as new starts from its scores. */
  state?: EvalState;
  /** Continue as new past this many events even if Temporal does not suggest it yet. @default 8000 */
  maxEvents?: number;
}

const DEFAULT_MAX_EVENTS = 8_000;

export function newEvalState(done: CheckpointScores[] = []): EvalState {
  return { done, queue: [], running: null, closing: null, executions: 0 };
}

export async function evalRun(input: EvalRunInput): Promise<EvalState> {
  const state: EvalState = { ...(input.state ?? newEvalState()), running: null };
  state.executions += 1;
  const every = input.spec.every;
  const seen = new Set([...state.done.map((e) => e.iteration), ...state.queue]);
  const show = () => {
    const queued = state.queue.length ? `queued: ${state.queue.join(', ')}` : '';
    const running = state.running !== null ? `evaluating checkpoint ${state.running}` : state.closing ? 'training has ended' : 'waiting for checkpoints';
    const scores = evalSeries({ evals: state.done } as Parameters<typeof evalSeries>[0]);
    setCurrentDetails([`**${input.stepId}** evaluation while training — ${running}`, queued, scores].filter(Boolean).join('\n\n'));
  };
  const offer = (iteration: number | null, last = false) => {
    if (iteration === null || iteration <= 0 || seen.has(iteration)) return;
    if (!last && iteration % every !== 0) return;
    seen.add(iteration);
    state.queue.push(iteration);
  };
  setHandler(evalCheckpointsSignal, ({ iterations }) => {
    for (const it of iterations) offer(it);
    show();
  });
  setHandler(evalCloseSignal, ({ last }) => {
    state.closing = { last };
    offer(last, true);
    show();
  });
  setHandler(evalStateQuery, () => state);
  show();

  for (;;) {
    await condition(() => state.queue.length > 0 || state.closing !== null);
    const iteration = state.queue.shift();
    if (iteration === undefined) break;
    state.running = iteration;
    show();
    let entry: CheckpointScores;
    try {
      entry = await executeChild<typeof checkpointEval>('checkpointEval', {
        workflowId: `${input.stageWorkflowId}/eval${iteration}`,
        // Where this evaluator runs: the orchestrator queue in any deployment.
        taskQueue: workflowInfo().taskQueue,
        args: [{ recipe: input.recipe, runId: input.runId, runDir: input.runDir, stepId: input.stepId, iteration, spec: input.spec, heartbeatTimeoutSec: input.heartbeatTimeoutSec, retryDelaySec: input.retryDelaySec }],
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        staticSummary: `${input.stepId}: evaluation of checkpoint ${iteration}`,
      });
    } catch (err) {
      if (isCancellation(err)) throw err;
      // A failed evaluation costs its scores, never the training.
      const cause = err instanceof ChildWorkflowFailure && err.cause ? err.cause : err;
      entry = { iteration, scores: {}, error: cause instanceof Error ? cause.message : String(cause) };
    }
    state.running = null;
    state.done = [...state.done, entry].sort((a, b) => a.iteration - b.iteration);
    show();
    const info = workflowInfo();
    const more = state.queue.length > 0 || state.closing === null;
    // Between two evaluations (a running one is this execution's child and would be cancelled with it).
    if (more && (info.continueAsNewSuggested || info.historyLength > (input.maxEvents ?? DEFAULT_MAX_EVENTS))) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof evalRun>({ ...input, state });
    }
  }
  return state;
}
