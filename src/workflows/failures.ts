/** Map a failed activity to a failure class, and read what the retry rule needs of it. Workflow-safe: @temporalio/workflow only. */
import { ActivityFailure, ApplicationFailure, TimeoutFailure } from '@temporalio/workflow';
import type { Progress } from '../plan/contracts.js';
import { closeAttempt, type AttemptTime } from '../plan/goodput.js';
import { FAILURE_CLASSES, type FailureClass } from '../plan/types.js';
import type { FailureFacts } from './retry-rule.js';

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

/**
 * What the retry rule needs to know of a failure besides its class: the newest complete checkpoint at it and the
 * one the step started from. runStep's failures carry the attempt's progress as their first detail; a lost
 * worker's timeout carries none, so the last progress the step signalled (`lastSignalled`) stands in for it.
 */
export function failureFacts(err: unknown, lastSignalled: Progress | null): FailureFacts & { message: string } {
  const { cls, message } = failureClassOf(err);
  const reported = failureProgress(err);
  return {
    cls,
    message,
    checkpoint: reported?.lastCheckpoint ?? lastSignalled?.lastCheckpoint ?? null,
    startedFrom: (reported ?? lastSignalled)?.resumedFrom ?? null,
  };
}

function failureProgress(err: unknown): Progress | null {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (!(cause instanceof ApplicationFailure)) return null;
  const p: unknown = cause.details?.[0];
  return p && typeof p === 'object' && 'lastCheckpoint' in p ? (p as Progress) : null;
}

/**
 * Where a failed attempt was: the progress its failure carries, else (a lost worker's timeout) its last heartbeat;
 * null when it reported neither.
 */
export function attemptProgress(err: unknown): Progress | null {
  const reported = failureProgress(err);
  if (reported) return reported;
  const cause = err instanceof ActivityFailure ? err.cause : err;
  const p: unknown = cause instanceof TimeoutFailure ? cause.lastHeartbeatDetails : undefined;
  return p && typeof p === 'object' && 'lastCheckpoint' in p ? (p as Progress) : null;
}

/**
 * The failed attempt's time, closed at `now`: what its failure details carry (closed by the supervisor), else
 * its last heartbeat (a lost worker: the silence since then is the time it took to notice), else a record of
 * nothing but that silence since the attempt was scheduled.
 */
export function failedAttemptTime(err: unknown, attempt: number, scheduledAt: number, now: number, cls: FailureClass): AttemptTime {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  const details: unknown = cause instanceof ApplicationFailure ? cause.details?.[0] : cause instanceof TimeoutFailure ? cause.lastHeartbeatDetails : undefined;
  const t = details && typeof details === 'object' ? (details as Progress).time : undefined;
  const recorded = t && t.attempt === attempt ? t : null;
  return closeAttempt(recorded ?? { attempt, scheduledAt, endedAt: null, attributedTo: scheduledAt, open: 'startup', secs: {}, lastIteration: null, failure: null }, now, cls);
}
