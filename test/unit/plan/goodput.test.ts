/**
 * A step's and a run's goodput from attempt records: restarts between attempts, what each failure class cost,
 * GPU-hours, the fold of old attempts (a weeks-long step keeps a small state), a running attempt's live view.
 */
import { describe, expect, it } from 'vitest';
import {
  attemptSoFar,
  highWater,
  lostByClass,
  MAX_ATTEMPT_RECORDS,
  runGoodput,
  stepGoodput,
  stepSplit,
  totalSec,
  withAttempt,
  withLastHeard,
  type AttemptTime,
  type StepTime,
} from '../../../src/plan/goodput.js';
import type { FailureClass } from '../../../src/plan/types.js';

const S = 1000;

function attempt(n: number, scheduled: number, ended: number | null, secs: AttemptTime['secs'], failure: FailureClass | null = null, lastIteration: number | null = null): AttemptTime {
  return { attempt: n, scheduledAt: scheduled * S, endedAt: ended === null ? null : ended * S, attributedTo: (ended ?? scheduled) * S, open: 'training', secs, lastIteration, failure };
}

/** A hang at 100 s (detected 20 s later, 5 s to stop), a 5 s pause, then a clean attempt that redoes 8 s. */
const hangThenDone: StepTime = {
  gpus: 8,
  attempts: [
    attempt(1, 0, 125, { waiting: 1, startup: 10, productive: 89, detection: 20, overhead: 5 }, 'hang', 60),
    attempt(2, 130, 230, { waiting: 2, startup: 10, recomputed: 8, productive: 80 }, null, 140),
  ],
};

describe('a step\'s time', () => {
  it('adds the restart between attempts, so the categories add up to the step\'s wall-clock time', () => {
    const s = stepSplit(hangThenDone);
    expect(s.restart).toBe(5);
    expect(totalSec(s)).toBe(230);
    expect(s.productive).toBe(169);
  });

  it('charges a failure with its detection and overhead, the restart, and the next attempt\'s waiting, startup and recomputed work', () => {
    expect(lostByClass(hangThenDone)).toEqual({ hang: 20 + 5 + 5 + 2 + 10 + 8 });
    const f = stepGoodput(hangThenDone);
    expect(f.goodput).toBeCloseTo(169 / 230, 9);
    expect(f.gpuHoursLostByClass.hang).toBeCloseTo((50 * 8) / 3600, 9);
  });

  it('counts a running attempt until now, its open span in its phase', () => {
    const live: AttemptTime = { ...attempt(2, 130, null, { waiting: 2, startup: 10 }), attributedTo: 142 * S, open: 'training' };
    expect(attemptSoFar(live, 150 * S)).toEqual({ waiting: 2, startup: 10, productive: 8 });
    const st = withAttempt({ ...hangThenDone, attempts: hangThenDone.attempts.slice(0, 1) }, live);
    expect(totalSec(stepSplit(st, 150 * S))).toBe(150);
  });

  it('counts a cancelled attempt as last heard, closed when the step ended: a run cancelled mid-step keeps its training time', () => {
    // Cancelled at iteration 236 of cpt.stable: the workflow recorded no time for the attempt, its last progress
    // (a checkpoint at 14 s) had startup 1 s and 13 s of training; the step ended 1.5 s later.
    const heard: AttemptTime = { ...attempt(1, 0, null, { waiting: 0.1, startup: 1, productive: 12.9 }), attributedTo: 14 * S, open: 'training' };
    const none: StepTime = { gpus: 0, attempts: [] };
    const st = withLastHeard(none, heard, 15.5 * S);
    expect(st.attempts).toHaveLength(1);
    expect(stepSplit(st)).toEqual({ waiting: 0.1, startup: 1, productive: 12.9, overhead: 1.5 });
    expect(stepGoodput(st).goodput).toBeCloseTo(12.9 / 15.5, 9);
    // A record the workflow has already (a failure's, a result's) is never counted twice; a running one stays open.
    expect(withLastHeard(hangThenDone, hangThenDone.attempts[1], 300 * S)).toBe(hangThenDone);
    expect(withLastHeard(none, heard, null).attempts[0]).toBe(heard);
    expect(withLastHeard(none, null, 15 * S)).toBe(none);
  });

  it('knows the highest iteration any attempt reached (what a resume recomputes up to)', () => {
    expect(highWater(hangThenDone)).toBe(140);
    expect(highWater({ gpus: 0, attempts: [] })).toBeNull();
    expect(highWater(undefined)).toBeNull();
  });

  it('keeps at most MAX_ATTEMPT_RECORDS attempts, folding the oldest without losing a second or a failure\'s cost', () => {
    let st: StepTime = { gpus: 2, attempts: [] };
    let t = 0;
    const n = MAX_ATTEMPT_RECORDS + 7;
    for (let i = 1; i <= n; i++) {
      const failed = i < n;
      st = withAttempt(st, attempt(i, t, t + 10, { startup: 1, productive: 6, ...(failed ? { detection: 3 } : { overhead: 3 }) }, failed ? 'crash' : null));
      t += 12; // 2 s restart after each
    }
    expect(st.attempts).toHaveLength(MAX_ATTEMPT_RECORDS);
    expect(st.earlier?.attempts).toBe(7);
    const s = stepSplit(st);
    expect(totalSec(s)).toBeCloseTo(t - 2, 9); // the last attempt ends 10 s after its start
    expect(s.restart).toBeCloseTo(2 * (n - 1), 9);
    // Each crash: detection 3 + restart 2 + the next attempt's startup 1.
    expect(lostByClass(st).crash).toBeCloseTo(6 * (n - 1), 9);
  });

  it('replaces an attempt recorded twice (a retried report) instead of counting it again', () => {
    const a = attempt(1, 0, 10, { productive: 10 });
    expect(withAttempt(withAttempt({ gpus: 1, attempts: [] }, a), a).attempts).toHaveLength(1);
  });
});

describe('a run\'s goodput', () => {
  it('weights each step by its GPUs (a CPU step by 1) and sums what failures cost', () => {
    const gpu = stepGoodput(hangThenDone); // 8 GPUs, 169/230 productive
    const cpu = stepGoodput({ gpus: 0, attempts: [attempt(1, 0, 10, { productive: 5, startup: 5 })] });
    const run = runGoodput([
      { gpus: 8, figures: gpu },
      { gpus: 0, figures: cpu },
    ]);
    expect(run.goodput).toBeCloseTo((169 * 8 + 5) / (230 * 8 + 10), 9);
    expect(run.totalSec).toBe(240);
    expect(run.lostSecByClass).toEqual({ hang: 50 });
  });
});
