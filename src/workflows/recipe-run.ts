/**
 * recipeRun: walks the Plan's DAG. Each step runs as a stageRun child (independent steps in parallel), its
 * result is recorded, a status query answers at any time, the Web UI shows a stage table as current details,
 * and search attributes say which recipe and stage a run is at. Steps handed in as `keep` (a resumed run's
 * finished, verified steps) are not run again.
 */
import {
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  ChildWorkflowCancellationType,
  ChildWorkflowFailure,
  continueAsNew,
  executeChild,
  isCancellation,
  ParentClosePolicy,
  patched,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Plan, PlanStep } from '../plan/types.js';
import { MEMO, ORCHESTRATOR_TASK_QUEUE, SA, stepWorkflowId } from '../temporal/constants.js';
import { withAttempt } from '../plan/goodput.js';
import { initialStepState, type RunStatus, type StepResult, type StepState } from '../plan/contracts.js';
import { statusQuery, stepUpdateSignal } from './definitions.js';
import { stageRun } from './stage-run.js';
import { tell } from './notify.js';
import { writeReportOf } from './run-report.js';
import { runEnded, type RunRef } from './notify-events.js';
import { statusMarkdown } from '../views/status-table.js';
import { evaluating } from '../views/step-figures.js';

export interface RecipeRunOptions {
  /**
   * No heartbeat for this long means the worker is gone, seconds: the attempt fails as `preempted` and the next
   * attempt (on any worker of the pool) takes the step's directory over. Shorter notices a dead node sooner;
   * it must stay well above the supervisor's keep-alive (2 s).
   * @default 60
   */
  heartbeatTimeoutSec?: number;
  /** Pause between a step's failed attempt and the next, seconds. @default 5 */
  retryDelaySec?: number;
  /** Results of steps already done in an earlier run, verified by the caller: kept, not rerun. */
  keep?: Record<string, StepResult>;
  /** The run so far, carried over continue-as-new: its steps' states and results. */
  carry?: { steps: StepState[]; results: Record<string, StepResult> };
  /** Continue as new past this many events even if Temporal does not suggest it yet. @default 8000 */
  maxEvents?: number;
}

export interface RecipeRunResult {
  status: RunStatus;
  results: Record<string, StepResult>;
}

const DONE = new Set<StepState['status']>(['completed', 'kept']);
const DEFAULT_MAX_EVENTS = 8_000;

