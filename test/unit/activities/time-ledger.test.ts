/**
 * The supervisor's lost-time ledger, driven by progress events at chosen timestamps (no process): every second
 * of an attempt lands in one named category, and the categories add up to the attempt's wall-clock time.
 */
import { describe, expect, it } from 'vitest';
import type { ProgressEvent } from '../../../src/engine-logs/progress-parsers.js';
import { launched, newAttemptTime, observeTime } from '../../../src/activities/time-ledger.js';
import { closeAttempt, totalSec, type AttemptTime } from '../../../src/plan/goodput.js';

const S = 1000;

/** Events at seconds after t=0: `[sec, event]`. */
function fold(events: [number, ProgressEvent][], redoUntil: number | null = null, opts: { scheduled?: number; started?: number; launch?: number } = {}): AttemptTime {
  const t = newAttemptTime(1, (opts.scheduled ?? 0) * S, (opts.started ?? 0) * S);
  launched(t, (opts.launch ?? 0) * S);
  for (const [sec, ev] of events) observeTime(t, ev, sec * S, redoUntil);
  return t;
}

const it_ = (iteration: number): ProgressEvent => ({ iteration });

describe('the time ledger', () => {
  it('splits a clean attempt: waiting for a worker and the lock, startup, iterations, a save, the exit', () => {
    const t = fold(
      [
        [10, it_(1)], // launch at 4, first iteration at 10: startup 6 s
        [11, it_(2)],
        [12, it_(3)],
        [12.2, { savingCheckpoint: true }],
        [15.2, { checkpointSaved: 3 }],
        [16.2, it_(4)],
      ],
      null,
      { scheduled: 0, started: 1, launch: 4 },
    );
    const done = closeAttempt(t, 17 * S, null);
    expect(done.secs).toEqual({ waiting: 4, startup: 6, productive: 2 + 0.2 + 1, save: 3, overhead: 0.8 });
    expect(totalSec(done.secs)).toBeCloseTo(17, 9);
    expect(done.lastIteration).toBe(4);
    expect(done.failure).toBeNull();
  });

  it("takes the compute of the first line's iterations out of startup: a warmup of 10 iterations logged once is not 0 % productive", () => {
    // The tiny recipe's cpt.warmup: --log-interval 10, one line at iteration 10 after 1.04 s (41.4 ms per iteration),
    // its save, its exit. Before, the whole 1.04 s was startup and the step showed 0.2 % goodput.
    const t = newAttemptTime(1, 0, 0.04 * S, '812@vm');
    launched(t, 0.04 * S, null, ['python', 'main.py', 'pretrain', '--log-interval', '10']);
    observeTime(t, { iteration: 10, totalIterations: 600, msPerIteration: 41.4 }, 1.08 * S, null);
    observeTime(t, { savingCheckpoint: true }, 1.082 * S, null);
    observeTime(t, { checkpointSaved: 10 }, 1.088 * S, null);
    const done = closeAttempt(t, 1.29 * S, null);
    expect(done.secs.productive).toBeCloseTo(0.414 + 0.002, 6);
    expect(done.secs.startup).toBeCloseTo(1.04 - 0.414, 6);
    expect(totalSec(done.secs)).toBeCloseTo(1.29, 9);
    expect(done.worker).toBe('812@vm');
  });

  it('counts at most the iterations since the checkpoint loaded, at most one log interval, never more than the silence', () => {
    const first = (from: number | null, iteration: number, ms: number, at: number) => {
      const t = newAttemptTime(1, 0, 0);
      launched(t, 0, from, ['--log-interval', '10']);
      observeTime(t, { iteration, msPerIteration: ms }, at * S, null);
      return t.secs;
    };
    expect(first(10, 20, 100, 5)).toEqual({ startup: 4, productive: 1 }); // stable resumed from 10: 10 iterations
    expect(first(15, 20, 100, 5)).toEqual({ startup: 4.5, productive: 0.5 }); // resumed from a save between lines
    expect(first(null, 490, 100, 5)).toEqual({ startup: 4, productive: 1 }); // unknown start: one log interval
    expect(first(null, 490, 1000, 5)).toEqual({ productive: 5 }); // never more than the silence
    expect(first(10, 20, 0, 5)).toEqual({ startup: 5 }); // no time per iteration: all startup, as before
  });

  it('counts iterations an earlier attempt already reached as recomputed, the rest as productive', () => {
    // Resumed from 4; the previous attempt had reached 6: iterations 5 and 6 are trained again.
    const t = fold([[3, { loadingCheckpoint: true }], [8, it_(5)], [9, it_(6)], [10, it_(7)], [11, it_(8)]], 6);
    expect(t.secs).toEqual({ startup: 8, recomputed: 1, productive: 2 });
  });

  it('makes the silence of a hung trainer detection, and the kill grace after the stop overhead', () => {
    const t = fold([[2, it_(1)], [3, it_(2)], [4, it_(3)]]);
    const done = closeAttempt(t, 30 * S, 'hang', 24 * S); // stopped 20 s after the last iteration; gone 6 s later
    expect(done.secs).toEqual({ startup: 2, productive: 2, detection: 20, overhead: 6 });
    expect(done.failure).toBe('hang');
    expect(totalSec(done.secs)).toBeCloseTo(30, 9);
  });

  it('makes the rest of a crashed attempt detection (nothing was stopped)', () => {
    const done = closeAttempt(fold([[2, it_(1)], [3, it_(2)]]), 3.4 * S, 'crash');
    expect(done.secs.detection).toBeCloseTo(0.4, 9);
  });

  it('makes a save that never finished part of the detection of its failure', () => {
    const t = fold([[2, it_(1)], [2.5, { savingCheckpoint: true }]]);
    const done = closeAttempt(t, 9 * S, 'preempted');
    expect(done.secs).toEqual({ startup: 2, productive: 0.5, detection: 6.5 });
  });

  it('counts a tool that prints no progress as productive when it succeeds', () => {
    const done = closeAttempt(fold([]), 40 * S, null);
    expect(done.secs).toEqual({ productive: 40 });
  });

  it('ignores a repeated iteration line and attributes nothing backwards in time', () => {
    const t = fold([[2, it_(1)], [2.5, it_(1)], [3, it_(2)], [2.8, it_(3)]]);
    expect(t.secs).toEqual({ startup: 2, productive: 1 });
    expect(totalSec(t.secs)).toBe(3);
  });

  it('closes an attempt once: a second close changes nothing', () => {
    const once = closeAttempt(fold([[2, it_(1)]]), 5 * S, 'crash');
    expect(closeAttempt(once, 50 * S, null)).toBe(once);
  });
});
