/**
 * `infir2 status` in the terminal: one row per step, exact cells. A completed or kept step shows its final
 * result (as the Web UI's stage table does), a running or failed one its progress.
 */
import { describe, expect, it } from 'vitest';
import { attemptLines, failureWords, headlineMetrics, lastWorker, rate, renderStatusTable, renderTimeTable, stallPhaseWords, stepCells } from '../../../src/cli/status-view.js';
import type { AttemptTime } from '../../../src/plan/goodput.js';
import type { Progress, RunStatus, StepResult, StepState } from '../../../src/plan/contracts.js';
import { runTimeFigures, stepTimeFigures } from '../../../src/views/step-figures.js';

function progress(p: Partial<Progress>): Progress {
  return {
    iteration: null, totalIterations: null, loss: null, throughput: null, throughputUnit: null, lastCheckpoint: null,
    resumedFrom: null, attempt: 1, pid: null, updatedAt: '2025-10-01T12:00:00.000Z', ...p,
  };
}

function result(r: Partial<StepResult>): StepResult {
  return {
    stepId: 'x', outputs: {}, iteration: null, loss: null, metrics: {}, attempts: 1, resumedFrom: null, durationSec: 1,
    finishedAt: '2025-10-01T12:00:00.000Z', fingerprint: null, ...r,
  };
}

function state(s: Partial<StepState>): StepState {
  return { id: 'cpt.stable', status: 'pending', attempts: 0, failures: {}, lastFailure: null, progress: null, startedAt: null, endedAt: null, result: null, ...s };
}

/** The heartbeat of the last checkpoint before the end: iteration 2 of 4, a loss the result no longer has. */
const stale = progress({ iteration: 2, totalIterations: 4, loss: 9.87654, lastCheckpoint: 2, throughput: 123.4, throughputUnit: 'tok/s' });

