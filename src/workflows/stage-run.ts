/**
 * stageRun: owns one plan step. Runs an attempt on the step's pool, classifies a failure, retries with resume
 * (the activity resumes from the newest complete checkpoint by itself) while the retry rule allows it (a budget
 * per failure class bounds failures in a row without progress: retry-rule.ts), and continues-as-new between
 * attempts when the history grows large.
 *
 * Its history grows with its attempts, never with the length of one (bounded history, issue 33): an attempt adds
 * its activity and a few updates to the run, whatever it saves. Live progress stays in the attempt's heartbeats
 * (read by `status` and the Web UI), the checkpoints to evaluate go to the step's evaluator (eval-run.ts), and
 * the run hears of transitions only (stage-channels.ts). Histories recorded before replay as they were
 * (`patched('bounded-history')`): a progress signal per checkpoint, the evaluations run here.
 */
import {
  ActivityCancellationType,
  ApplicationFailure,
  continueAsNew,
  isCancellation,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { PlanStep, RetryBudgets } from '../plan/types.js';
import type { NotifySpec } from '../plan/notify-spec.js';
import { initialStepState, type StepResult, type StepState } from '../plan/contracts.js';
import { progressSignal, stepStateQuery } from './definitions.js';
import { attemptProgress, failedAttemptTime, failureFacts } from './failures.js';
import { highWater, longestSave, withAttempt } from '../plan/goodput.js';
import { evaluator } from './checkpoint-eval.js';
import { tell } from './notify.js';
import { parentUpdates, startEvaluator } from './stage-channels.js';
import { stepFailed, type RunRef } from './notify-events.js';
import { judgeFailure, retryPauseSec, type FailureFacts, type RetryVerdict } from './retry-rule.js';
import { scoreLines, stepTable, timeTable } from '../views/status-table.js';

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
  /** The run's webhooks (plan.notify): told of this step's retries, hangs and spent budgets. */
  notify?: NotifySpec;
  /** Continue as new between attempts past this many events even if Temporal does not suggest it yet (tests). */
  maxEvents?: number;
}

/** Time the supervisor needs after the attempt limit to stop the process and report. */
const ATTEMPT_SLACK_SEC = 120;
/**
 * A stage whose evaluator lives continues as new only past this many events (Temporal suggests it at ~4,000):
 * the evaluations queued must finish first, which at 7B takes hours, while the stage adds ~20 events per attempt.
 */
const DRAIN_EVALS_AT_EVENTS = 8_000;

/**
 * The retry rule applied to the step's failure, with what it remembers (a state recorded before the rule: no
 * failures in a row yet). Histories recorded before the rule replay as they were decided: every failure of the
 * class counted, progress or not.
 */
function judge(state: StepState, facts: FailureFacts, budgets: RetryBudgets): RetryVerdict {
  if (!patched('progress-aware-retries')) {
    return judgeFailure({ streaks: { [facts.cls]: state.failures[facts.cls] ?? 0 }, checkpoint: null }, { ...facts, checkpoint: null }, budgets);
  }
  return judgeFailure({ streaks: state.failuresWithoutProgress ?? {}, checkpoint: state.checkpointAtFailure }, facts, budgets);
}