export async function recipeRun(plan: Plan, options: RecipeRunOptions = {}): Promise<RecipeRunResult> {
  const runWfId = workflowInfo().workflowId;
  const keep = options.keep ?? {};
  const status: RunStatus = {
    recipe: plan.recipe,
    runId: plan.runId,
    runDir: plan.runDir,
    status: 'running',
    message: null,
    steps:
      options.carry?.steps ??
      plan.steps.map((s) => {
        const kept = keep[s.id];
        return kept ? { ...initialStepState(s.id), status: 'kept', result: kept } : initialStepState(s.id);
      }),
  };
  const byId = new Map(status.steps.map((s) => [s.id, s]));
  const results: Record<string, StepResult> = { ...keep, ...options.carry?.results };
  // Bounded history (issue 33): the Stage search attribute is written when it changes, not on every update; a
  // terminated run terminates its steps; the run continues as new between steps when its history grows.
  // Read once: histories recorded before replay as they were.
  const bounded = patched('bounded-history');

  let shownStages: string | null = null;
  /** `stages`: also write the Stage search attribute (bounded, only where the walk settles, and when it changed). */
  const refresh = (stages = true) => {
    setCurrentDetails(statusMarkdown(status));
    if (bounded && !stages) return;
    const running = status.steps.filter((s) => s.status === 'running').map((s) => s.id);
    if (bounded && running.join(',') === shownStages) return;
    shownStages = running.join(',');
    upsertSearchAttributes([{ key: SA.stage, value: running }]);
  };
  setHandler(statusQuery, () => status);
  // A step whose training has ended while its checkpoints are still evaluated lets the steps after it start
  // (stageRun's trainedAt). Runs recorded before this replay with the old rule: after the step completes.
  const startAfterTraining = patched('start-after-training');
  let wakeOnTrained = () => {};
  let trained = new Promise<void>((resolve) => (wakeOnTrained = resolve));
  setHandler(stepUpdateSignal, (update) => {
    const cur = byId.get(update.id);
    // A late update must not undo a final state recorded from the child's result.
    if (cur && !['completed', 'kept', 'failed', 'cancelled'].includes(cur.status)) {
      const newlyTrained = !cur.trainedAt && !!update.trainedAt;
      Object.assign(cur, update);
      if (newlyTrained && startAfterTraining) wakeOnTrained();
      refresh();
    }
  });
  upsertSearchAttributes([
    { key: SA.recipeName, value: plan.recipe },
    { key: SA.precision, value: plan.precision },
    { key: SA.runId, value: plan.runId },
  ]);
  refresh();

  /** A step the steps after it may start behind: finished, or trained with only evaluations left. */
  const ready = (st: StepState | undefined) => !!st && (DONE.has(st.status) || (startAfterTraining && evaluating(st)));

  let failed: string | null = null;
  let cancelled = false;
  const running = new Map<string, Promise<void>>();

  const launch = (step: PlanStep) => {
    const st = byId.get(step.id)!;
    st.status = 'running';
    if (bounded) {
      // The step does not tell its start (bounded history): its first attempt begins now.
      st.startedAt ??= new Date().toISOString();
      st.attempts = Math.max(st.attempts, 1);
    }
    const pool = plan.pools[step.pool];
    const p = executeChild(stageRun, {
      workflowId: stepWorkflowId(runWfId, step.id),
      taskQueue: ORCHESTRATOR_TASK_QUEUE,
      args: [
        {
          recipe: plan.recipe,
          runId: plan.runId,
          runDir: plan.runDir,
          step,
          taskQueue: pool?.taskQueue ?? step.pool,
          heartbeatTimeoutSec: options.heartbeatTimeoutSec ?? 60,
          retryDelaySec: options.retryDelaySec ?? 5,
          ...(plan.notify ? { notify: plan.notify } : {}),
        },
      ],
      // A cancelled run cancels its steps (their supervisors stop the trainers) and waits for them; a failed run
      // waits for its running steps to end. Whatever closes it besides, a terminate first, terminates them: a step
      // stuck where it cannot take a cancel request (a workflow task that keeps failing) is not left running;
      // their supervisors notice on their next heartbeat and stop the trainers.
      parentClosePolicy: bounded ? ParentClosePolicy.TERMINATE : ParentClosePolicy.REQUEST_CANCEL,
      // The run is not cancelled until every step has stopped its processes.
      cancellationType: ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
      staticSummary: `${step.id}: ${step.summary}`.slice(0, 190),
      typedSearchAttributes: [
        { key: SA.recipeName, value: plan.recipe },
        { key: SA.stage, value: [step.id] },
        { key: SA.precision, value: plan.precision },
        { key: SA.runId, value: plan.runId },
      ],
    }).then(
      (result) => {
        results[step.id] = result;
        // The step's result says how many attempts it took: the run hears of a later attempt's start only with its end.
        Object.assign(st, { status: 'completed', result, attempts: Math.max(st.attempts, result.attempts), endedAt: result.finishedAt, ...(result.evals ? { evals: result.evals } : {}) });
        // The step's last update may come after its result (and is then ignored): its final attempt's time is here.
        if (result.time) st.time = withAttempt(st.time ?? { gpus: step.gpus, attempts: [] }, result.time);
      },
      (err) => {
        if (isCancellation(err) || (err instanceof ChildWorkflowFailure && isCancellation(err.cause))) {
          st.status = 'cancelled';
          cancelled = true;
          return;
        }
        st.status = 'failed';
        const cause = err instanceof ChildWorkflowFailure ? err.cause : err;
        const message = cause instanceof Error ? cause.message : String(cause);
        if (cause instanceof ApplicationFailure && cause.details?.[0]) Object.assign(st, cause.details[0], { status: 'failed' });
        st.lastFailure ??= { class: 'crash', message };
        failed ??= message;
      },
    );
    running.set(
      step.id,
      p.finally(() => {
        running.delete(step.id);
        // The walk goes on at once and writes Stage once it has launched what follows.
        refresh(false);
      }),
    );
  };

  try {
    for (;;) {
      const info = workflowInfo();
      const grown = info.continueAsNewSuggested || info.historyLength > (options.maxEvents ?? DEFAULT_MAX_EVENTS);
      // Between steps only: a running step is this execution's child, and would be terminated with it.
      if (bounded && grown && running.size === 0 && !failed && !cancelled && status.steps.some((s) => s.status === 'pending')) {
        await continueAsNew<typeof recipeRun>(plan, { ...options, carry: { steps: status.steps, results } });
      }
      if (!failed && !cancelled) {
        for (const step of plan.steps) {
          const st = byId.get(step.id)!;
          if (st.status !== 'pending') continue;
          if (step.dependsOn.every((d) => ready(byId.get(d)))) launch(step);
        }
      }
      refresh();
      if (running.size === 0) break;
      await Promise.race([...running.values(), trained]);
      trained = new Promise<void>((resolve) => (wakeOnTrained = resolve));
    }
  } catch (err) {
    if (!isCancellation(err)) throw err;
    cancelled = true;
  }

  // Steps that never started because something before them failed or the run was cancelled.
  for (const st of status.steps) if (st.status === 'pending') st.status = failed || cancelled ? 'skipped' : st.status;

  const run: RunRef = { recipe: plan.recipe, runId: plan.runId, workflowId: runWfId, execution: workflowInfo().runId };
  if (cancelled || CancellationScope.current().consideredCancelled) {
    status.status = 'cancelled';
    status.message = 'cancelled';
    if (patched('run-report')) status.report = await CancellationScope.nonCancellable(() => writeReportOf(plan, status));
    refresh();
    // The run's scope is cancelled: the webhooks are told from a scope that is not.
    if (plan.notify) await CancellationScope.nonCancellable(() => tell(plan.notify, runEnded(run, 'cancelled', null)));
    // Histories of runs cancelled before this memo existed replay without it.
    if (patched('cancelled-status-memo')) upsertMemo({ [MEMO.finalStatus]: status });
    // Thrown while cancellation was requested, a CancelledFailure closes the run as Canceled, not Failed.
    throw new CancelledFailure('run cancelled');
  }
  if (failed) {
    status.status = 'failed';
    status.message = failed;
    if (patched('run-report')) status.report = await writeReportOf(plan, status);
    refresh();
    await tell(plan.notify, runEnded(run, 'failed', failed));
    throw ApplicationFailure.nonRetryable(failed, 'RunFailed', status);
  }
  status.status = 'completed';
  if (patched('run-report')) status.report = await writeReportOf(plan, status);
  refresh();
  await tell(plan.notify, runEnded(run, 'completed', `${plan.steps.length} steps`));
  return { status, results };
}