describe('status stepCells', () => {
  it('shows a pending step with dashes', () => {
    expect(stepCells(state({ id: 'sft.stage1' }))).toEqual(['sft.stage1', 'pending', '-', '-', '-', '-', '0', '-', '']);
  });

  it('shows a running step\'s progress: iteration/total, loss, throughput, last checkpoint', () => {
    const s = state({ status: 'running', attempts: 2, progress: progress({ iteration: 1200, totalIterations: 35000, loss: 2.3456789, lastCheckpoint: 1000 }) });
    expect(stepCells(s)).toEqual(['cpt.stable', 'running', '1200/35000', '2.346', '-', '1000', '2', '-', '']);
    expect(stepCells(state({ status: 'running', attempts: 1, progress: progress({ iteration: 0, loss: 0, lastCheckpoint: 0 }) }))).toEqual(
      ['cpt.stable', 'running', '0/?', '0.000', '-', '0', '1', '-', ''],
    );
  });

  it('names the Slurm job of the newest attempt and its nodes', () => {
    const s = state({ status: 'running', attempts: 2, progress: progress({ iteration: 12, totalIterations: 50, job: { scheduler: 'slurm', id: '4711', nodes: 'n[1-2]' } }) });
    expect(stepCells(s).at(-1)).toBe('slurm job 4711 on n[1-2]');
    const pending = state({ status: 'running', attempts: 1, progress: progress({ job: { scheduler: 'slurm', id: '4712', nodes: '' } }) });
    expect(stepCells(pending).at(-1)).toBe('slurm job 4712');
  });

  it('shows a step that waits between attempts (a full disk) as waiting: why, for how long, until when', () => {
    const now = Date.parse('2025-10-01T12:05:00.000Z');
    const s = state({
      status: 'running',
      attempts: 3,
      lastFailure: { class: 'storage', message: 'cpt.stable: storage: disk full on /data/run (12 MB free)' },
      waiting: { reason: 'disk full on /data/run (12 MB free)', since: '2025-10-01T12:02:00.000Z', until: '2025-10-01T12:07:00.000Z' },
      progress: progress({ iteration: 1200, totalIterations: 35000, lastCheckpoint: 1000 }),
    });
    expect(stepCells(s, now)).toEqual(['cpt.stable', 'waiting', '1200/35000', '-', '-', '1000', '3', '-', 'waiting 3m: disk full on /data/run (12 MB free); next attempt in 2m']);
  });

  it('shows a trained step whose checkpoints are still evaluated as evaluating (the steps after it already run)', () => {
    const s = state({ status: 'running', attempts: 1, trainedAt: '2025-10-01T12:00:00.000Z', evals: [{ iteration: 20, scores: { arith: { accuracy: 0.5 } } }] });
    expect(stepCells(s)[1]).toBe('evaluating');
    expect(stepCells({ ...s, status: 'completed' })[1]).toBe('completed');
  });

  it('shows an attempt that waits for GPUs (from its heartbeat), and a warning that the next save will not fit', () => {
    const now = Date.parse('2025-10-01T12:00:45.000Z');
    const waitingForGpus = state({ status: 'running', attempts: 1, progress: progress({ waiting: { reason: 'GPUs: needs 8, 0 of this worker\'s 8 free', since: '2025-10-01T12:00:00.000Z', until: null } }) });
    expect(stepCells(waitingForGpus, now)).toEqual(['cpt.stable', 'waiting', '-', '-', '-', '-', '1', '-', "waiting 45s: GPUs: needs 8, 0 of this worker's 8 free"]);
    const warned = state({ status: 'running', attempts: 1, progress: progress({ iteration: 5, warning: 'the next save will not fit: ~4.1 GB (checkpoint 4), 2.0 GB free on /c' }) });
    expect(stepCells(warned, now).at(-1)).toBe('the next save will not fit: ~4.1 GB (checkpoint 4), 2.0 GB free on /c');
    // a finished step neither waits nor warns
    expect(stepCells({ ...warned, status: 'completed' }, now).at(-1)).toBe('');
  });

  it('shows the stall limit a running trainer is held to, and its phase', () => {
    const s = state({ status: 'running', attempts: 2, progress: progress({ iteration: 40, stallLimit: { phase: 'training', limitSec: 200 } }) });
    expect(stepCells(s).at(-1)).toBe('stall limit 3m20s (training)');
    const saving = state({ status: 'running', attempts: 1, progress: progress({ iteration: 100, stallLimit: { phase: 'saving', limitSec: 1800 } }) });
    expect(stepCells(saving).at(-1)).toBe('stall limit 30m (saving)');
    expect(stepCells({ ...saving, status: 'completed' }).at(-1)).toBe('');
  });

  it.each(['completed', 'kept'] as const)('shows a %s step\'s final result, not its stale progress', (status) => {
    const s = state({ status, attempts: 1, progress: stale, result: result({ iteration: 4, loss: 1.23456 }) });
    expect(stepCells(s)).toEqual(['cpt.stable', status, '4/4', '1.235', '123 tok/s', '4', '1', '-', '']);
  });

  it('shows no stale loss when the result has none, and the total from the result without progress', () => {
    const s = state({ status: 'completed', attempts: 1, progress: progress({ iteration: 5, loss: 7, lastCheckpoint: 5 }), result: result({ iteration: 5 }) });
    expect(stepCells(s)).toEqual(['cpt.stable', 'completed', '5/5', '-', '-', '5', '1', '-', '']);
    expect(stepCells(state({ status: 'completed', attempts: 1, result: result({ iteration: 999, loss: 0.5 }) }))).toEqual(
      ['cpt.stable', 'completed', '999/999', '0.5000', '-', '999', '1', '-', ''],
    );
  });

  it('keeps the progress as the source after a step failed, with its failure', () => {
    const s = state({ status: 'failed', attempts: 3, progress: stale, lastFailure: { class: 'crash', message: 'exit 1' } });
    expect(stepCells(s)).toEqual(['cpt.stable', 'failed', '2/4', '9.877', '123 tok/s', '2', '3', '-', 'crash: exit 1']);
  });

  it("shows an evaluation's accuracy as the Web UI does, and keeps it beside an earlier failure's class", () => {
    const s = state({ id: 'eval.arith', status: 'completed', attempts: 1, result: result({ metrics: { accuracy: 0.857142, n: 30 } }) });
    expect(stepCells(s)).toEqual(['eval.arith', 'completed', '-', '-', '-', '-', '1', '-', 'acc 85.7 %']);
    const retried = { ...s, attempts: 2, lastFailure: { class: 'oom' as const, message: 'CUDA out of memory' } };
    expect(stepCells(retried)[8]).toBe('acc 85.7 % · oom');
  });

  it.each([
    [{ accuracy: 0.5, score: 3 }, 'acc 50.0 %'],
    [{ 'pass@1': 0.4375 }, 'pass@1 43.8 %'],
    [{ score: 12.345 }, 'score 12.3'],
    [{ n: 30, temperature: 0.65, seed: 1, extra: 2 }, 'n=30.0 temperature=0.650 seed=1.00'],
    [{}, ''],
  ])('headlineMetrics(%o) is "%s"', (m, text) => {
    expect(headlineMetrics(m)).toBe(text);
  });
});

