/**
 * The retry rule (workflows/retry-rule.ts) with tables: a budget bounds failures in a row without progress past
 * the previous failure's checkpoint, never the number of failures of a long healthy run.
 */
import { describe, expect, it } from 'vitest';
import type { FailureClass, RetryBudgets } from '../../../src/plan/types.js';
import { judgeFailure, retryPauseSec, type RetryMemory, type RetryVerdict } from '../../../src/workflows/retry-rule.js';

const BUDGETS: RetryBudgets = { crash: 2, hang: 1, oom: 1, preempted: 3, storage: 2, config: 0 };
const FRESH: RetryMemory = { streaks: {}, checkpoint: undefined };

/** A failure: its class, the newest complete checkpoint at it (null: none known). */
type F = [FailureClass, number | null];

/** The verdicts of a sequence of failures of one step that started from `startedFrom`, each judged in turn. */
function judgeAll(failures: F[], startedFrom: number | null = null, budgets = BUDGETS): RetryVerdict[] {
  let memory = FRESH;
  return failures.map(([cls, checkpoint]) => {
    const v = judgeFailure(memory, { cls, checkpoint, startedFrom }, budgets);
    memory = v.memory;
    return v;
  });
}

const summary = (vs: RetryVerdict[]) => vs.map((v) => `${v.progressed ? 'P' : '-'}${v.streak}${v.retry ? '' : '!'}`).join(' ');

describe('judgeFailure: progress resets, no progress accumulates', () => {
  it.each<[string, F[], string]>([
    // summary per failure: P progressed / - not, the class's streak, ! stops the step
    ['ten crashes, each after a new checkpoint: never stops', Array.from({ length: 10 }, (_, i): F => ['crash', (i + 1) * 10]), 'P0 P0 P0 P0 P0 P0 P0 P0 P0 P0'],
    ['crashes on the same checkpoint: stops at budget + 1', [['crash', 40], ['crash', 40], ['crash', 40], ['crash', 40]], 'P0 -1 -2 -3!'],
    ['crashes before any checkpoint: stops at budget + 1', [['crash', null], ['crash', null], ['crash', null]], '-1 -2 -3!'],
    ['a checkpoint between loops resets the streak', [['crash', null], ['crash', null], ['crash', 10], ['crash', 10], ['crash', 10], ['crash', 20]], '-1 -2 P0 -1 -2 P0'],
    ['a checkpoint older than the newest seen is no progress', [['crash', 40], ['crash', 30], ['crash', 40], ['crash', 35]], 'P0 -1 -2 -3!'],
    ['a failure that knows no checkpoint keeps the high-water mark', [['crash', 40], ['storage', null], ['crash', 40], ['crash', 50]], 'P0 -1 -1 P0'],
    ['oom (budget 1): two after new checkpoints, then two on the same one', [['oom', 10], ['oom', 20], ['oom', 20], ['oom', 20]], 'P0 P0 -1 -2!'],
  ])('%s', (_, failures, expected) => {
    expect(summary(judgeAll(failures))).toBe(expected);
  });

  it('a budget of 0 stops at the first failure without progress, and retries one after progress', () => {
    const none = { ...BUDGETS, crash: 0 };
    expect(summary(judgeAll([['crash', null]], null, none))).toBe('-1!');
    expect(summary(judgeAll([['crash', 10], ['crash', 20], ['crash', 20]], null, none))).toBe('P0 P0 -1!');
  });
});

describe('judgeFailure: mixed classes', () => {
  it('streaks are per class: failures of different classes without progress do not add up', () => {
    const vs = judgeAll([['crash', null], ['oom', null], ['crash', null], ['hang', null], ['preempted', null]]);
    expect(summary(vs)).toBe('-1 -1 -2 -1 -1');
    expect(vs.at(-1)!.memory.streaks).toEqual({ crash: 2, oom: 1, hang: 1, preempted: 1 });
  });

  it('progress in a failure of one class resets the streak of every class', () => {
    const vs = judgeAll([['crash', 10], ['crash', 10], ['oom', 10], ['preempted', 20], ['crash', 20], ['oom', 20], ['oom', 20]]);
    expect(summary(vs)).toBe('P0 -1 -1 P0 -1 -1 -2!');
    expect(vs[3]!.memory.streaks).toEqual({});
  });

  it('the class over its budget stops the step, whatever the others', () => {
    expect(summary(judgeAll([['preempted', null], ['preempted', null], ['hang', null], ['hang', null]]))).toBe('-1 -2 -1 -2!');
  });
});

