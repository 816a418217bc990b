/**
 * A running run's status when no worker answers its query: rebuilt from what the server recorded, which needs no
 * worker to read. The plan and the kept results are the run's start arguments; each step's child workflow says
 * whether it started, finished (its result), failed (its state rides on the failure) or is running (its pending
 * attempt's last heartbeat: iteration, loss, checkpoint, what it waits for). Before, `status` of such a run failed
 * with `Failed to query Workflow` although all of this was there. A step whose workflow task keeps failing says
 * so (stuck-workflow.ts), rather than that it waits for a worker.
 */
import { WorkflowFailedError, WorkflowNotFoundError, type WorkflowClient } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { initialStepState, PROGRESS_SIGNAL, type Progress, type RunStatus, type StepResult, type StepState } from '../plan/contracts.js';
import { FAILURE_CLASSES, type FailureClass, type Plan } from '../plan/types.js';
import { ORCHESTRATOR_TASK_QUEUE, stepWorkflowId } from './constants.js';
import { decodeRawPayload, failureMessage } from './payloads.js';
import { stuckWorkflow, stuckWords } from './stuck-workflow.js';

/** A live worker long-polls about once a minute; a poller not seen for this long is gone. */
const POLLER_GONE_MS = 90_000;
/** temporal.api.enums.v1 TaskQueueKind.NORMAL and TaskQueueType.WORKFLOW (the proto package is not ours to import). */
const KIND_NORMAL = 1;
const TYPE_WORKFLOW = 1;

export interface OrchestratorPollers {
  /** A worker polled the orchestrator queue within the last 90 s. */
  live: boolean;
  /** The last time any worker polled it, as the server remembers (a few minutes), or null. */
  lastSeen: Date | null;
}

export async function orchestratorPollers(client: WorkflowClient, namespace: string): Promise<OrchestratorPollers> {
  const res = await client.workflowService.describeTaskQueue({
    namespace,
    taskQueue: { name: ORCHESTRATOR_TASK_QUEUE, kind: KIND_NORMAL },
    taskQueueType: TYPE_WORKFLOW,
  });
  const seen = (res.pollers ?? [])
    .map((p) => tsDate(p.lastAccessTime))
    .filter((d): d is Date => d !== null)
    .sort((a, b) => b.getTime() - a.getTime());
  const lastSeen = seen[0] ?? null;
  return { live: lastSeen !== null && Date.now() - lastSeen.getTime() < POLLER_GONE_MS, lastSeen };
}

/** The line `status` prints about the missing worker. */
export function noWorkerLine(p: OrchestratorPollers): string {
  const since = p.lastSeen ? `since ${p.lastSeen.toISOString().replace(/\.\d+Z$/, 'Z')}` : 'in the last few minutes';
  return `no worker is polling ${ORCHESTRATOR_TASK_QUEUE} (none seen ${since}): shown from the server's records; start one with \`infir2 up\` or \`infir2 worker\``;
}

/** A protobuf Timestamp (seconds as a Long or string, nanos) as a Date; null when absent. */
function tsDate(ts: { seconds?: unknown; nanos?: number | null } | null | undefined): Date | null {
  return ts?.seconds != null ? new Date(Number(ts.seconds) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6)) : null;
}

/**
 * The step's last attempt as its history recorded it: the progress it reported last (a timed-out attempt's last
 * heartbeat, a failed one's failure details) and why it ended.
 */