describe('renderStatusTable', () => {
  it('renders the heading and aligned columns, a finished step with its result', () => {
    const st: RunStatus = {
      recipe: 'tiny', runId: 'r1', runDir: '/runs/r1', status: 'running', message: null,
      steps: [
        state({ id: 'cpt.warmup', status: 'completed', attempts: 1, progress: stale, result: result({ iteration: 4, loss: 1.25 }) }),
        state({ id: 'sft.stage1', status: 'running', attempts: 1, progress: progress({ iteration: 3, totalIterations: 10, loss: 2 }) }),
        state({ id: 'eval.a', status: 'pending' }),
      ],
    };
    expect(renderStatusTable('tiny-r1', st)).toBe(
      [
        'tiny-r1: running',
        'run dir: /runs/r1',
        '',
        'STEP        STATUS     ITER  LOSS   THROUGHPUT  CKPT  ATTEMPTS  WORKER  NOTES',
        'cpt.warmup  completed  4/4   1.250  123 tok/s   4     1         -',
        'sft.stage1  running    3/10  2.000  -           -     1         -',
        'eval.a      pending    -     -      -           -     0         -',
      ].join('\n'),
    );
  });
});

describe('status lines that neither contradict nor cut themselves', () => {
  it("drops the failure message's own `<step>: <class>: ` and cuts at a word, with an ellipsis", () => {
    const f = { class: 'preempted' as const, message: 'cpt.decay: preempted: the worker shut down; the trainer was stopped and the step resumes on another worker' };
    expect(failureWords('cpt.decay', f, 60)).toBe('the worker shut down; the trainer was stopped and the step…');
    expect(failureWords('cpt.decay', { class: 'crash', message: 'cpt.decay: crash: exit 1' }, 60)).toBe('exit 1');
    const s = state({ id: 'cpt.decay', status: 'running', attempts: 2, lastFailure: f });
    expect(stepCells(s)[8]).toBe('preempted: the worker shut down; the trainer was stopped and the step resumes on…');
  });

  it('does not call a limit startup once the trainer has printed iterations past its start', () => {
    const limit = { phase: 'startup' as const, limitSec: 300 };
    expect(stallPhaseWords(progress({ iteration: null, stallLimit: limit }))).toBe('startup');
    expect(stallPhaseWords(progress({ iteration: 10, resumedFrom: 10, stallLimit: limit }))).toBe('startup');
    expect(stallPhaseWords(progress({ iteration: 360, resumedFrom: 10, stallLimit: limit }))).toBe('no iteration rhythm measured yet');
    expect(stallPhaseWords(progress({ iteration: 360, stallLimit: { phase: 'saving', limitSec: 300 } }))).toBe('saving');
  });

  it('says a cancelled run is cancelled once', () => {
    const st: RunStatus = { recipe: 'tiny', runId: 'r1', runDir: '/runs/r1', status: 'cancelled', message: 'cancelled', steps: [state({ id: 'a' })] };
    expect(renderStatusTable('tiny-r1', st).split('\n')[0]).toBe('tiny-r1: cancelled');
    expect(renderStatusTable('tiny-r1', { ...st, status: 'failed', message: 'step a failed after 1 attempt(s)' }).split('\n')[0]).toBe('tiny-r1: failed — step a failed after 1 attempt(s)');
  });
});

