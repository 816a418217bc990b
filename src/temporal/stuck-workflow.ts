/**
 * A workflow whose workflow task keeps failing (a history too large for a poll, a nondeterminism, a bug): the
 * server retries that task forever and the workflow stands still while its worker serves the others. `status`
 * names it instead of saying that it waits for a worker (issue 33: a stage stuck on a 9 MB history read as
 * "waiting 10m: a worker to go on"). Read from the server alone: the description's pending workflow task says
 * how many times it failed, the newest events say why.
 */
import type { WorkflowClient, WorkflowExecutionDescription } from '@temporalio/client';
import { failureMessage } from './payloads.js';

/** Failed workflow tasks in a row before `status` calls the workflow stuck (a single retry is routine). */
const STUCK_AFTER_ATTEMPTS = 3;
/** The newest events read for the failure's cause. */
const TAIL_EVENTS = 20;

export interface StuckWorkflow {
  workflowId: string;
  attempts: number;
  /** Why its last workflow task failed, as the server recorded it ('' when it did not say). */
  cause: string;
}

/** null when the workflow's task is not failing over and over. */
export async function stuckWorkflow(client: WorkflowClient, desc: WorkflowExecutionDescription): Promise<StuckWorkflow | null> {
  const attempts = desc.raw.pendingWorkflowTask?.attempt ?? 0;
  if (attempts < STUCK_AFTER_ATTEMPTS) return null;
  let cause = '';
  try {
    const res = await client.workflowService.getWorkflowExecutionHistoryReverse({
      namespace: client.options.namespace,
      execution: { workflowId: desc.workflowId, runId: desc.runId },
      maximumPageSize: TAIL_EVENTS,
    });
    for (const e of res.history?.events ?? []) {
      const failed = e.workflowTaskFailedEventAttributes;
      if (failed) {
        cause = failed.failure ? await failureMessage(client, failed.failure) : String(failed.cause ?? '');
        break;
      }
      if (e.workflowTaskTimedOutEventAttributes) {
        cause = 'its workflow task timed out';
        break;
      }
    }
  } catch {
    /* the count alone says enough */
  }
  return { workflowId: desc.workflowId, attempts, cause: cause.replace(/\s+/g, ' ').slice(0, 200) };
}

/** `fake-long/cpt.stable cannot go on: its workflow task failed 12 times in a row (…)`. */
export function stuckWords(s: StuckWorkflow): string {
  return `${s.workflowId} cannot go on: its workflow task failed ${s.attempts} times in a row${s.cause ? ` (${s.cause})` : ''}; the worker serves the other runs meanwhile`;
}
