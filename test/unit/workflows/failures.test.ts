/**
 * failureClassOf: how stageRun reads an activity failure, with the real Temporal failure classes.
 */
import { ActivityFailure, ApplicationFailure, CancelledFailure, RetryState, TimeoutFailure, TimeoutType } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { FAILURE_CLASSES } from '../../../src/plan/types.js';
import type { Progress } from '../../../src/plan/contracts.js';
import { failureClassOf, failureFacts } from '../../../src/workflows/failures.js';

const activity = (cause?: Error, message = 'Activity task failed') =>
  new ActivityFailure(message, 'runStep', '1', RetryState.MAXIMUM_ATTEMPTS_REACHED, 'worker@host', cause);

describe('failureClassOf: ApplicationFailure (thrown by runStep)', () => {
  it.each(FAILURE_CLASSES)('reads the class %s from the failure type, with the cause message', (cls) => {
    const cause = ApplicationFailure.create({ type: cls, message: `cpt.stable: ${cls}: why`, nonRetryable: cls === 'config' });
    expect(failureClassOf(activity(cause))).toEqual({ cls, message: `cpt.stable: ${cls}: why` });
  });

  it('trusts the type over the retryable flag', () => {
    const cause = ApplicationFailure.create({ type: 'oom', message: 'm', nonRetryable: true });
    expect(failureClassOf(activity(cause)).cls).toBe('oom');
  });

  it('reads an unknown type as config when non-retryable, crash otherwise', () => {
    expect(failureClassOf(activity(ApplicationFailure.nonRetryable('bad input', 'ZodError')))).toEqual({ cls: 'config', message: 'bad input' });
    expect(failureClassOf(activity(ApplicationFailure.retryable('flaky', 'Error')))).toEqual({ cls: 'crash', message: 'flaky' });
    expect(failureClassOf(activity(new ApplicationFailure('no type')))).toEqual({ cls: 'crash', message: 'no type' });
  });

  it('is case-sensitive about the class names', () => {
    expect(failureClassOf(activity(ApplicationFailure.retryable('m', 'OOM'))).cls).toBe('crash');
  });

  it('reads an ApplicationFailure that is not wrapped in an ActivityFailure', () => {
    expect(failureClassOf(ApplicationFailure.create({ type: 'hang', message: 'stalled' }))).toEqual({ cls: 'hang', message: 'stalled' });
  });

  it('survives the constructor signature (message, type, nonRetryable, details)', () => {
    const f = new ApplicationFailure('pre', 'preempted', false, [{ iteration: 5 }]);
    expect(failureClassOf(activity(f))).toEqual({ cls: 'preempted', message: 'pre' });
  });
});

describe('failureClassOf: TimeoutFailure', () => {
  it('a heartbeat timeout means the worker is gone: preempted', () => {
    const cause = new TimeoutFailure('activity Heartbeat timeout', { iteration: 10 }, TimeoutType.HEARTBEAT);
    expect(failureClassOf(activity(cause))).toEqual({ cls: 'preempted', message: 'worker lost (heartbeat timeout)' });
  });

  it('a schedule-to-start timeout means no worker picked it up: preempted', () => {
    const cause = new TimeoutFailure(undefined, undefined, TimeoutType.SCHEDULE_TO_START);
    expect(failureClassOf(activity(cause))).toEqual({ cls: 'preempted', message: 'worker lost (schedule_to_start timeout)' });
  });

  it.each([
    [TimeoutType.START_TO_CLOSE, 'attempt timed out (start_to_close)'],
    [TimeoutType.SCHEDULE_TO_CLOSE, 'attempt timed out (schedule_to_close)'],
  ])('%s is a hang', (type, message) => {
    expect(failureClassOf(activity(new TimeoutFailure('t', undefined, type)))).toEqual({ cls: 'hang', message });
  });

  it('reads an unwrapped TimeoutFailure too', () => {
    expect(failureClassOf(new TimeoutFailure('t', null, TimeoutType.HEARTBEAT)).cls).toBe('preempted');
  });
});

describe('failureClassOf: anything else is a crash', () => {
  it('an ActivityFailure without a cause reports its own message', () => {
    expect(failureClassOf(activity(undefined, 'activity failed for no reason'))).toEqual({ cls: 'crash', message: 'activity failed for no reason' });
  });

  it('a cancelled activity that reaches it is a crash (stageRun handles cancellation before)', () => {
    expect(failureClassOf(activity(new CancelledFailure('cancelled'))).cls).toBe('crash');
  });

  it('a plain Error, a string and undefined', () => {
    expect(failureClassOf(new Error('boom'))).toEqual({ cls: 'crash', message: 'boom' });
    expect(failureClassOf('just a string')).toEqual({ cls: 'crash', message: 'just a string' });
    expect(failureClassOf(undefined)).toEqual({ cls: 'crash', message: 'undefined' });
  });

  it('a plain Error inside an ActivityFailure', () => {
    expect(failureClassOf(activity(new Error('inner')))).toEqual({ cls: 'crash', message: 'Activity task failed' });
  });
});

describe('failureFacts: the checkpoint at a failure, for the retry rule', () => {
  const progress = (lastCheckpoint: number | null, resumedFrom: number | null) => ({ lastCheckpoint, resumedFrom, attempt: 2 }) as Progress;
  const crash = (p?: Progress) => activity(ApplicationFailure.create({ type: 'crash', message: 'm', details: p ? [p] : [] }));

  it.each<[string, Error, Progress | null, { checkpoint: number | null; startedFrom: number | null }]>([
    ['the progress the failure carries wins over the signalled', crash(progress(50, 40)), progress(40, 40), { checkpoint: 50, startedFrom: 40 }],
    ['a failure that carries no checkpoint: the signalled one', crash(progress(null, null)), progress(40, 30), { checkpoint: 40, startedFrom: null }],
    ['a failure without details: the signalled progress', crash(), progress(40, 30), { checkpoint: 40, startedFrom: 30 }],
    ['a lost worker (heartbeat timeout): the signalled progress', activity(new TimeoutFailure('t', { lastCheckpoint: 99 }, TimeoutType.HEARTBEAT)), progress(40, 30), { checkpoint: 40, startedFrom: 30 }],
    ['nothing known', activity(new TimeoutFailure('t', undefined, TimeoutType.HEARTBEAT)), null, { checkpoint: null, startedFrom: null }],
  ])('%s', (_, err, signalled, expected) => {
    expect(failureFacts(err, signalled)).toMatchObject(expected);
  });

  it('keeps the class and message of failureClassOf', () => {
    expect(failureFacts(crash(progress(10, null)), null)).toEqual({ cls: 'crash', message: 'm', checkpoint: 10, startedFrom: null });
  });
});