describe('which worker ran each attempt', () => {
  const rec = (attempt: number, worker: string | undefined, failure: AttemptTime['failure'], endedAt: number | null = 2): AttemptTime => ({
    attempt, scheduledAt: 0, endedAt, attributedTo: 0, open: 'overhead', secs: {}, lastIteration: null, failure, ...(worker ? { worker } : {}),
  });

  it("names the newest attempt's worker: a running one's from its heartbeat, else from its record", () => {
    const time = { gpus: 8, attempts: [rec(1, '812@gpu01', 'preempted')] };
    const running = state({ id: 'cpt.stable', status: 'running', attempts: 2, time, progress: progress({ time: rec(2, '907@gpu02', null, null) }) });
    expect(lastWorker(running)).toBe('907@gpu02');
    expect(stepCells(running)[7]).toBe('907@gpu02');
    expect(lastWorker(state({ id: 'cpt.stable', status: 'failed', attempts: 1, time }))).toBe('812@gpu01');
    expect(lastWorker(state({ id: 'cpt.stable', status: 'kept', attempts: 0, time }))).toBeNull();
  });

  it('lists the attempts of the steps that took more than one: number, worker, how each ended', () => {
    const steps = [
      state({ id: 'cpt.warmup', status: 'completed', attempts: 1, time: { gpus: 8, attempts: [rec(1, '812@gpu01', null)] } }),
      state({ id: 'cpt.stable', status: 'completed', attempts: 3, time: { gpus: 8, attempts: [rec(1, '812@gpu01', 'preempted'), rec(2, undefined, 'hang'), rec(3, '907@gpu02', null)] } }),
      state({ id: 'cpt.decay', status: 'running', attempts: 2, time: { gpus: 8, attempts: [rec(1, '907@gpu02', 'crash')] }, progress: progress({ time: rec(2, '907@gpu02', null, null) }) }),
    ];
    expect(attemptLines(steps)).toEqual([
      'attempts (number, worker, how it ended):',
      '  cpt.stable  1 812@gpu01 preempted · 2 (worker not recorded) hang · 3 907@gpu02 completed',
      '  cpt.decay   1 907@gpu02 crash · 2 907@gpu02 running',
    ]);
  });
});

describe('where the time of a cancelled run went', () => {
  it("counts the cancelled step's training, as last heard, instead of the steps before it alone", () => {
    const t0 = Date.parse('2026-11-25T10:00:00Z');
    const rec = (secs: AttemptTime['secs'], end: number | null, at: number): AttemptTime => ({
      attempt: 1, scheduledAt: t0, endedAt: end === null ? null : t0 + end * 1000, attributedTo: t0 + at * 1000, open: end === null ? 'training' : 'overhead', secs, lastIteration: null, failure: null,
    });
    const st: RunStatus = {
      recipe: 'tiny', runId: 'r1', runDir: '/runs/r1', status: 'cancelled', message: 'cancelled',
      steps: [
        state({ id: 'cpt.warmup', status: 'completed', attempts: 1, time: { gpus: 0, attempts: [rec({ startup: 1.5, productive: 0.4, overhead: 0.1 }, 2, 2)] } }),
        state({
          id: 'cpt.stable', status: 'cancelled', attempts: 1, endedAt: new Date(t0 + 17_500).toISOString(), time: { gpus: 0, attempts: [] },
          progress: progress({ iteration: 230, time: rec({ startup: 1, productive: 14 }, null, 15) }),
        }),
      ],
    };
    // Before: 'goodput 20.0 % of 2s' (the warmup alone).
    expect(renderTimeTable(st).split('\n')[0]).toBe('goodput 73.8 % of 20s · other time: overhead 3s, startup 3s'); // 14.4 s of 19.5
    // The same figures where `status --json` and the Web UI read them (one view, views/step-figures.ts).
    expect(runTimeFigures(st.steps)!.goodput).toBeCloseTo(14.4 / 19.5, 3);
    expect(stepTimeFigures(st.steps[1]!)!.secs.productive).toBe(14);
  });
});

describe('throughput', () => {
  it('is written with an SI suffix, never in e-notation', () => {
    expect([0.5, 123.4, 999.4, 999.6, 12_834, 1_049_000].map(rate)).toEqual(['0.5', '123', '999', '1k', '12.8k', '1.05M']);
  });
});