async function lastAttempt(client: WorkflowClient, handle: ReturnType<WorkflowClient['getHandle']>): Promise<{ progress: Progress | null; failure: StepState['lastFailure']; at: string | null }> {
  const events = (await handle.fetchHistory()).events ?? [];
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    const at = tsDate(e.eventTime)?.toISOString() ?? null;
    const timedOut = e.activityTaskTimedOutEventAttributes?.failure;
    if (timedOut) {
      const progress = await decodeRawPayload<Progress>(client, timedOut.timeoutFailureInfo?.lastHeartbeatDetails?.payloads?.[0] ?? timedOut.cause?.timeoutFailureInfo?.lastHeartbeatDetails?.payloads?.[0]);
      return { progress, failure: { class: 'preempted', message: 'worker lost (heartbeat timeout)' }, at };
    }
    const failed = e.activityTaskFailedEventAttributes?.failure;
    if (failed) {
      const info = failed.applicationFailureInfo;
      const cls = (FAILURE_CLASSES as readonly string[]).includes(info?.type ?? '') ? (info!.type as FailureClass) : 'crash';
      return { progress: await decodeRawPayload<Progress>(client, info?.details?.payloads?.[0]), failure: { class: cls, message: await failureMessage(client, failed) }, at };
    }
    // The attempt's end may still be buffered behind a workflow task the lost worker had started: the newest
    // checkpoint it signalled is the last word.
    const signal = e.workflowExecutionSignaledEventAttributes;
    if (signal?.signalName === PROGRESS_SIGNAL) return { progress: await decodeRawPayload<Progress>(client, signal.input?.payloads?.[0]), failure: null, at };
  }
  return { progress: null, failure: null, at: null };
}

const FINAL = new Set<StepState['status']>(['completed', 'kept', 'failed', 'cancelled', 'skipped']);

/**
 * One step's state from its child workflow of this execution (`parentRunId`); a step that ended in an earlier
 * execution of the run (before it continued as new) as that execution carried it over.
 */
async function stepFromServer(client: WorkflowClient, runWfId: string, parentRunId: string, id: string, kept: StepResult | undefined, carried: StepState | undefined): Promise<StepState> {
  const st = initialStepState(id);
  if (kept) return { ...st, status: 'kept', result: kept };
  if (carried && FINAL.has(carried.status)) return carried;
  const handle = client.getHandle(stepWorkflowId(runWfId, id));
  let desc;
  try {
    desc = await handle.describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return st;
    throw err;
  }
  // A resumed run reuses the step ids: a child of an earlier execution is not this run's step.
  if (desc.raw.workflowExecutionInfo?.parentExecution?.runId !== parentRunId) return st;
  st.startedAt = desc.startTime.toISOString();
  st.endedAt = desc.closeTime?.toISOString() ?? null;
  switch (desc.status.name) {
    case 'RUNNING': {
      const stuck = await stuckWorkflow(client, desc);
      if (stuck) return { ...st, status: 'running', attempts: carried?.attempts ?? 0, waiting: { reason: stuckWords(stuck), since: st.startedAt!, until: null } };
      const pending = desc.raw.pendingActivities?.[0];
      const p = await decodeRawPayload<Progress>(client, pending?.heartbeatDetails?.payloads?.[0]);
      if (p) return { ...st, status: 'running', progress: p, attempts: p.attempt };
      // No attempt in flight: the last one ended (its worker lost, say) and the next needs a worker to start.
      const last = await lastAttempt(client, handle);
      return {
        ...st,
        status: 'running',
        progress: last.progress,
        attempts: last.progress?.attempt ?? 0,
        lastFailure: last.failure,
        waiting: {
          reason: `a worker to go on${last.failure ? ` (the last attempt ended: ${last.failure.message})` : ''}`,
          since: last.at ?? st.startedAt!,
          until: null,
        },
      };
    }
    case 'COMPLETED': {
      const result = (await handle.result()) as StepResult;
      return { ...st, status: 'completed', result, attempts: result.attempts };
    }
    case 'FAILED': {
      try {
        await handle.result();
      } catch (err) {
        const state = err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure ? (err.cause.details?.[0] as StepState | undefined) : undefined;
        if (state && state.id === id) return { ...state, status: 'failed' };
      }
      return { ...st, status: 'failed' };
    }
    default:
      return { ...st, status: 'cancelled' };
  }
}

/** The run's status from the server's records alone, with `message` saying so. */
export async function workerlessStatus(client: WorkflowClient, workflowId: string, runId: string, plan: Plan, keep: Record<string, StepResult>, message: string, carried: StepState[] = []): Promise<RunStatus> {
  const byId = new Map(carried.map((s) => [s.id, s]));
  const steps = await Promise.all(plan.steps.map((s) => stepFromServer(client, workflowId, runId, s.id, keep[s.id], byId.get(s.id))));
  return { recipe: plan.recipe, runId: plan.runId, runDir: plan.runDir, status: 'running', message, steps };
}
