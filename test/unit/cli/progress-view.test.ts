import { describe, expect, it } from 'vitest';
import { bar, formatDuration, plainLine, progressBlock, progressLine, RateTracker } from '../../../src/cli/progress-view.js';
import type { StepState } from '../../../src/plan/contracts.js';

function step(over: Partial<StepState> & { id: string }): StepState {
  return { status: 'pending', attempts: 0, failures: {}, lastFailure: null, progress: null, startedAt: null, endedAt: null, result: null, ...over };
}

const progress = (iteration: number, totalIterations: number, loss: number | null = null) => ({
  iteration, totalIterations, loss, throughput: null, throughputUnit: null, lastCheckpoint: null, resumedFrom: null, attempt: 1, pid: 1, updatedAt: '',
});

describe('live progress lines', () => {
  it('draws a bar proportional to progress, clamped to the width', () => {
    expect(bar(0, 10, 10)).toBe('[----------]');
    expect(bar(5, 10, 10)).toBe('[#####-----]');
    expect(bar(12, 10, 10)).toBe('[##########]');
    expect(bar(3, 0, 4)).toBe('[----]');
  });

  it('formats durations as m:ss or h:mm:ss', () => {
    expect(formatDuration(0)).toBe('0:00');
    expect(formatDuration(61)).toBe('1:01');
    expect(formatDuration(3 * 3600 + 5)).toBe('3:00:05');
    expect(formatDuration(Number.NaN)).toBe('--:--');
  });

  it('measures the rate from observations and restarts after a resume moves the iteration back', () => {
    const r = new RateTracker();
    r.observe('a', 10, 0);
    expect(r.rate('a')).toBeNull();
    r.observe('a', 30, 10_000);
    expect(r.rate('a')).toBe(2);
    r.observe('a', 20, 11_000); // resumed from an earlier checkpoint
    r.observe('a', 22, 12_000);
    expect(r.rate('a')).toBe(2);
  });

  it('shows a running step with bar, iteration/total, loss, ETA and the attempt', () => {
    const line = progressLine(step({ id: 'cpt.stable', status: 'running', attempts: 2, progress: progress(40, 160, 2.3456) }), 4, 12);
    expect(line).toBe('cpt.stable    [######------------------] 40/160  loss 2.346  ETA 0:30  attempt 2');
  });

  it('shows finished steps with their result (iteration, loss, headline score), and failures with their class', () => {
    const base = { stepId: 'x', outputs: {}, iteration: 1, attempts: 1, resumedFrom: null, durationSec: 1, finishedAt: '', fingerprint: null };
    expect(progressLine(step({ id: 'eval.arith', status: 'completed', result: { ...base, iteration: null, loss: null, metrics: { accuracy: 0.4567, n: 30 } } }), null, 10)).toBe('eval.arith  completed  acc 45.7 %');
    expect(progressLine(step({ id: 'eval.other', status: 'completed', result: { ...base, iteration: null, loss: null, metrics: { bleu: 21.5 } } }), null, 10)).toBe('eval.other  completed  bleu=21.5');
    expect(progressLine(step({ id: 'sft.stage1', status: 'completed', result: { ...base, loss: 0.5, metrics: {} } }), null, 10)).toBe('sft.stage1  completed  1/1  loss 0.5000');
    expect(progressLine(step({ id: 'rl', status: 'failed', lastFailure: { class: 'oom', message: 'CUDA out of memory' } }), null, 2)).toBe('rl  failed  oom: CUDA out of memory');
    expect(progressBlock([step({ id: 'a' }), step({ id: 'bbb', status: 'skipped' })], new RateTracker())).toEqual(['a    pending', 'bbb  skipped']);
  });

  it.each(['completed', 'kept'] as const)('shows a %s step\'s final result, not the stale progress of its last heartbeat', (status) => {
    const base = { stepId: 'x', outputs: {}, attempts: 1, resumedFrom: null, durationSec: 1, finishedAt: '', fingerprint: null, metrics: {} };
    const s = step({ id: 'cpt.warmup', status, attempts: 1, progress: progress(2, 4, 9.87654), result: { ...base, iteration: 4, loss: 1.23456 } });
    expect(progressLine(s, 2, 10)).toBe(`cpt.warmup  ${status}  4/4  loss 1.235`);
    // No loss in the result: none shown, rather than the progress's.
    expect(progressLine({ ...s, result: { ...base, iteration: 4, loss: null } }, 2, 10)).toBe(`cpt.warmup  ${status}  4/4`);
  });

  it('writes plain lines (no terminal): a finished step its result, a running one its checkpoint, a failed one its cause', () => {
    const base = { stepId: 'x', outputs: {}, attempts: 1, resumedFrom: null, durationSec: 1, finishedAt: '', fingerprint: null, metrics: {} };
    const running = { ...progress(7, 10, 2.5), lastCheckpoint: 6 };
    expect(plainLine(step({ id: 'cpt.warmup', status: 'completed', attempts: 2, progress: progress(2, 4, 9.87654), result: { ...base, iteration: 4, loss: 1.23456 } }))).toBe(
      'cpt.warmup     completed  4/4  loss 1.235  attempt 2',
    );
    expect(plainLine(step({ id: 'sft.stage1', status: 'running', attempts: 1, progress: running }))).toBe('sft.stage1     running 7/10 loss 2.500 checkpoint 6');
    expect(plainLine(step({ id: 'rl.stage1', status: 'failed', attempts: 3, lastFailure: { class: 'hang', message: 'no progress for 300 s' } }))).toBe(
      'rl.stage1      failed attempt 3 (hang: no progress for 300 s)',
    );
  });
});