describe('judgeFailure: the first failure', () => {
  it.each<[string, number | null, number | null, boolean]>([
    ['fresh start, failed before any checkpoint', null, null, false],
    ['fresh start, failed after checkpoint 10', null, 10, true],
    ['resumed from 40, failed before the next checkpoint', 40, 40, false],
    ['resumed from 40, failed after checkpoint 50', 40, 50, true],
    ['resumed from 40, failed before the checkpoint was known (null)', 40, null, false],
  ])('%s: progressed %s', (_, startedFrom, checkpoint, progressed) => {
    const v = judgeFailure(FRESH, { cls: 'crash', checkpoint, startedFrom }, BUDGETS);
    expect(v.progressed).toBe(progressed);
    expect(v.retry).toBe(true);
    expect(v.memory.checkpoint).toBe(progressed ? checkpoint : startedFrom);
  });

  it('after the first failure the start no longer matters: the mark is the previous failure\'s', () => {
    const first = judgeFailure(FRESH, { cls: 'crash', checkpoint: 40, startedFrom: 40 }, BUDGETS);
    // a later attempt that resumed from 40 reports startedFrom 40 too; only a newer checkpoint is progress
    expect(judgeFailure(first.memory, { cls: 'crash', checkpoint: 40, startedFrom: null }, BUDGETS).progressed).toBe(false);
  });
});

describe('judgeFailure: the preempted case (a lost worker, no details)', () => {
  // The workflow passes the last progress it was signalled: the checkpoint the lost attempt had reached, or
  // an older one if the signal of the newest was lost (then: no progress, the conservative reading).
  it.each<[string, RetryMemory, number | null, boolean, number]>([
    ['the signalled checkpoint moved past the last failure\'s', { streaks: { preempted: 2 }, checkpoint: 40 }, 50, true, 0],
    ['no signal since the last failure', { streaks: { preempted: 2 }, checkpoint: 40 }, 40, false, 3],
    ['no progress ever signalled', { streaks: {}, checkpoint: undefined }, null, false, 1],
  ])('%s', (_, memory, signalled, progressed, streak) => {
    const v = judgeFailure(memory, { cls: 'preempted', checkpoint: signalled, startedFrom: null }, BUDGETS);
    expect([v.progressed, v.streak, v.retry]).toEqual([progressed, streak, true]);
  });

  it('a fourth lost worker in a row without progress is a restart loop (budget 3)', () => {
    const v = judgeFailure({ streaks: { preempted: 3 }, checkpoint: 40 }, { cls: 'preempted', checkpoint: 40, startedFrom: null }, BUDGETS);
    expect(v.retry).toBe(false);
  });
});

describe('judgeFailure: why the step stops', () => {
  it.each<[string, RetryMemory, F, string]>([
    ['a loop past a checkpoint', { streaks: { crash: 2 }, checkpoint: 40 }, ['crash', 40], 'restart loop: 3 consecutive crash failures without progress past checkpoint 40; retries.crash is 2'],
    ['a loop before any checkpoint', { streaks: { oom: 1 }, checkpoint: null }, ['oom', null], 'restart loop: 2 consecutive oom failures without progress (no complete checkpoint yet); retries.oom is 1'],
    ['one failure over a budget of 0', { streaks: {}, checkpoint: 10 }, ['hang', 10], 'restart loop: 1 hang failure without progress past checkpoint 10; retries.hang is 0'],
  ])('%s', (_, memory, [cls, checkpoint], why) => {
    const v = judgeFailure(memory, { cls, checkpoint, startedFrom: null }, { ...BUDGETS, hang: 0 });
    expect(v.retry).toBe(false);
    expect(v.why).toBe(why);
  });

  it('config is never retried, even after progress', () => {
    const v = judgeFailure({ streaks: {}, checkpoint: 10 }, { cls: 'config', checkpoint: 20, startedFrom: null }, BUDGETS);
    expect([v.retry, v.why]).toEqual([false, 'a configuration error is never retried']);
  });

  it('does not change the memory it was given', () => {
    const memory: RetryMemory = { streaks: { crash: 1 }, checkpoint: 40 };
    judgeFailure(memory, { cls: 'crash', checkpoint: 40, startedFrom: null }, BUDGETS);
    expect(memory).toEqual({ streaks: { crash: 1 }, checkpoint: 40 });
  });
});

describe('retryPauseSec: storage pauses double with the streak, not the lifetime count', () => {
  it.each([
    ['crash', 1, 5],
    ['storage', 0, 5],
    ['storage', 1, 5],
    ['storage', 2, 10],
    ['storage', 8, 600],
  ] as const)('%s, streak %i: %i s (retry delay 5 s)', (cls, streak, sec) => {
    expect(retryPauseSec(cls, streak, 5)).toBe(sec);
  });
});
