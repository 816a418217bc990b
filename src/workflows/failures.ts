/** Map a failed activity to a failure class. Workflow-safe: @temporalio/workflow only. */
import { ActivityFailure, ApplicationFailure, TimeoutFailure } from '@temporalio/workflow';
import { FAILURE_CLASSES, type FailureClass } from '../plan/types.js';

export function failureClassOf(err: unknown): { cls: FailureClass; message: string } {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof ApplicationFailure) {
    const t = cause.type as FailureClass | undefined;
    if (t && (FAILURE_CLASSES as readonly string[]).includes(t)) return { cls: t, message: cause.message };
    return { cls: cause.nonRetryable ? 'config' : 'crash', message: cause.message };
  }
  if (cause instanceof TimeoutFailure) {
    // No heartbeat within the timeout: the worker (or its host) is gone. The supervisor reports hangs itself.
    if (cause.timeoutType === 'HEARTBEAT' || cause.timeoutType === 'SCHEDULE_TO_START') {
      return { cls: 'preempted', message: `worker lost (${cause.timeoutType.toLowerCase()} timeout)` };
    }
    return { cls: 'hang', message: `attempt timed out (${String(cause.timeoutType).toLowerCase()})` };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { cls: 'crash', message };
}