export async function stageRun(input: StageRunInput): Promise<StepResult> {
  const { step } = input;
  const state: StepState = input.state ?? initialStepState(step.id);
  // Where the step's time goes, attempt by attempt (plan/goodput.ts); a state from before the accounting starts it now.
  state.time ??= { gpus: step.gpus, attempts: [] };
  const parent = workflowInfo().parent;
  const run: RunRef = { recipe: input.recipe, runId: input.runId, workflowId: parent?.workflowId ?? workflowInfo().workflowId, execution: parent?.runId ?? workflowInfo().runId };
  /** This attempt's events, in order, to the run's webhooks (nothing without `notify`). */
  const tellFailure = async (f: Parameters<typeof stepFailed>[1]) => {
    for (const e of input.notify ? stepFailed(run, f) : []) await tell(input.notify, e);
  };

  // Read once: patched() answers false only while replaying a history recorded without the marker.
  const bounded = patched('bounded-history');
  const toParent = parentUpdates(parent, state, bounded);
  const publish = (tellParent: boolean) => {
    const time = timeTable([state]);
    const scores = scoreLines([state]);
    setCurrentDetails([stepTable([state]), scores, time].filter(Boolean).join('\n\n'));
    if (tellParent) toParent();
  };

  // Checkpoints evaluated while the step trains (`evalEvery`): by the step's evaluator, which the supervisor
  // tells of them; in histories recorded before it, here, as the progress signals report them saved.
  const evals = bounded ? null : evaluator(input, state, () => publish(true));
  setHandler(stepStateQuery, () => state);
  setHandler(progressSignal, (p) => {
    const checkpointMoved = (p.lastCheckpoint ?? null) !== (state.progress?.lastCheckpoint ?? null);
    state.progress = p;
    evals?.offer(p.lastCheckpoint);
    publish(checkpointMoved && !bounded);
  });
  const evalChild = bounded ? await startEvaluator(input, state.evals ?? []) : null;

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
  let failureTold: Promise<void> = Promise.resolve();
  for (;;) {
    state.attempts += 1;
    state.status = 'running';
    state.waiting = null;
    state.startedAt ??= new Date().toISOString();
    // Bounded, the run hears of no attempt's start: it marks the step running as it starts it, and a later
    // attempt follows the failure it heard of (two workflow tasks fewer per hand-off, one each side).
    publish(!bounded);
    const scheduledAt = Date.now();
    try {
      const evalSignal = bounded ? { evalSignal: evalChild ? { workflowId: evalChild.workflowId, every: evalChild.every } : null } : {};
      const result = await runStep({ recipe: input.recipe, runId: input.runId, runDir: input.runDir, step, attempt: state.attempts, redoUntil: highWater(state.time), longestSaveSec: longestSave(state.time), ...evalSignal });
      if (result.time) state.time = withAttempt(state.time, result.time);
      if (evalChild) {
        // Training is over: the run starts the steps after this one now instead of when the evaluations end.
        state.trainedAt = new Date().toISOString();
        publish(true);
        state.evals = await evalChild.close(result.iteration);
      }
      // The final checkpoint is evaluated too; the step ends once its evaluations have, and its result carries them
      // (an update signal sent just before the step's end may reach the run after it, and be dropped).
      if (evals) {
        evals.offer(result.iteration, true);
        // Training is over: the run starts the steps after this one now instead of when the evaluations end
        // (at 7B an evaluation takes hours). Histories recorded before this signal replay without it.
        if (evals.busy() && patched('start-after-training')) {
          state.trainedAt = new Date().toISOString();
          publish(true);
        }
        await evals.close();
      }
      const final = state.evals ? { ...result, evals: state.evals } : result;
      state.status = 'completed';
      state.waiting = null;
      state.result = final;
      state.endedAt = new Date().toISOString();
      // Bounded, the run reads the end from the step's result (an update now could only reach it after).
      publish(!bounded);
      return final;
    } catch (err) {
      if (isCancellation(err)) {
        state.status = 'cancelled';
        state.endedAt = new Date().toISOString();
        publish(!bounded);
        throw err;
      }
      // Bounded, no signal brought the attempt's checkpoints: its failure (or its last heartbeat) says where it was.
      if (bounded) state.progress = attemptProgress(err) ?? state.progress;
      const { message, ...facts } = failureFacts(err, state.progress);
      const { cls } = facts;
      state.time = withAttempt(state.time, failedAttemptTime(err, state.attempts, scheduledAt, Date.now(), cls));
      const v = judge(state, facts, step.retries);
      state.failures[cls] = (state.failures[cls] ?? 0) + 1;
      state.failuresWithoutProgress = v.memory.streaks;
      state.checkpointAtFailure = v.memory.checkpoint;
      state.lastFailure = { class: cls, message };
      const told = tellFailure({ step: step.id, attempt: state.attempts, cls, message, retried: v.retry, streak: v.streak, budget: cls === 'config' ? 0 : step.retries[cls] });
      if (!v.retry) {
        state.status = 'failed';
        state.endedAt = new Date().toISOString();
        // Bounded, the run reads the failed state from the failure's details.
        publish(!bounded);
        await told;
        throw ApplicationFailure.nonRetryable(`step ${step.id} failed after ${state.attempts} attempt(s): ${message} (${v.why})`, 'StepFailed', state);
      }
      pauseSec = retryPauseSec(cls, v.streak, input.retryDelaySec);
      if (cls === 'storage') {
        // Shown by `status` as "waiting: disk full on … (N GB free)" rather than a bare "running".
        const now = Date.now();
        state.waiting = { reason: message.replace(`${step.id}: storage: `, ''), since: new Date(now).toISOString(), until: new Date(now + pauseSec * 1000).toISOString() };
      }
      publish(true);
      failureTold = told;
    }
    // The webhooks are told during the pause: a slow receiver delays the next attempt only past the pause.
    await Promise.all([failureTold, sleep(`${pauseSec}s`)]);
    // Not while a checkpoint is being evaluated: the evaluation is this execution's child. The evaluator lives
    // as long as the training: past a hard mark it finishes what is queued, and the next execution starts another.
    const info = workflowInfo();
    const grown = info.continueAsNewSuggested || info.historyLength > (input.maxEvents ?? Infinity);
    if (grown && !evals?.busy() && (!evalChild || info.historyLength > (input.maxEvents ?? DRAIN_EVALS_AT_EVENTS))) {
      if (evalChild) state.evals = await evalChild.close(null);
      await continueAsNew<typeof stageRun>({ ...input, state });
    }
  }
}
